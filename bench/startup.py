"""Stalled starts counted: N launches of a 6-rank barrier run, and how many never started.

A stalled start is a local rank that never makes its first heartbeat: the launcher's watchdog
(launch/local.py, START_GRACE_S) then dumps every rank's stack and ends the run naming the rank
and where it was; a launch that does not end at all within --limit counts too. Used by
run_all.py (section `stalls`) and runnable alone:

    .venv/bin/python bench/startup.py --starts 300 [--lock /tmp/multirank.lock]

Each start is `commbench barrier --nproc 6` with the least timed work; --lock takes an flock
around each start, for a machine whose other users start ranks under the same lock.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = sys.executable
NPROC = 6
LIMIT_S = 150.0  # a start still running this long has hung (the watchdog ends one at 45 s)
STALL_WORDS = ("made no heartbeat", "never arrived")


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
            limit: float = LIMIT_S, say=None, minutes: float | None = None) -> list[dict]:
    """``starts`` launches, fewer where ``minutes`` runs out first."""
    outcomes: dict[str, int] = {"ok": 0, "stall": 0, "hang": 0, "failed": 0}
    notes, walls = [], []
    with tempfile.TemporaryDirectory(prefix="commbench-startup-") as scratch:
        deadline = time.monotonic() + 60 * minutes if minutes else None
        for index in range(starts):
            if deadline and time.monotonic() > deadline:
                starts = index
                break
            with locked(lock):
                outcome, error, wall = start_once(Path(scratch), index, nproc, limit)
            outcomes[outcome] += 1
            walls.append(wall)
            if outcome != "ok":
                notes.append(f"start {index}: {outcome}: {error}")
            if say:
                say(f"start {index + 1}/{starts}: {outcome} ({wall:.1f} s)"
                    + (f": {error}" if error else ""))
            with contextlib.suppress(OSError):
                for path in (Path(scratch) / f"start-{index}").glob("*"):
                    path.unlink()
    stalled = outcomes["stall"] + outcomes["hang"]
    per_thousand = 1000 * stalled / starts
    # With none seen, the rule of three: 3/N is the 95% upper bound of the rate.
    bound = 1000 * 3 / starts if stalled == 0 else None
    walls.sort()
    return [{
        "figure": f"stalled starts, {nproc}-rank barrier",
        "value": f"{per_thousand:.1f} per 1,000",
        "detail": (f"{stalled} of {starts} starts ({outcomes['stall']} named by the watchdog, "
                   f"{outcomes['hang']} hung, {outcomes['failed']} failed otherwise); median "
                   f"start {walls[len(walls) // 2]:.1f} s"
                   + (f"; 95% upper bound {bound:.1f} per 1,000" if bound else "")
                   + ("; " + " | ".join(notes[:5]) if notes else "")),
        "target": "0", "met": stalled == 0 and outcomes["failed"] == 0,
    }]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--nproc", type=int, default=NPROC)
    parser.add_argument("--lock", default=None, help="flock this file around each start")
    parser.add_argument("--limit", type=float, default=LIMIT_S)
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop starting launches after this long")
    args = parser.parse_args()
    found = figures(args.starts, args.nproc, args.lock, args.limit,
                    say=lambda text: print(text, file=sys.stderr, flush=True),
                    minutes=args.minutes)
    for figure in found:
        print(f"{figure['figure']}: {figure['value']} ({figure['detail']})")
    return 0 if all(f["met"] is not False for f in found) else 1


if __name__ == "__main__":
    sys.exit(main())
