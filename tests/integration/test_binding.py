"""--bind on real gloo ranks, observed from outside while they measure: each rank's main thread
(the one that calls the collectives) on a CPU of its own, every other thread of the rank
(gloo's, the heartbeat's) on every CPU; --bind none leaves every thread on every CPU."""

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from commbench.launch.storehost import NAME as STORE_HOST
from tests.conftest import read_meta

pytestmark = [
    pytest.mark.integration,
    pytest.mark.capability,
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                       reason="binding needs 2 CPUs to be seen"),
]


def children(pid: int) -> list[int]:
    """The launcher's ranks: its children but the store's host process (launch.storehost)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                name = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if int(fields[1]) == pid and name != STORE_HOST:
                found.append(int(entry.name))
    return found


def threads(pid: int) -> dict[int, tuple[str, set[int]]]:
    """tid -> (its name, the CPUs it may run on)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended
            out[int(task.name)] = ((task / "comm").read_text().strip(),
                                   os.sched_getaffinity(int(task.name)))
    return out


@dataclass
class Seen:
    name: str
    first: float  # seconds into the run it was first seen
    last: float
    cpus: set[int]  # when last seen


def watch(tmp_path, bind: str) -> tuple[dict[int, dict[int, Seen]], Path]:
    """A 2-rank run, every rank's threads read every 0.1 s while it runs. It measures on a
    mesh dimension: that group is made after the binding, from the bound thread, so its
    gloo threads start on the bound CPU and must be spread again."""
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "commbench", "allreduce", "--sizes", "8,64K", "--min-time", "3",
         "--rounds", "2", "--nproc", "2", "--mesh", "dp=2", "--dim", "dp", "--bind", bind,
         "--quiet", "--out", str(out), "--name", bind],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[int, dict[int, Seen]] = {}
    started = time.monotonic()
    try:
        while launcher.poll() is None and time.monotonic() - started < 90:
            now = time.monotonic() - started
            for pid in children(launcher.pid):
                with contextlib.suppress(OSError):  # the rank ended
                    for tid, (name, cpus) in threads(pid).items():
                        known = seen.setdefault(pid, {}).setdefault(tid, Seen(name, now, now,
                                                                              cpus))
                        known.last, known.cpus = now, cpus
            time.sleep(0.1)
        assert launcher.wait(timeout=30) == 0, launcher.stderr.read()[-3000:]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return seen, out / bind


def test_bound_ranks_run_their_main_thread_alone_on_a_core(tmp_path):
    """Every thread but the main one ends up on every CPU: those torch starts lazily during
    the sweep (one, after the first round) from the bound thread are spread at the next visit
    of a size (every 1.5 s here), so only a thread that appeared in the last 2 s may still
    be seen on one CPU."""
    allowed = os.sched_getaffinity(0)
    looks, run_dir = watch(tmp_path, "auto")
    assert len(looks) == 2
    bound = []
    for pid, tasks in looks.items():
        main = tasks[pid]
        assert len(main.cpus) == 1, (pid, main)
        bound.append(next(iter(main.cpus)))
        others = [t for tid, t in tasks.items() if tid != pid]
        assert any(t.name.startswith("pt_gloo") for t in others), others
        end = max(t.last for t in tasks.values())
        assert all(t.cpus == allowed for t in others if t.first < end - 2.0), others
    assert len(set(bound)) == 2  # a core each, not the same one
    assert sorted(r["bound_cpu"] for r in read_meta(run_dir)["ranks"]) == sorted(bound)
    assert read_meta(run_dir)["config"]["bind"] == "auto"


def test_bind_none_leaves_every_thread_unbound(tmp_path):
    allowed = os.sched_getaffinity(0)
    looks, run_dir = watch(tmp_path, "none")
    assert len(looks) == 2
    for tasks in looks.values():
        assert all(t.cpus == allowed for t in tasks.values()), tasks
    assert [r["bound_cpu"] for r in read_meta(run_dir)["ranks"]] == [None, None]
