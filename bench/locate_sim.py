"""locate's fleet simulator figures (issue 30, point 3): synthetic nodes x 8 GPUs with a fault
planted, run through the very code a real run uses (commbench.locate.simulate: the schedule,
the attribution, the pooled retests and verdicts), per scale, fault, schedule and noise:

- found: the fault's node (or link) named bad, and nothing else; false-bad: a fleet that
  names anything not planted bad; rounds: main + retest rounds (median, max);
- projected wall time = rounds x the per-round cost measured here (--round-s, default the
  median round of the clean 6-rank runs of bench/locate.py: 0.78 s), NOT a measurement at
  scale: a real round at 64M over NICs costs what its transfers cost;
- noise: a quiet cluster's lognormal 0.05, and the one fitted to real clean runs here
  (--here busbw,lat: the median of locate.confirmation.run_noise over them), lognormal;
- the attribution time of one 2,048 x 8 fleet (quick), measured.

    .venv/bin/python bench/locate_sim.py [--trials 20,4,1] [--here 0.25,0.15] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from commbench.locate import simulate as sim  # noqa: E402

SCALES = (64, 512, 2048)
HERE = (0.25, 0.15)  # busbw, latency: median run_noise of 8 clean 6-rank runs (2026-12-01)
ROUND_S = 0.78


def figures(trials=(20, 4, 1), here=HERE, round_s=ROUND_S, schedules=("quick", "full"),
            faults=sim.FAULTS) -> list[dict]:
    rows = []
    for nodes, count in zip(SCALES, trials, strict=True):
        for schedule in schedules:
            if schedule == "full" and nodes > 64:
                continue  # 511 and 2,047 rounds: too long to simulate here (see the docs)
            for noise_name, noise, factor in (("quiet 0.05", sim.QUIET, 1.3),
                                              (f"here {here[0]}/{here[1]}", here, 1.5)):
                for fault in faults:
                    started = time.perf_counter()
                    fleet = sim.Fleet(nodes, noise=noise, fault=fault, factor=factor)
                    found = sim.rates(fleet, schedule, count, seed=1000 * nodes)
                    rows.append({"nodes": nodes, "gpus": 8, "schedule": schedule,
                                 "noise": noise_name, "fault": fault,
                                 "factor": factor if fault not in ("clean",) else None,
                                 **found, "projected_s": found["rounds_median"] * round_s,
                                 "sim_s": round(time.perf_counter() - started, 1)})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def attribution_time(nodes: int = 2048) -> float:
    """Seconds to attribute one quick 2,048-node fleet's matrix (no retests)."""
    import numpy as np

    from commbench.locate import attribution

    fleet = sim.Fleet(nodes)
    rng = np.random.default_rng(0)
    main = attribution.schedule(nodes, "quick", 0)
    pairs = sim.measure(fleet, sim.plant(fleet, rng, main), main, rng)
    started = time.perf_counter()
    attribution.attribute(nodes, pairs, "node")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", default="20,4,1", help="fleets per cell at 64,512,2048")
    parser.add_argument("--here", default=",".join(map(str, HERE)))
    parser.add_argument("--round-s", type=float, default=ROUND_S)
    parser.add_argument("--schedules", default="quick,full")
    parser.add_argument("--faults", default=",".join(sim.FAULTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = figures(tuple(int(t) for t in args.trials.split(",")),
                   tuple(float(x) for x in args.here.split(",")), args.round_s,
                   tuple(args.schedules.split(",")), tuple(args.faults.split(",")))
    took = attribution_time()
    if args.json:
        print(json.dumps({"rows": rows, "attribution_2048_s": took}))
        return
    print(f"{'nodes':>5} {'sched':<6} {'noise':<16} {'fault':<10} {'found':>6} {'false':>6} "
          f"{'rounds':>9} {'proj s':>7} {'n':>3}")
    for r in rows:
        print(f"{r['nodes']:>5} {r['schedule']:<6} {r['noise']:<16} {r['fault']:<10} "
              f"{r['found']:>6.0%} {r['false_bad']:>6.0%} "
              f"{r['rounds_median']:>5.0f}/{r['rounds_max']:<3} {r['projected_s']:>7.1f} "
              f"{r['trials']:>3}")
    print(f"attribution of one 2,048 x 8 quick matrix: {took:.1f} s")


if __name__ == "__main__":
    main()
