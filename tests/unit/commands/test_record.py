"""`commbench record` does not leave its command running when it is killed (kill -9 too)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_the_command_dies_with_a_killed_record(tmp_path):
    record = subprocess.Popen([sys.executable, "-m", "commbench", "record", "--out",
                               str(tmp_path / "trace"), "--", sys.executable, "-c",
                               "import time; time.sleep(60)"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not _children(record.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (child,) = _children(record.pid)
    os.kill(record.pid, signal.SIGKILL)
    record.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the recorded command outlived commbench record"


def test_the_job_keeps_its_own_thread_count(tmp_path):
    """commbench sets OMP_NUM_THREADS=1 for its own ranks (launch.environment); a recorded
    job is the user's, and must start with what the user gave it, unset included."""
    probe = "import os; print(os.environ.get('OMP_NUM_THREADS'))"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    for given, seen in ((None, "None"), ("3", "3")):
        done = subprocess.run(
            [sys.executable, "-m", "commbench", "record", "--out", str(tmp_path / str(given)),
             "--", sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
            env={**env, **({"OMP_NUM_THREADS": given} if given else {})})
        assert done.stdout.split()[:1] == [seen], done.stdout + done.stderr[-2000:]
