"""locate's figures (make bench, section "locate"; docs/commands/locate.md):

1. real clean runs (gloo, 6 and 8 local ranks, 8 B and 256K): how many name a suspect (target
   none), the pair noise the attribution itself reads from them, per metric, and what a round
   and the whole run cost;
2. synthetic fleets drawn at that measured noise (and at a quiet cluster's, 0.05): how often a
   clean fleet names somebody bad (target 0), and how often a 2x and a 1.3x slow entity is
   named bad, alone; slow in both metrics (a slow GPU, NIC or host), or in busbw only. The
   measured noise is the clean runs' own: each synthetic pair draws the (busbw, latency)
   deviation of one real pair from its run's median, so latency's heavy tail (most pairs at
   the same fastest call, one in ten or fifteen 1.1-1.3x slower) is kept, which a lognormal
   of the robust sigma (0.01-0.4 between batches of runs) is not;
3. a projection (not a measurement) for 64 and 512 nodes from the measured per-round and
   per-group costs.

A synthetic pair runs at the speed of its slower end, times its noise (lognormal, sigma in log
units per metric, or a measured pair's deviation); the whole decision runs: attribution,
confirmation rounds measured again on the same fleet (fresh noise), verdicts. No process is
started for them: 1,000 fleets take seconds.

    .venv/bin/python bench/locate.py [--fleets 1000] [--clean 5000] [--real 5] [--sizes 6,8]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from commbench.locate import attribution as locate  # noqa: E402
from commbench.locate import schedule as rounds_of

QUIET_NOISE = 0.05  # a quiet cluster's pair noise, both metrics
FACTORS = (2.0, 1.3)
PROJECT_NODES = (64, 512)
GPUS_PER_NODE = 8


# ---- real runs --------------------------------------------------------------------------------

def real_run(scratch: Path, nproc: int, name: str) -> dict:
    """One clean `commbench locate --nproc N --sizes 8,256K`: its verdicts, noise and costs."""
    from commbench.locate.findings import pair_result
    from commbench.results.locate import read_pairs

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "commbench", "locate", "--nproc", str(nproc),
                           "--sizes", "8,256K", "--json", "--timeout", "120", "--out",
                           str(scratch), "--name", name, "--force"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"locate --nproc {nproc} failed: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    folder = scratch / name
    records = read_pairs(folder)
    meta = json.loads((folder / "run.json").read_text())
    scores = locate.attribute(summary["entities"], [pair_result(r) for r in records]).scores
    rounds = {(r["phase"], r["round"]): r.get("round_s", math.nan) for r in records}
    main = [pair_result(r) for r in records if r["phase"] == "main" and r["status"] == "ok"]
    levels = [statistics.median(p.speed(m) for p in main) for m in ("busbw", "lat")]
    deviations = [(p.speed("busbw") - levels[0], p.speed("lat") - levels[1]) for p in main]
    groups = len({tuple(p) for r in records for p in r["ranks"]})
    return {"nproc": nproc, "wall_s": wall, "bad": sum(s["verdict"].startswith("bad")
                                                       for s in summary["suspects"]),
            "suspects": len(summary["suspects"]), "transient": len(summary["transient"]),
            "rounds": len(rounds), "round_s": statistics.median(rounds.values()),
            "groups": groups, "group_s": meta.get("groups_s", math.nan) / max(groups, 1),
            "noise_busbw": scores["busbw"].noise, "noise_lat": scores["lat"].noise,
            "deviations": deviations}


def real_runs(scratch: Path, nproc: int, count: int) -> list[dict]:
    return [real_run(scratch, nproc, f"locate-clean-{nproc}-{i}") for i in range(count)]


# ---- synthetic fleets -------------------------------------------------------------------------

def draw(noise, rng) -> tuple[float, float]:
    """A pair's (busbw, latency) noise factors: lognormal at (sigma, sigma), or one measured
    pair's deviations (an array of (log busbw, -log latency) rows)."""
    if isinstance(noise, tuple):
        return rng.lognormal(0, noise[0]), rng.lognormal(0, noise[1])
    busbw, speed = noise[rng.integers(len(noise))]
    return math.exp(busbw), math.exp(-speed)


