"""Stalled starts counted: N starts of 6 local ranks, and how many never started.

A stalled start is a local rank that never makes its first heartbeat: the launcher's watchdog
(launch/local.py, START_GRACE_S) then dumps every rank's stack and ends the run naming the rank
and where it was; a launch that does not end at all within --limit counts too. Used by
run_all.py (section `stalls`) and runnable alone, in two modes:

    .venv/bin/python bench/startup.py --starts 300 [--lock /tmp/multirank.lock]
    .venv/bin/python bench/startup.py --in-process --starts 300 [--load 2]

The CLI mode (the default) runs `commbench barrier --nproc 6` with the least timed work, one
process per start (~10 s each: the CLI's import of torch, the sweep, the run folder). The
in-process mode measures the start path alone, ~1 s a start: this process calls
``launch.local.run_local`` itself, as every command does, with doctor's rank
(``engine.probe.probe_rank``: the store connections, the heartbeat, the gloo group, a barrier
and an allreduce), so that the ranks are forked from a launcher in the same state as the
CLI's. --load N keeps N processes spinning meanwhile (stalls were seen under CPU load).
--lock takes an flock around each start, for a machine whose other users start ranks under
the same lock.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# As cli.main does before torch is imported: ranks forked from this process (launch.local
# start_method) must not inherit an OpenMP team.
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from commbench.engine import coordination  # noqa: E402

PYTHON = sys.executable
NPROC = 6
LIMIT_S = 150.0  # a start still running this long has hung (the watchdog ends one at 45 s)
STALL_WORDS = ("made no heartbeat", "never arrived")
# What a rank's log says when the store did not answer a connection attempt and it connected
# again (engine/coordination.py, connect_running_store, prints the same constant): a start that
# went on to run was rescued by that retry, and is counted apart from the starts that needed
# none.
RETRY_WORDS = coordination.RETRY_WORDS

# The ranks' --timeout in the in-process mode: the CLI's default, which is also how long a
# rank's store connection may wait for the store (a wait that long is a stall the watchdog sees).
IN_PROCESS_TIMEOUT_S = 300.0


def rescued(folder: Path) -> bool:
    """Whether any rank of this start needed the store connection's retry."""
    return any(RETRY_WORDS in log.read_text(errors="replace")
               for log in folder.glob("rank-*.log"))


