"""A rank that dies, hangs or raises ends the run in bounded time, with rows kept
(docs/reference/exit-codes.md).

Real processes, real signals: the victim's pid comes from run.json, written before any row.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import read_meta, read_rows

pytestmark = pytest.mark.integration


def start(tmp_path, *args, env=None):
    out = tmp_path / "results"
    proc = subprocess.Popen(
        # --rounds 1: sizes one after the other, each row written as it is measured, so a
        # failure lands mid-op (with rounds an op's rows come at its end: test_rounds.py).
        [sys.executable, "-m", "commbench", "allreduce", "--sizes", "8-16M", "--min-time", "0.3",
         "--rounds", "1", "--out", str(out), "--name", "victim", "--quiet", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    return proc, out / "victim"


def wait_for_rows(run_dir, rows=2, limit=60):
    deadline = time.monotonic() + limit
    jsonl = run_dir / "results.jsonl"
    while time.monotonic() < deadline:
        if jsonl.exists() and jsonl.read_text().count("\n") >= rows:
            return [r["pid"] for r in json.loads((run_dir / "run.json").read_text())["ranks"]]
        time.sleep(0.05)
    raise AssertionError("no rows appeared")


def finish(proc, limit):
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=limit)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return err, time.monotonic() - started


def assert_no_survivors(pids):
    time.sleep(0.3)
    alive = [pid for pid in pids if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def assert_partial(run_dir, message):
    rows = read_rows(run_dir)
    assert len(rows) >= 2 and all(r["wrong"] == 0 for r in rows)
    meta = read_meta(run_dir)
    assert meta["status"] == "partial" and message in meta["error"]
    assert (run_dir / "results.csv").exists() and (run_dir / "summary.md").exists()


@pytest.mark.core
def test_a_killed_rank_ends_the_run_within_seconds(tmp_path):
    proc, run_dir = start(tmp_path)
    pids = wait_for_rows(run_dir)
    os.kill(pids[1], signal.SIGKILL)
    err, elapsed = finish(proc, 30)
    assert proc.returncode == 3, err
    assert elapsed < 30  # seconds, not the 300 s --timeout: the death is seen, not waited out
    assert "rank 1 died (SIGKILL) during allreduce" in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert_partial(run_dir, "rank 1 died (SIGKILL)")
    assert_no_survivors([proc.pid, *pids])


@pytest.mark.core
def test_a_stopped_rank_ends_the_run_after_the_timeout(tmp_path):
    proc, run_dir = start(tmp_path, "--timeout", "3")
    pids = wait_for_rows(run_dir)
    os.kill(pids[1], signal.SIGSTOP)
    err, elapsed = finish(proc, 40)
    assert proc.returncode == 3, err
    # the timeout plus detection (2.5 heartbeats) and 2 s grace, with room for a loaded 2-core
    # machine: bounded well inside the default --timeout of 300 s is what is checked
    assert 3 <= elapsed < 3 + 25
    assert "timeout after 3s in allreduce at" in err
    assert "rank 1 stopped responding" in err
    assert_partial(run_dir, "rank 1 stopped responding")
    assert_no_survivors([proc.pid, *pids])


def test_a_stopped_rank_in_a_mesh_group_ends_the_run_after_the_timeout(tmp_path):
    """Mesh groups take --timeout too (torch's own default for gloo groups is 30 minutes)."""
    proc, run_dir = start(tmp_path, "--timeout", "3", "--mesh", "dp=1,tp=2", "--dim", "tp")
    pids = wait_for_rows(run_dir)
    os.kill(pids[1], signal.SIGSTOP)
    err, elapsed = finish(proc, 40)
    assert proc.returncode == 3, err
    assert 3 <= elapsed < 3 + 25
    assert "timeout after 3s in allreduce at" in err and "rank 1 stopped responding" in err
    assert_no_survivors([proc.pid, *pids])


def test_a_rank_raising_names_itself_and_the_size(tmp_path):
    proc, run_dir = start(tmp_path, env={"COMMBENCH_FAULT": "raise:1:allreduce:64"})
    err, elapsed = finish(proc, 60)
    assert proc.returncode == 3, err
    assert "rank 1: injected fault in allreduce at 64 (gloo)" in err
    rows = read_rows(run_dir)
    assert [r["size_bytes"] for r in rows] == [8, 16, 32]
    assert read_meta(run_dir)["status"] == "partial"


def test_ctrl_c_stops_cleanly_with_130(tmp_path):
    proc, run_dir = start(tmp_path)
    pids = wait_for_rows(run_dir)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the foreground group
    err, elapsed = finish(proc, 30)
    assert proc.returncode == 130, err
    assert elapsed < 30 and "stopped by SIGINT" in err
    assert_partial(run_dir, "SIGINT")
    assert_no_survivors([proc.pid, *pids])


def test_a_run_cut_by_ctrl_c_fails_the_ci_gate_against_a_complete_baseline(tmp_path):
    from tests.conftest import commbench

    done, baseline = commbench(["allreduce", "--sizes", "8-16M", "-n", "2", "-w", "0",
                                "--quiet", "--name", "baseline"], tmp_path / "base")
    assert done.returncode == 0, done.stderr
    proc, run_dir = start(tmp_path)
    wait_for_rows(run_dir)
    os.killpg(proc.pid, signal.SIGINT)
    finish(proc, 30)
    kept = len(read_rows(run_dir))
    gate = subprocess.run([sys.executable, "-m", "commbench", "compare", str(baseline),
                           str(run_dir), "--fail-on-regression"],
                          capture_output=True, text=True, timeout=60)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "victim is partial (stopped by SIGINT)" in gate.stderr
    assert f"new lacks {22 - kept} of 22 sizes of allreduce gloo" in gate.stderr
    assert "cannot pass the gate" in gate.stderr


def test_sigterm_stops_cleanly_with_143(tmp_path):
    """What a scheduler sends at a job's time limit: 128 + 15, rows kept, no survivors."""
    proc, run_dir = start(tmp_path)
    pids = wait_for_rows(run_dir)
    os.kill(proc.pid, signal.SIGTERM)
    err, elapsed = finish(proc, 30)
    assert proc.returncode == 143, err
    assert elapsed < 30 and "stopped by SIGTERM" in err
    assert_partial(run_dir, "SIGTERM")
    assert_no_survivors([proc.pid, *pids])


def test_a_rank_that_never_arrives_is_named(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "commbench", "doctor", "--timeout", "3"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - started < 15
    assert "rank 1 never arrived" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.core
def test_killing_the_launcher_takes_its_ranks_along(tmp_path):
    proc, run_dir = start(tmp_path)
    pids = wait_for_rows(run_dir)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert_no_survivors(pids)
    assert len(read_rows(run_dir)) >= 2  # every finished row is on disk


def test_a_failure_inside_the_rounds_keeps_every_size_measured_so_far(tmp_path):
    """Default --rounds: an op's rows come at its end, so a failure in its first round must
    still leave the sizes that round measured on disk, marked unchecked
    (docs/reference/exit-codes.md#when-something-goes-wrong-in-a-run)."""
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "commbench", "allreduce", "--sizes", "8-1K", "--min-time", "0.2",
         "--out", str(out), "--name", "cut", "--quiet"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "COMMBENCH_FAULT": "raise:1:allreduce:64"})
    assert done.returncode == 3, done.stderr
    rows = read_rows(out / "cut")
    assert [(r["size_bytes"], r["rounds"]) for r in rows] == [(8, 1), (16, 1), (32, 1)]
    assert all(r["validation"].startswith("off: the run ended") for r in rows)
    assert read_meta(out / "cut")["status"] == "partial"


