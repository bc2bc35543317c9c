"""Does `commbench stragglers` name the rank that made a real job wait, and nobody in a clean
one? And what does recording cost? (docs/project/accuracy.md; the issue's targets: at 10 % of
a step, the culprit named alone in >= 19 of 20; nobody in 20 clean; recording <= 1.02x.)

1. real jobs: examples/ddp_mlp.py on 4 gloo ranks recorded with `commbench record`; clean,
   and with rank 2's forward slowed (COMMBENCH_EXAMPLE_SLOW) by 10 % and 5 % of the clean
   step time measured first; each job judged from its trace;
2. synthetic traces at 64-1,024 ranks with the lateness noise measured in the clean real jobs
   here (median and sigma of their step lateness), a rank slowed by 10 % and 5 % of a step;
3. the cost of recording: the DDP job's median step time with and without `record`, in
   alternated pairs.

Every multi-rank job runs under the shared lock (COMMBENCH_BENCH_LOCK, default
/tmp/commbench-ranks.lock), one job at a time; with COMMBENCH_BENCH_LOCK= (empty) the caller
holds it, so a slice of a few jobs runs under one ``flock``:

    python bench/stragglers.py [--clean 20] [--slowed 20] [--pairs 5] [--synthetic 20]
    COMMBENCH_BENCH_LOCK= flock /tmp/commbench-ranks.lock python bench/stragglers.py \
        --clean 0 --slowed 6 --fractions 0.10 --step-s 0.044 --pairs 0 --synthetic 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LOCK = os.environ.get("COMMBENCH_BENCH_LOCK", "/tmp/commbench-ranks.lock")
MODEL = ["--width", "256", "--layers", "3", "--bucket-mb", "0.3"]
STEPS = 200  # a few seconds of a 16 ms step; --steps changes it
SLOW_RANK = 2


def job(scratch: Path, name: str, env: dict, recorded: bool = True,
        record_steps: int | None = None, flight: bool = False) -> tuple[dict, Path]:
    """One 4-rank DDP job (under the lock); returns (the example's facts, trace folder).
    ``record_steps``: record only the first K steps (``record --steps K``); ``flight``:
    ``record --flight-recorder``."""
    facts = scratch / f"{name}-facts.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
               str(ROOT / "examples" / "ddp_mlp.py"), "--steps", str(STEPS), "--facts",
               str(facts), *MODEL]
    folder = scratch / name
    if recorded:
        limit = ["--steps", str(record_steps)] if record_steps else []
        limit += ["--flight-recorder"] if flight else []
        command = [sys.executable, "-m", "commbench", "record", "--force", "--out",
                   str(folder), *limit, "--", *command]
    subprocess.run(["flock", LOCK, *command] if LOCK else command, check=True,
                   capture_output=True, timeout=600, cwd=scratch,
                   env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    return json.loads(facts.read_text()), folder


def judge(folder: Path) -> dict:
    from commbench.results import trace as trace_format
    from commbench.stragglers import analyse

    analysis = analyse(trace_format.load(folder))
    return {"named": [(r.rank, r.verdict) for r in analysis.named],
            "cells": [v for rank, cells in analysis.step_lateness.items()
                      for v in cells.values() if rank != SLOW_RANK]}


def real(clean: int, slowed: int, fractions: tuple[float, ...], scratch: Path,
         step_s: float | None = None) -> dict:
    out: dict = {"clean": [], "step_s": [], "slowed": {}}
    for i in range(clean):
        facts, folder = job(scratch, f"clean-{i}", {})
        out["step_s"].append(facts["step_s"])
        verdict = judge(folder)
        out["clean"].append(verdict["named"])
        out.setdefault("noise_cells", []).extend(verdict["cells"])
    step = step_s or (statistics.median(out["step_s"]) if out["step_s"] else 0.02)
    for fraction in fractions:
        named = []
        for i in range(slowed):
            env = {"COMMBENCH_EXAMPLE_SLOW": f"{SLOW_RANK}:{fraction * step:.4f}"}
            _, folder = job(scratch, f"slow-{fraction}-{i}", env)
            named.append(judge(folder)["named"])
        out["slowed"][fraction] = named
    out["clean_step_s"] = step
    return out


def synthetic(noise_cells: list[float], step_s: float, trials: int, scratch: Path,
              fractions: tuple[float, ...] = (0.10, 0.05)) -> list:
    """At 64-1,024 ranks, noise from the real clean jobs' cells (their median and sigma)."""
    from commbench.results import trace as trace_format
    from commbench.stragglers import analyse
    from tests.unit.stragglers.synthetic import ddp_job

    cells = sorted(noise_cells) or [0.001]
    median = statistics.median(cells)
    sigma = 1.4826 * statistics.median(abs(c - median) for c in cells)
    rows = []
    for ranks in (64, 256, 1024):
        for fraction in (0.0, *fractions):
            found = alone = false = 0
            n = max(1, trials // (4 if ranks == 1024 else 1))
            for seed in range(n):
                folder = scratch / f"syn-{ranks}-{fraction}-{seed}"
                slow = {ranks // 3: fraction * step_s} if fraction else None
                ddp_job(folder, world=ranks, steps=STEPS, buckets=2, compute_s=step_s,
                        noise_s=max(sigma, 1e-6), slow=slow, seed=seed)
                named = {r.rank for r in analyse(trace_format.load(folder)).named}
                if fraction:
                    found += ranks // 3 in named
                    alone += named == {ranks // 3}
                false += len(named - ({ranks // 3} if fraction else set()))
                for path in folder.iterdir():
                    path.unlink()
                folder.rmdir()
            rows.append({"ranks": ranks, "fraction": fraction, "trials": n, "found": found,
                         "alone": alone, "false_named": false})
    return rows


def cost(pairs: int, scratch: Path, record_steps: int | None = None,
         flight: bool = False) -> dict:
    """Median step time with and without ``record``, in alternated pairs. With
    ``record_steps`` K the recorded job records its first K steps only (``record --steps``),
    and both sides' medians are over the steps after K: what the job pays once the recorder
    left; with ``flight`` it is ``record --flight-recorder``."""
    plain, recorded = [], []
    for i in range(pairs):
        for with_record in ((False, True) if i % 2 == 0 else (True, False)):
            facts, _ = job(scratch, f"cost-{i}-{with_record}", {}, recorded=with_record,
                           record_steps=record_steps, flight=flight)
            # past --steps K, the steps after the recorder left, on both sides alike: the
            # job's median over all steps also held the K recorded ones (read 1.13x at K 20)
            times = facts["step_times_s"][(record_steps or 0) + 1:]
            (recorded if with_record else plain).append(statistics.median(times))
    return {"plain_s": statistics.median(plain), "recorded_s": statistics.median(recorded),
            "ratio": statistics.median(recorded) / statistics.median(plain), "pairs": pairs,
            "record_steps": record_steps, "flight_recorder": flight, "steps": STEPS,
            "pair_ratios": [r / p for p, r in zip(plain, recorded, strict=True)]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clean", type=int, default=20)
    parser.add_argument("--slowed", type=int, default=20)
    parser.add_argument("--fractions", default="0.10,0.05")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--synthetic", type=int, default=20)
    parser.add_argument("--steps", type=int, default=STEPS, help="steps per job (real and "
                        "synthetic); the rule's power grows with them")
    parser.add_argument("--record-steps", type=int, help="the cost pairs record only the "
                        "first K steps (record --steps K)")
    parser.add_argument("--flight-recorder", action="store_true", help="the cost pairs use "
                        "record --flight-recorder")
    parser.add_argument("--step-s", type=float, help="the clean step time (default: measured "
                        "by the clean jobs)")
    parser.add_argument("--noise", help="a JSON file of clean step-lateness cells (default: "
                        "the clean jobs')")
    args = parser.parse_args(argv)
    globals()["STEPS"] = args.steps
    scratch = Path(tempfile.mkdtemp(prefix="commbench-stragglers-"))
    started = time.perf_counter()
    found = real(args.clean, args.slowed,
                 tuple(float(f) for f in args.fractions.split(",") if f), scratch, args.step_s)
    result = {"real": found}
    if args.synthetic:
        cells = json.loads(Path(args.noise).read_text()) if args.noise else \
            found.get("noise_cells", [])
        result["synthetic"] = synthetic(cells, found["clean_step_s"], args.synthetic, scratch,
                                        tuple(float(f) for f in args.fractions.split(",")))
        result["noise_sigma_s"] = 1.4826 * statistics.median(
            abs(c - statistics.median(cells)) for c in cells)
    if args.pairs:
        result["cost"] = cost(args.pairs, scratch, args.record_steps, args.flight_recorder)
    result["wall_s"] = time.perf_counter() - started
    print(json.dumps(result))
    return 0


def figures(clean: int = 20, slowed: int = 20, pairs: int = 5) -> list[dict]:
    """make bench's rows (bench/run_all.py)."""
    scratch = Path(tempfile.mkdtemp(prefix="commbench-stragglers-"))
    found = real(clean, slowed, (0.10, 0.05), scratch)
    rows = [{"figure": f"stragglers: clean 4-rank DDP jobs naming nobody "
                       f"(step {found['clean_step_s'] * 1e3:.1f} ms)",
             "value": f"{sum(not n for n in found['clean'])} of {clean}",
             "target": f"{clean} of {clean}", "met": all(not n for n in found["clean"])}]
    for fraction, named in found["slowed"].items():
        alone = sum(n == [(SLOW_RANK, "culprit")] for n in named)
        target = 0.95 if fraction >= 0.10 else None
        rows.append({"figure": f"stragglers: rank slowed by {fraction:.0%} of a step named "
                               "culprit alone", "value": f"{alone} of {len(named)}",
                     "target": ">= 19 of 20" if target else "report",
                     "met": alone >= target * len(named) if target else None})
    for r in synthetic(found.get("noise_cells", []), found["clean_step_s"], 20, scratch):
        what = ("clean: ranks falsely named" if not r["fraction"] else
                f"{r['fraction']:.0%} slow: named alone")
        value = r["false_named"] if not r["fraction"] else r["alone"]
        rows.append({"figure": f"stragglers synthetic {r['ranks']} ranks, {what}",
                     "value": f"{value} of {r['trials']}", "target": "report", "met": None})
    if pairs:
        for flight, how in ((False, "record"), (True, "record --flight-recorder")):
            c = cost(pairs, scratch, flight=flight)
            rows.append({"figure": f"{how}: DDP step time with / without recording",
                         "value": f"{c['ratio']:.3f}x", "target": "<= 1.02x",
                         "met": c["ratio"] <= 1.02})
    return rows


if __name__ == "__main__":
    sys.exit(main())