def start_once(scratch: Path, index: int, nproc: int, limit: float) -> tuple[str, str, float]:
    """One launch: (outcome, its error line, wall seconds); outcome is ok, stall, hang or
    failed."""
    command = [PYTHON, "-m", "commbench", "barrier", "--nproc", str(nproc), "--min-time",
               "0.001", "--timeout", "10", "--out", str(scratch), "--name", f"start-{index}",
               "--force", "--quiet"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.communicate()
        return "hang", f"still running after {limit:g} s", time.perf_counter() - started
    wall = time.perf_counter() - started
    error = next((line for line in reversed(err.splitlines()) if line.startswith("error:")), "")
    if proc.returncode in (0, 1):
        return "ok", "", wall
    if any(word in error for word in STALL_WORDS):
        return "stall", error, wall
    return "failed", error or err[-300:], wall


def start_in_process(scratch: Path, index: int, nproc: int, grace: float | None,
                     timeout: float = IN_PROCESS_TIMEOUT_S) -> tuple[str, str, float]:
    """One start in this process, the way commands start local ranks: (outcome, error line,
    wall seconds). The rank's own stderr (a store retry included) goes to this process's
    stderr and to the start's rank logs, as in a real run."""
    from commbench.core.errors import Interrupted, RunFailed
    from commbench.engine.failures import explain
    from commbench.engine.probe import probe_rank
    from commbench.launch.local import START_GRACE_S, run_local

    started = time.perf_counter()
    try:
        run_local(probe_rank, (timeout, ("gloo",)), nproc=nproc, timeout=timeout, cuda=False,
                  explain=explain, folder=scratch / f"start-{index}",
                  start_grace=START_GRACE_S if grace is None else grace)
    except RunFailed as failure:
        error = f"error: {failure}"
        outcome = "stall" if any(word in error for word in STALL_WORDS) else "failed"
        return outcome, error, time.perf_counter() - started
    except Interrupted as stop:
        raise KeyboardInterrupt from stop
    return "ok", "", time.perf_counter() - started


def preload() -> None:
    """What a CLI launcher has imported before it starts ranks (torch, the agent, the rank),
    so that a forked launcher starts from there (start_fresh)."""
    import commbench.engine.failures
    import commbench.engine.probe
    import commbench.launch.local  # noqa: F401


def start_fresh(scratch: Path, index: int, nproc: int, grace: float | None, timeout: float,
                limit: float) -> tuple[str, str, float]:
    """start_in_process in a launcher forked for this start alone: as fresh as the CLI's (torch
    imported; no store, no thread, no start made yet, so every one-time set-up of the store's
    server happens again), at the cost of a fork instead of ~3.5 s of imports."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the launcher
        os.close(read)
        code = 1
        try:
            outcome = start_in_process(scratch, index, nproc, grace, timeout)
            os.write(write, json.dumps(outcome).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    started = time.perf_counter()
    said = b""
    with os.fdopen(read, "rb") as answer:
        ready, _, _ = select.select([answer], [], [], limit)
        if ready:
            said = answer.read()
    if not said and time.perf_counter() - started >= limit:
        os.kill(pid, signal.SIGKILL)  # its ranks die with it (launch.local.die_with_parent)
    _, status = os.waitpid(pid, 0)
    if said:
        outcome, error, wall = json.loads(said)
        return outcome, error, wall
    if time.perf_counter() - started >= limit:
        return "hang", f"still running after {limit:g} s", time.perf_counter() - started
    return "failed", f"the launcher ended with status {status} and no outcome", \
        time.perf_counter() - started


@contextlib.contextmanager
def spinning(processes: int):
    """``processes`` busy loops for the duration (CPU load), ended by their ids."""
    spinners = [subprocess.Popen([PYTHON, "-c", "while True: pass"], start_new_session=True)
                for _ in range(processes)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


@contextlib.contextmanager
def locked(path: str | None):
    if not path:
        yield
        return
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def figures(starts: int, nproc: int = NPROC, lock: str | None = None,
            limit: float = LIMIT_S, say=None, minutes: float | None = None,
            in_process: bool = False, load: int = 0, grace: float | None = None,
            keep: Path | None = None, timeout: float = IN_PROCESS_TIMEOUT_S,
            fresh: bool = True) -> list[dict]:
    """``starts`` launches, fewer where ``minutes`` runs out first. ``keep``: a folder where
    the rank logs and stacks of the starts that did not go well are kept."""
    outcomes: dict[str, int] = {"ok": 0, "stall": 0, "hang": 0, "failed": 0}
    notes, walls = [], []
    retried = 0  # ok starts that the store connection's retry rescued
    if in_process:
        preload()
    with tempfile.TemporaryDirectory(prefix="commbench-startup-") as scratch, spinning(load):
        deadline = time.monotonic() + 60 * minutes if minutes else None
        for index in range(starts):
            if deadline and time.monotonic() > deadline:
                starts = index
                break
            with locked(lock):
                if in_process and fresh:
                    outcome, error, wall = start_fresh(Path(scratch), index, nproc, grace,
                                                       timeout, limit)
                elif in_process:
                    outcome, error, wall = start_in_process(Path(scratch), index, nproc, grace,
                                                           timeout)
                else:
                    outcome, error, wall = start_once(Path(scratch), index, nproc, limit)
            outcomes[outcome] += 1
            walls.append(wall)
            if outcome != "ok":
                notes.append(f"start {index}: {outcome}: {error}")
            if say:
                say(f"start {index + 1}/{starts}: {outcome} ({wall:.2f} s)"
                    + (f": {error}" if error else ""))
            folder = Path(scratch) / f"start-{index}"
            if outcome == "ok" and folder.exists() and rescued(folder):
                retried += 1
                notes.append(f"start {index}: rescued by the store connection's retry")
            if keep is not None and outcome != "ok" and folder.exists():
                shutil.copytree(folder, keep / folder.name, dirs_exist_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
    stalled = outcomes["stall"] + outcomes["hang"]
    per_thousand = 1000 * stalled / starts
    # With none seen, the rule of three: 3/N is the 95% upper bound of the rate.
    bound = 1000 * 3 / starts if stalled == 0 else None
    walls.sort()
    how = ("barrier launches" if not in_process else "starts from a forked launcher" if fresh
           else "starts from one launcher")
    return [{
        "figure": f"stalled starts, {nproc} ranks, {how}" + (f", {load} spinning" if load else ""),
        "value": f"{per_thousand:.1f} per 1,000",
        "detail": (f"{stalled} of {starts} starts ({outcomes['stall']} named by the watchdog, "
                   f"{outcomes['hang']} hung, {outcomes['failed']} failed otherwise); "
                   f"of the {outcomes['ok']} that ran, {retried} only after a rank's store "
                   f"connection was retried (rescued, not stalled); wall per "
                   f"start p50 {percentile(walls, 0.5):.2f} s, p95 {percentile(walls, 0.95):.2f}"
                   f" s, max {walls[-1]:.2f} s"
                   + (f"; 95% upper bound {bound:.1f} per 1,000" if bound else "")
                   + ("; " + " | ".join(notes[:5]) if notes else "")),
        "target": "0", "met": stalled == 0 and outcomes["failed"] == 0,
        "rescued": retried,
    }]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--nproc", type=int, default=NPROC)
    parser.add_argument("--lock", default=None, help="flock this file around each start")
    parser.add_argument("--limit", type=float, default=LIMIT_S)
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop starting launches after this long")
    parser.add_argument("--in-process", action="store_true",
                        help="start the ranks from this process (the start path alone, ~1 s)")
    parser.add_argument("--same-launcher", action="store_true",
                        help="in-process: every start from this process (else from a launcher "
                        "forked for each start, as fresh as the CLI's)")
    parser.add_argument("--load", type=int, default=0, help="processes spinning meanwhile")
    parser.add_argument("--grace", type=float, default=None,
                        help="in-process: the watchdog's grace (default START_GRACE_S)")
    parser.add_argument("--timeout", type=float, default=IN_PROCESS_TIMEOUT_S,
                        help="in-process: the ranks' --timeout")
    parser.add_argument("--attempt", type=float, default=None,
                        help="in-process: seconds a rank's store connection may go unanswered "
                        "before another is made (engine.coordination.CONNECT_ATTEMPT_S; 0: "
                        "one attempt for the whole timeout, as before issue 28)")
    parser.add_argument("--tick-only", action="store_true",
                        help="in-process: the agent notices ranks ending at its next 1 s look "
                        "only (as before issue 28), to measure what noticing it at once saves")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the rank logs and stacks of starts that went wrong here")
    args = parser.parse_args()
    if args.attempt is not None:  # forked ranks inherit this process's module state
        from commbench.engine import coordination

        coordination.CONNECT_ATTEMPT_S = args.attempt or float("inf")
    if args.tick_only:
        from commbench.launch import local

        local.AGENT_PAUSE_S = local.MONITOR_INTERVAL_S
        local._await_end_or_tick = lambda ends, interval: None
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    found = figures(args.starts, args.nproc, args.lock, args.limit,
                    say=lambda text: print(text, file=sys.stderr, flush=True),
                    minutes=args.minutes, in_process=args.in_process, load=args.load,
                    grace=args.grace, keep=args.keep, timeout=args.timeout,
                    fresh=not args.same_launcher)
    for figure in found:
        print(f"{figure['figure']}: {figure['value']} ({figure['detail']})")
    return 0 if all(f["met"] is not False for f in found) else 1


if __name__ == "__main__":
    sys.exit(main())
