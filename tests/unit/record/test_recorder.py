"""destroy_process_group under the recorder waits for its completion callbacks (a real
one-rank gloo world, in a child process: the recorder patches torch.distributed for good)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, sys, threading, time
import torch, torch.distributed as dist
from commbench.record import recorder
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
rec = recorder.start(sys.argv[1])
work = dist.all_reduce(torch.ones(4), async_op=True)
work.wait()
time.sleep(0.05)
after_real = rec.callbacks            # the real call's callback ran: 0
with rec.lock:
    rec.callbacks += 1                # one still to run on a gloo thread
threading.Timer(0.3, rec._completed, args=(rec.calls[0],)).start()
started = time.monotonic()
dist.destroy_process_group()
print(json.dumps({"waited": time.monotonic() - started, "after_real": after_real,
                  "left": rec.callbacks, "ended": rec.calls[0].t_end_ns is not None}))
"""


def test_destroy_waits_for_the_recorders_callbacks(tmp_path):
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "trace")],
                          capture_output=True, text=True, timeout=60,
                          env={"GLOO_SOCKET_IFNAME": "lo", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["after_real"] == 0 and found["ended"]
    assert found["waited"] >= 0.3 and found["left"] == 0, found


LEAVE = r"""
import json, os, sys
import torch, torch.distributed as dist
os.environ["COMMBENCH_RECORD_STEPS"] = "2"
from commbench.core import compat
from commbench.record import recorder
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
rec = recorder.start(sys.argv[1])
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
modes = []
for step in range(4):
    model(torch.ones(2, 4)).sum().backward()
    dist.all_reduce(torch.ones(4))
    opt.step()
    modes.append(compat.current_dispatch_mode() is rec)
print(json.dumps({"modes": modes, "calls": len(rec.calls), "step": rec.step}))
"""


def test_past_its_steps_the_recorder_leaves_the_job_alone(tmp_path):
    """With --steps 2 the mode is popped at the second step end: the later steps' ops no
    longer pass through it (their allreduces are not recorded, and cost nothing)."""
    done = subprocess.run([sys.executable, "-c", LEAVE, str(tmp_path / "trace")],
                          capture_output=True, text=True, timeout=60,
                          env={"GLOO_SOCKET_IFNAME": "lo", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["modes"] == [True, False, False, False], found
    assert found["calls"] == 2 and found["step"] == 2, found
