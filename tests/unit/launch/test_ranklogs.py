"""launch.ranklogs without processes: the heartbeat key, a dump read back, a log's last line."""

import torch.distributed as dist

from commbench.engine.coordination import WATCH_PREFIX, Watch
from commbench.launch import ranklogs

DUMP = """Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/work/commbench/engine/coordination.py", line 90 in beat

Current thread 0x00007f0000000002 (most recent call first):
  File "/venv/torch/distributed/rendezvous.py", line 12 in _create_c10d_store
  File "/work/commbench/engine/coordination.py", line 71 in connect
  File "/work/commbench/engine/session.py", line 139 in join
  File "/work/commbench/engine/scaffold.py", line 85 in rank
  File "/work/commbench/launch/local.py", line 182 in _rank_main
  File "/venv/torch/multiprocessing/spawn.py", line 87 in _wrap
"""


def test_the_watchdog_reads_the_key_the_heartbeat_writes():
    store = dist.HashStore()
    watch = Watch(store, 3, 4, 60.0)
    watch.start_heartbeat(store)
    watch.stop()
    assert store.add(ranklogs.HEARTBEAT_KEY.format(rank=3), 0) == 1
    assert ranklogs.HEARTBEAT_KEY.startswith(WATCH_PREFIX + "/")


def test_a_dump_names_the_main_threads_innermost_frames_above_the_launcher():
    assert ranklogs.describe(DUMP) == ("was at rendezvous.py:12 in _create_c10d_store < "
                                       "coordination.py:71 in connect < session.py:139 in join")
    assert ranklogs.describe(None).startswith("had not reached commbench's code")
    assert ranklogs.describe("") == "wrote no stack"


def test_the_last_line_is_this_launchs_and_not_blank(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_text("launch 1 said this\n")
    start = log.stat().st_size
    assert ranklogs.last_line(log, start) == ""  # nothing written in this launch yet
    log.write_text(log.read_text() + "Traceback ...\nValueError: bad spec\n\n")
    assert ranklogs.last_line(log, start) == "ValueError: bad spec"
    assert ranklogs.last_line(tmp_path / "none.log") == ""
