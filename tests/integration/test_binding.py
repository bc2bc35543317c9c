"""--bind on real gloo ranks, observed from outside while they measure: each rank's main thread
(the one that calls the collectives) on a CPU of its own, every other thread of the rank
(gloo's, the heartbeat's) on every CPU; --bind none leaves every thread on every CPU."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import read_meta

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                       reason="binding needs 2 CPUs to be seen"),
]


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def threads(pid: int) -> dict[int, set[int]]:
    """tid -> the CPUs it may run on."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended
            out[int(task.name)] = os.sched_getaffinity(int(task.name))
    return out


def watch(tmp_path, bind: str) -> tuple[list[dict[int, dict[int, set[int]]]], Path]:
    """Start a 2-rank run and read its ranks' threads once both are measuring. It measures
    on a mesh dimension: that group is made after the binding, from the bound thread, so
    its gloo threads start on the bound CPU and must be spread again."""
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "commbench", "allreduce", "--sizes", "8,64K", "--min-time", "3",
         "--rounds", "2", "--nproc", "2", "--mesh", "dp=2", "--dim", "dp", "--bind", bind,
         "--quiet", "--out", str(out), "--name", bind],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: list[dict] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            ranks = children(launcher.pid)
            if len(ranks) == 2:
                looks = {pid: threads(pid) for pid in ranks}
                # measuring: each rank has its gloo threads and has been bound (or not)
                if all(len(t) > 2 for t in looks.values()):
                    time.sleep(2.0)  # well inside the sweep (6 s of timing)
                    seen.append({pid: threads(pid) for pid in ranks})
                    break
        assert launcher.wait(timeout=90) == 0, launcher.stderr.read()[-3000:]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert seen, "never saw both ranks measuring"
    return seen, out / bind


def test_bound_ranks_run_their_main_thread_alone_on_a_core(tmp_path):
    allowed = os.sched_getaffinity(0)
    (looks,), run_dir = watch(tmp_path, "auto")
    bound = []
    for pid, tasks in looks.items():
        assert tasks[pid] != allowed and len(tasks[pid]) == 1, (pid, tasks)
        bound.append(next(iter(tasks[pid])))
        others = [cpus for tid, cpus in tasks.items() if tid != pid]
        assert others and all(cpus == allowed for cpus in others), tasks
    assert len(set(bound)) == 2  # a core each, not the same one
    assert sorted(r["bound_cpu"] for r in read_meta(run_dir)["ranks"]) == sorted(bound)
    assert read_meta(run_dir)["config"]["bind"] == "auto"


def test_bind_none_leaves_every_thread_unbound(tmp_path):
    allowed = os.sched_getaffinity(0)
    (looks,), run_dir = watch(tmp_path, "none")
    for tasks in looks.values():
        assert all(cpus == allowed for cpus in tasks.values()), tasks
    assert [r["bound_cpu"] for r in read_meta(run_dir)["ranks"]] == [None, None]
