"""locate's fleet simulator figures (issue 30, points 1 and 3): synthetic nodes x 8 GPUs with a
fault planted, run through the very code a real run uses (commbench.locate.simulate: the
schedule, the --min-effect line drawn from each fleet's own noise, the attribution, the pooled
retests and verdicts), per scale, noise, fault and factor, ``--rounds quick``:

- found: the fault's node (link, switch) named bad, and nothing else; false-bad: a fleet that
  names anything not planted bad (a clean fleet: anything at all); rounds: main + retest
  rounds (median, max); line: the median --min-effect the fleets drew (busbw, latency);
- noise: a quiet cluster's lognormal 0.05 per rank pair, and the one fitted to real clean runs
  here (--here busbw,lat: the median of locate.noise.run_noise over 8 clean 6-rank runs);
- the issue's targets: quiet, 1.3x: found >= 99 %, false-bad <= 0.1 %, <= 20 rounds at 512
  nodes; here, 1.5x: found >= 95 %, false-bad <= 1 %. The cells of those targets get
  --fleets fleets, the other factor --others, clean fleets --clean.

    .venv/bin/python bench/locate_sim.py [--clean 200,200] [--fleets 40,10] [--others 15,4]
        [--here 0.25,0.15] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from commbench.locate import schedule as rounds_of
from commbench.locate import simulate as sim  # noqa: E402

SCALES = (64, 512)
HERE = (0.25, 0.15)  # busbw, latency: median run_noise of 8 clean 6-rank runs (2026-12-01)
ROUND_S = 0.78  # a round of the clean 6-rank runs of bench/locate.py: the projection's cost
FAULTS = ("gpu", "node", "rail", "link", "switch")
TARGET = {"quiet": 1.3, "here": 1.5}  # the factor each noise's target is about


def figures(clean=(200, 200), fleets=(40, 10), others=(15, 4), here=HERE,
            faults=FAULTS, trials=None, round_s=ROUND_S, gpu_fleets=40,
            scales=SCALES) -> list[dict]:
    """One row per scale, noise, fault and factor. ``trials`` (bench/run_all.py's call):
    that many fleets of every cell, per scale."""
    if trials is not None:
        clean = fleets = others = tuple(trials[:len(scales)])
        gpu_fleets = trials[min(1, len(trials) - 1)]
    rows = []
    noises = (("quiet", sim.QUIET), ("here", here))
    for nodes, clean_count, target_count, other_count in zip(scales, clean, fleets, others,
                                                             strict=True):
        for noise_name, noise in noises:
            cells = [("clean", None, clean_count)]
            for factor in (1.3, 1.5):
                count = target_count if factor == TARGET[noise_name] else other_count
                cells += [(fault, factor, count) for fault in faults]
            cells = [(*cell, "node") for cell in cells]
            if nodes == 64:
                cells += [(fault, factor, gpu_fleets, "gpu")
                          for fault, factor in (("clean", None),
                                                ("gpu", TARGET[noise_name]),
                                                ("rail", TARGET[noise_name]))
                          if fault == "clean" or fault in faults]
            for fault, factor, count, level in cells:
                if not count:
                    continue
                started = time.perf_counter()
                fleet = sim.Fleet(nodes, noise=noise, fault=fault, factor=factor or 1.0,
                                  level=level)
                found = sim.rates(fleet, "quick", count, seed=1000 * nodes)
                rows.append({"nodes": nodes, "gpus": 8, "level": level, "schedule": "quick",
                             "noise": noise_name, "sigma": list(noise), "fault": fault,
                             "factor": factor, **found,
                             "projected_s": found["rounds_median"] * round_s,
                             "sim_s": round(time.perf_counter() - started, 1)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def attribution_time(nodes: int = 2048) -> float:
    """Seconds to attribute one quick 2,048-node fleet's matrix (no retests)."""
    import numpy as np

    from commbench.locate import attribution

    fleet = sim.Fleet(nodes)
    rng = np.random.default_rng(0)
    main = rounds_of.schedule(nodes, "quick", 0)
    pairs = sim.measure(fleet, sim.plant(fleet, rng, main), main, rng)
    started = time.perf_counter()
    attribution.attribute(nodes, pairs, "node")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default=",".join(map(str, SCALES)),
                        help="nodes of each scale (8 GPUs a node); the counts below, per scale")
    parser.add_argument("--clean", default="200,200", help="clean fleets a scale")
    parser.add_argument("--fleets", default="40,10", help="fleets per target cell a scale")
    parser.add_argument("--others", default="15,4", help="fleets per other cell a scale")
    parser.add_argument("--here", default=",".join(map(str, HERE)))
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--gpu-fleets", type=int, default=40,
                        help="fleets per gpu-level cell (64 nodes)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    def counts(text):
        return tuple(int(t) for t in text.split(","))

    rows = figures(counts(args.clean), counts(args.fleets), counts(args.others),
                   tuple(float(x) for x in args.here.split(",")), tuple(args.faults.split(",")),
                   gpu_fleets=args.gpu_fleets, scales=counts(args.scales))
    if args.json:
        print(json.dumps({"rows": rows}))
        return
    print(f"{'nodes':>5} {'level':<5} {'noise':<6} {'fault':<7} {'factor':>6} {'found':>6} "
          f"{'false':>6} "
          f"{'rounds':>7} {'line b/l':>10} {'n':>4}")
    for r in rows:
        factor = f"{r['factor']:.1f}x" if r["factor"] else "-"
        print(f"{r['nodes']:>5} {r['level']:<5} {r['noise']:<6} {r['fault']:<7} {factor:>6} "
              f"{r['found']:>6.1%} {r['false_bad']:>6.1%} "
              f"{r['rounds_median']:>3.0f}/{r['rounds_max']:<3} "
              f"{r['line_busbw']:>4.0%}/{r['line_lat']:<4.0%} {r['trials']:>4}")


if __name__ == "__main__":
    main()
