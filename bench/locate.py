"""locate's attribution on synthetic fleets: how often a clean fleet names somebody, and how
often a slow entity is found, at a pair noise measured on the VM and at a quiet one.

A fleet's pair runs at the speed of its slower end, times lognormal noise (sigma in log
units); the whole pipeline runs: attribution, confirmation rounds measured again on the same
fleet (fresh noise), verdicts. A fleet counts as a false suspect when any verdict is bad; a
slow entity is detected when it is named bad and nothing else is.

    .venv/bin/python bench/locate.py [--fleets 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from commbench.analysis import locate

# sigma of one pair's log busbw on the 2-core VM, 6 gloo ranks, 256K, fastest decile of calls
# (locate.pair_noise over clean runs: 0.34, 0.36); a quiet cluster's is nearer 0.05.
VM_NOISE = 0.35
QUIET_NOISE = 0.05


def measure(n, rounds, slow, noise, rng):
    out = []
    for r in rounds:
        for a, b in r.pairs:
            factor = min(slow.get(a, 1.0), slow.get(b, 1.0))
            busbw = 10.0 * factor * rng.lognormal(0, noise)
            lat = 50.0 / factor * rng.lognormal(0, noise)
            out.append(locate.PairResult(r.index, a, b, busbw, lat, lat, "ok", r.phase))
    return out


def verdicts(n, slow, noise, rng, confirm=3):
    main = measure(n, locate.circle_rounds(n), slow, noise, rng)
    found = locate.attribute(n, main)
    again = measure(n, locate.confirmation_rounds(n, found, confirm, 1000), slow, noise, rng)
    judged = locate.confirm_suspects(found, main + again, [str(e) for e in range(n)], 0.10)
    return {s.entities for s in judged if s.verdict.startswith("bad")}


def rates(n, noise, fleets, seed=0):
    rng = np.random.default_rng(seed)
    false = sum(bool(verdicts(n, {}, noise, rng)) for _ in range(fleets))
    found = {}
    for factor in (2.0, 1.3):
        found[factor] = sum(verdicts(n, {1: 1 / factor}, noise, rng) == {(1,)}
                            for _ in range(fleets))
    return false, found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fleets", type=int, default=1000)
    parser.add_argument("--sizes", default="6,8,16")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = []
    for noise in (VM_NOISE, QUIET_NOISE):
        for n in (int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            false, found = rates(n, noise, args.fleets)
            table.append({"entities": n, "noise": noise, "fleets": args.fleets,
                          "false_suspect_pct": 100 * false / args.fleets,
                          "found_2x_pct": 100 * found[2.0] / args.fleets,
                          "found_1.3x_pct": 100 * found[1.3] / args.fleets,
                          "seconds": round(time.perf_counter() - started, 1)})
    if args.json:
        print(json.dumps(table))
        return
    print("entities  pair noise  fleets  false suspect  2x found  1.3x found")
    for row in table:
        print(f"{row['entities']:>8}  {row['noise']:>10.2f}  {row['fleets']:>6}  "
              f"{row['false_suspect_pct']:>12.1f}%  {row['found_2x_pct']:>7.1f}%  "
              f"{row['found_1.3x_pct']:>9.1f}%")


if __name__ == "__main__":
    main()