def measure(rounds, slow: dict, noise, rng, latency_too: bool = True):
    out = []
    for r in rounds:
        for a, b in r.pairs:
            factor = min(slow.get(a, 1.0), slow.get(b, 1.0))
            busbw_noise, lat_noise = draw(noise, rng)
            busbw = 10.0 * factor * busbw_noise
            lat = 50.0 / (factor if latency_too else 1.0) * lat_noise
            out.append(locate.PairResult(r.index, a, b, busbw, lat, lat, "ok", r.phase))
    return out


def verdicts(n: int, slow: dict, noise, rng, latency_too=True, confirm=3) -> set:
    """The decision as the ranks run it (locate.retests.locate_offline), defaults as
    the command's."""
    from commbench.locate import retests
    from commbench.specs.locate import LocateSpec

    _, judged = retests.locate_offline(
        n, lambda rounds: measure(rounds, slow, noise, rng, latency_too), "gpu",
        LocateSpec(confirm=confirm))
    return {s.entities for s in judged.suspects if s.verdict.startswith("bad")}


def rates(n: int, noise, fleets: int, seed: int = 0,
          clean: int | None = None) -> dict:
    """Percentages: false (a clean fleet, of ``clean``, names somebody bad), and
    found_<factor>_<both|busbw> (the slow entity, and nobody else, named bad)."""
    rng = np.random.default_rng(seed)
    clean = clean or fleets
    out = {"false": 100 * sum(bool(verdicts(n, {}, noise, rng)) for _ in range(clean)) / clean}
    for factor in FACTORS:
        for where, latency_too in (("both", True), ("busbw", False)):
            hits = sum(verdicts(n, {1: 1 / factor}, noise, rng, latency_too) == {(1,)}
                       for _ in range(fleets))
            out[f"found_{factor:g}_{where}"] = 100 * hits / fleets
    return out


# ---- the projection ---------------------------------------------------------------------------