# ---- a rank's own failure worded by diagnose(), not by the injector ------------------------

RAISING_SITECUSTOMIZE = '''
import os
import torch.distributed as dist

_real = dist.all_reduce


def all_reduce(tensor, *args, **kwargs):
    # rank 1's measured all_reduce of 64 bytes fails the way a backend does: an exception
    # out of the call itself (commbench then has to word it)
    if os.environ.get("RANK") == "1" and tensor.numel() * tensor.element_size() == 64:
        raise ValueError("the backend refused this buffer")
    return _real(tensor, *args, **kwargs)


dist.all_reduce = all_reduce
'''


@pytest.mark.core
def test_a_rank_whose_call_raises_is_named_through_diagnose(tmp_path):
    """The README's 'rank 1: ValueError in allreduce at 64': the exception comes out of the
    torch.distributed call (not commbench's injector), and diagnose() words it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(RAISING_SITECUSTOMIZE)
    proc, run_dir = start(tmp_path, env={"PYTHONPATH": str(site)})
    err, _ = finish(proc, 60)
    assert proc.returncode == 3, err
    assert ("rank 1: ValueError in allreduce at 64 (gloo): the backend refused this buffer"
            in err), err
    assert [r["size_bytes"] for r in read_rows(run_dir)] == [8, 16, 32]


def test_a_survivor_says_it_lost_a_peer_when_a_rank_dies_mid_call(tmp_path):
    """Two ranks of an external launcher (no local agent to name the dead rank): rank 0's own
    diagnosis of the broken connection is what the user reads."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "results"
    ranks = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        ranks.append(subprocess.Popen(
            [sys.executable, "-m", "commbench", "allreduce", "--sizes", "8-16M", "--min-time",
             "0.3", "--rounds", "1", "--out", str(out), "--name", "peer", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True))
    try:
        wait_for_rows(out / "peer")
        ranks[1].kill()
        err, elapsed = finish(ranks[0], 30)
    finally:
        for proc in ranks:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert ranks[0].returncode == 3, err
    assert "rank 0: lost a peer in allreduce at" in err, err
    assert elapsed < 40


# ---- start-up: a stalled start, a rank that dies before it can report --------------------

STALLING_LAUNCH = '''
import os, sys, time
os.environ.setdefault("OMP_NUM_THREADS", "1")  # as cli.main, before torch: the ranks fork
from commbench.core.errors import RunFailed
from commbench.engine.failures import explain
from commbench.engine.scaffold import rank
from commbench.launch.local import run_local


def stall_before_joining(env):
    if env.rank == 1:
        time.sleep(3600)  # a rank that never makes its first heartbeat
    with rank(env, 10, ("gloo",), False):
        pass


def die_before_joining(env):
    if env.rank == 1:
        raise ValueError("a spec this rank cannot parse")
    with rank(env, 10, ("gloo",), False):
        pass


entry = {"stall": stall_before_joining, "die": die_before_joining}[sys.argv[1]]
try:
    run_local(entry, (), nproc=3, timeout=10, cuda=False, explain=explain, folder=sys.argv[2],
              start_grace=3)
except RunFailed as failure:
    print(f"error: {failure}")
    sys.exit(3)
'''


def launch(tmp_path, kind):
    script = tmp_path / "launch.py"
    script.write_text(STALLING_LAUNCH)
    folder = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(script), kind, str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=os.getcwd())
    out, err = proc.communicate(timeout=90)
    return proc, out, err, folder, time.monotonic() - started


