"""The CI gate measured: A/A false `slower` rate, power on planted proportional slowdowns, and
how much of the A/A difference is between launches vs within one. Used by run_all.py (section
`gate`) and runnable alone:

    .venv/bin/python bench/gate.py --pairs 10 --rounds 5 --min-time 1.5

A/A: back-to-back runs of one command, each pair compared (base = the earlier run). Power: a
baseline against a run whose every allreduce costs FACTOR times its own time inside the ranks
(COMMBENCH_FAULT=slow=FACTOR, engine/faults.py), runs alternated so drift hits both sides.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = sys.executable
SIZES = "4K,64K,1M"


def measure(scratch: Path, name: str, rounds: int, min_time: float, repeat: int = 1,
            env: dict | None = None) -> tuple[list[dict], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-m", "commbench", "allreduce", "--sizes", SIZES, "--nproc", "2", "--rounds",
         str(rounds), "--repeat", str(repeat), "--min-time", str(min_time), "--out",
         str(scratch), "--name", name, "--quiet", "--force"],
        capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    rows = [json.loads(line) for line in (scratch / name / "results.jsonl").read_text()
            .splitlines()]
    return rows, wall


def compare(scratch: Path, base: str, new: str, threshold: str = "5%") -> list[dict]:
    done = subprocess.run([PYTHON, "-m", "commbench", "compare", str(scratch / base),
                           str(scratch / new), "--json", "--threshold", threshold],
                          capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()[:-1]]


def components(runs: list[list[dict]]) -> dict[int, tuple[float, float]]:
    """Per size: (SD between launches, SD within one) of log median time. Within: the
    standard error of a launch's median from its rounds, SD(log round medians) / sqrt(R);
    between: what the spread of launch medians holds beyond that."""
    found = {}
    for size in sorted({r["size_bytes"] for run in runs for r in run}):
        medians, within = [], []
        for run in runs:
            for row in (r for r in run if r["size_bytes"] == size):
                medians.append(math.log(row["lat_us_p50"]))
                rounds = [math.log(v) for v in row.get("round_p50_us") or []]
                if len(rounds) >= 2:
                    within.append(statistics.variance(rounds) / len(rounds))
        total = statistics.variance(medians) if len(medians) > 1 else 0.0
        inside = statistics.mean(within) if within else float("nan")
        found[size] = (math.sqrt(max(0.0, total - inside)), math.sqrt(inside))
    return found


def gate(scratch: Path, pairs: int, rounds: int, min_time: float, repeat: int = 1,
         factors: tuple[float, ...] = (1.25, 1.5), power_pairs: int = 5) -> dict:
    """Every figure of one configuration (rounds, min_time, repeat)."""
    tag = f"r{rounds}-t{min_time}-k{repeat}"
    walls, runs, aa = [], [], []
    for index in range(pairs):
        for side in ("a", "b"):
            rows, wall = measure(scratch, f"{tag}-{index}{side}", rounds, min_time, repeat)
            runs.append(rows)
            walls.append(wall)
        aa += compare(scratch, f"{tag}-{index}a", f"{tag}-{index}b")
    result = {"config": tag, "pairs": pairs, "rows": len(aa)}
    if aa:
        result.update(_aa_figures(aa, runs, walls))
    for factor in factors:
        verdicts = []
        for index in range(power_pairs):
            base, slow = f"{tag}-p{factor}-{index}a", f"{tag}-p{factor}-{index}b"
            order = ((base, None), (slow, factor)) if index % 2 == 0 else (
                (slow, factor), (base, None))
            for name, slowed in order:
                env = {"COMMBENCH_FAULT": f"slow={slowed}:*:allreduce"} if slowed else None
                measure(scratch, name, rounds, min_time, repeat, env)
            verdicts += compare(scratch, base, slow)
        result[f"power_{factor}"] = (sum(r["verdict"] == "slower" for r in verdicts),
                                     len(verdicts),
                                     statistics.median([r["ratio"] for r in verdicts]))
    return result


def _aa_figures(aa: list[dict], runs: list[list[dict]], walls: list[float]) -> dict:
    return {"false_slower": sum(r["verdict"] == "slower" for r in aa),
            "false_faster": sum(r["verdict"] == "faster" for r in aa),
            "noisy": sum(r["verdict"] == "noisy" for r in aa),
            "aa_log_ratio_sd": statistics.pstdev([math.log(r["ratio"]) for r in aa]),
            "ratio_ci_halfwidth_median": statistics.median(
                [(r["ratio_hi"] - r["ratio_lo"]) / 2 for r in aa]),
            "wall_s_median": statistics.median(walls),
            "unstable_rows": sum(bool(r.get("unstable")) for run in runs for r in run),
            "all_rows": sum(len(run) for run in runs),
            "components": {str(k): v for k, v in components(runs).items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--power-pairs", type=int, default=5)
    parser.add_argument("--rounds", type=int, nargs="+", default=[5])
    parser.add_argument("--min-time", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--factors", type=float, nargs="*", default=[1.25, 1.5])
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="commbench-gate-"))
    for rounds in args.rounds:
        found = gate(scratch, args.pairs, rounds, args.min_time, args.repeat,
                     tuple(args.factors), args.power_pairs)
        print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