def projection(nodes: int, round_s: float, group_s: float, confirm_rounds: int = 3) -> dict:
    """Node level, GPUS_PER_NODE ranks a node meeting rail-parallel: full = nodes - 1 rounds,
    quick = quick_count rounds, each + the confirmation of one suspect; a round costs what it
    cost here (its pairs run at once), a pair group what it cost here."""
    out = {}
    for mode, rounds in (("full", nodes - 1), ("quick", rounds_of.quick_count(nodes))):
        groups = rounds * (nodes // 2) * GPUS_PER_NODE
        out[mode] = {"rounds": rounds + confirm_rounds, "groups": groups,
                     "seconds": (rounds + confirm_rounds) * round_s + groups * group_s}
    return out


# ---- figures ----------------------------------------------------------------------------------

def figures(scratch: Path, fleets: int = 1000, real: int = 5, sizes=(6, 8),
            clean: int = 5000) -> list[dict]:
    """The section's rows for bench/run_all.py: figure, value, target, met, detail."""
    runs = {n: real_runs(scratch, n, real if n == sizes[0] else max(2, real // 2))
            for n in sizes}
    out = []
    for n, found in runs.items():
        bad = sum(r["bad"] > 0 for r in found)
        out.append({"figure": f"locate: real clean runs naming a bad entity ({n} ranks)",
                    "value": f"{bad} of {len(found)}", "target": "0", "met": bad == 0,
                    "detail": (f"gloo, 8 B / 256K, {found[0]['rounds']} rounds; transient "
                               f"(did not reproduce) in {sum(r['transient'] > 0 for r in found)}"
                               " of them")})
        out.append({"figure": f"locate: time per round / whole run ({n} ranks)",
                    "value": (f"{statistics.median(r['round_s'] for r in found):.2f} s / "
                              f"{statistics.median(r['wall_s'] for r in found):.1f} s"),
                    "target": "-", "met": None,
                    "detail": (f"median of {len(found)}; round: barrier to gather on rank 0 "
                               "(300 calls at 8 B, 100 at 256K, both ways); run: command line "
                               "to exit, start-up and files included")})
    first = runs[sizes[0]]
    sigma = (statistics.median(r["noise_busbw"] for r in first),
             statistics.median(r["noise_lat"] for r in first))
    measured = np.array([d for r in first for d in r["deviations"]])
    spread = np.percentile(measured, [10, 90], axis=0)
    out.append({"figure": "locate: pair noise measured here (busbw / latency)",
                "value": f"sigma {sigma[0]:.3f} / {sigma[1]:.3f}", "target": "-", "met": None,
                "detail": (f"locate.pair_noise, median over the {len(first)} clean "
                           f"{sizes[0]}-rank runs; their {len(measured)} pairs' log deviations "
                           f"from the run median, p10..p90: busbw {spread[0][0]:+.2f}.."
                           f"{spread[1][0]:+.2f}, latency speed {spread[0][1]:+.2f}.."
                           f"{spread[1][1]:+.2f}")})
    for n in sizes:
        for label, level in (("measured here", measured),
                             (f"quiet, lognormal {QUIET_NOISE}", (QUIET_NOISE, QUIET_NOISE))):
            found = rates(n, level, fleets, clean=clean)
            setting = f"{n} entities, noise {label}"
            count = round(found["false"] * clean / 100)
            out.append({"figure": f"locate: synthetic false suspects, {setting}",
                        "value": f"{count} of {clean} ({found['false']:.2f} %)",
                        "target": "0", "met": count == 0,
                        "detail": f"{clean} clean fleets, a fleet counts once"})
            for factor, target in zip(FACTORS, (99, 90), strict=True):
                both, busbw = found[f"found_{factor:g}_both"], found[f"found_{factor:g}_busbw"]
                out.append({"figure": f"locate: a {factor:g}x slow entity found, {setting}",
                            "value": f"{both:.1f} % ({busbw:.1f} % busbw only)",
                            "target": f">= {target} %", "met": both >= target,
                            "detail": (f"{fleets} fleets each; named bad alone; first figure: "
                                       "slow in busbw and latency, second: in busbw only")})
    last = runs[sizes[-1]]
    round_s = statistics.median(r["round_s"] for r in last)
    group_s = statistics.median(r["group_s"] for r in last)
    for nodes in PROJECT_NODES:
        p = projection(nodes, round_s, group_s)
        out.append({"figure": f"locate: PROJECTED time at {nodes} nodes x {GPUS_PER_NODE}",
                    "value": (f"full {p['full']['seconds'] / 60:.1f} min, quick "
                              f"{p['quick']['seconds'] / 60:.1f} min"),
                    "target": "-", "met": None,
                    "detail": (f"projection, not measured: full {p['full']['rounds']} rounds, "
                               f"{p['full']['groups']} pair groups; quick "
                               f"{p['quick']['rounds']} rounds, {p['quick']['groups']} groups; "
                               f"{round_s:.2f} s a round and {group_s * 1e3:.1f} ms a group "
                               f"as measured at {sizes[-1]} ranks here")})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fleets", type=int, default=1000, help="per slow-entity figure")
    parser.add_argument("--clean", type=int, default=5000, help="clean fleets, false rate")
    parser.add_argument("--real", type=int, default=5, help="clean real runs, first size")
    parser.add_argument("--sizes", default="6,8")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="commbench-locate-bench-") as scratch:
        rows = figures(Path(scratch), args.fleets, args.real,
                       tuple(int(s) for s in args.sizes.split(",")), args.clean)
    if args.json:
        print(json.dumps(rows))
        return
    for row in rows:
        met = {True: "yes", False: "NO", None: "-"}[row["met"]]
        print(f"{row['figure']:<72} {row['value']:<34} {row['target']:<8} {met:<4} "
              f"{row['detail']}")


if __name__ == "__main__":
    main()