@pytest.mark.core
def test_a_rank_that_never_starts_is_named_with_where_it_was(tmp_path):
    proc, out, err, folder, elapsed = launch(tmp_path, "stall")
    assert proc.returncode == 3, out + err
    assert "rank 1 made no heartbeat within 3s of the launch" in out, out
    assert "in stall_before_joining" in out  # the top of its stack
    stack = (folder / "rank-1.stack").read_text()
    assert "stall_before_joining" in stack
    assert "_rank_main" in (folder / "rank-0.stack").read_text()  # every rank is dumped
    assert elapsed < 30  # not the ranks' own 75 s start-up wait
    time.sleep(0.3)
    with pytest.raises(ProcessLookupError):  # no rank outlived the launcher
        os.killpg(proc.pid, 0)


@pytest.mark.core
def test_a_rank_that_dies_before_it_can_report_leaves_its_last_words(tmp_path):
    proc, out, err, folder, _ = launch(tmp_path, "die")
    assert proc.returncode == 3, out + err
    assert ("rank 1 exited with code 1; its last stderr line: ValueError: a spec this rank "
            "cannot parse") in out, out
    log = (folder / "rank-1.log").read_text()
    assert "Traceback" in log and "in die_before_joining" in log
    assert "ValueError: a spec this rank cannot parse" in err  # still on the console too
    assert not (folder / "rank-1.stack").exists()  # no dump was asked for


def test_a_bad_fault_spec_is_said_in_the_error_line(tmp_path):
    """A rank fails after joining but before any reporting of its own (the spec is parsed
    there): the error says why, not only 'exited with code 1'."""
    proc, run_dir = start(tmp_path, env={"COMMBENCH_FAULT": "bogus:1"})
    err, elapsed = finish(proc, 60)
    assert proc.returncode == 3, err
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert "its last stderr line: ValueError: COMMBENCH_FAULT: unknown action 'bogus'" in \
        error[0]
    # the run folder keeps every rank's stderr: the dead rank's reason is on disk too
    assert "unknown action 'bogus'" in (run_dir / "rank-0.log").read_text()
