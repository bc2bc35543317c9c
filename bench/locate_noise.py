"""This machine's locate pair noise, measured (issue 40, point 5): the simulator's "here" noise
(bench/locate_sim.py) was a literal, and the docs quoted it with busbw and latency swapped.

Runs ``--runs`` clean ``commbench locate --nproc 6 --sizes 8,256K`` (each under the shared
lock when ``--lock FILE`` is given: one run at a time, never the whole script) and reads, per
run and metric, the noise the run's own --min-effect line is drawn from
(``locate.noise.run_sigma``'s rule, ``run_noise`` over the main matrix with the FLOOR line's
candidates left out; a run whose matrix has too few normal pairs for it is read with no
candidate left out, and said). The figure is the median over the runs, busbw then latency,
named as such.

    .venv/bin/python bench/locate_noise.py [--runs 8] [--lock /tmp/commbench-ranks.lock] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ARGS = ["locate", "--nproc", "6", "--sizes", "8,256K", "--json", "--timeout", "120"]


def run_sigma(folder: Path) -> dict:
    """One run folder's pair noise per metric (log units), as its line was drawn from."""
    from commbench.locate import attribution, noise
    from commbench.locate.findings import pair_result
    from commbench.results.locate import read_pairs

    records = read_pairs(folder)
    meta = json.loads((folder / "run.json").read_text())
    n = len(meta["entities"])
    main = [pair_result(r) for r in records if r["phase"] == "main"]
    drawn = noise.run_sigma(n, main)
    if all(value == value for value in drawn.values()):  # not NaN: the run read it
        return {**drawn, "how": "run_sigma"}
    # too few normal pairs at the FLOOR line's candidates: every pair of the matrix
    found = attribution.attribute(n, main, "gpu", noise.CAP)
    return {**{m: noise.run_noise(found, main, m) for m in noise.LINE_METRICS},
            "how": "run_noise, CAP line's candidates left out"}


def measure(runs: int = 8, lock: str = "", scratch: Path | None = None) -> dict:
    """The median pair noise of ``runs`` clean 6-rank runs: {"busbw", "lat", "runs", ...}."""
    scratch = scratch or Path(tempfile.mkdtemp(prefix="commbench-locate-noise-"))
    found = []
    for i in range(runs):
        name = f"noise-{i}"
        command = [sys.executable, "-m", "commbench", *ARGS, "--out", str(scratch), "--name",
                   name, "--force"]
        done = subprocess.run([*(["flock", lock] if lock else []), *command],
                              capture_output=True, text=True)
        if done.returncode not in (0, 1):
            print(f"run {i} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        found.append(run_sigma(scratch / name))
        print(json.dumps(found[-1]), file=sys.stderr, flush=True)
    if not found:
        raise RuntimeError("no clean locate run completed")
    return {"busbw": statistics.median(r["busbw"] for r in found),
            "lat": statistics.median(r["lat"] for r in found), "runs": len(found),
            "busbw_range": [min(r["busbw"] for r in found), max(r["busbw"] for r in found)],
            "lat_range": [min(r["lat"] for r in found), max(r["lat"] for r in found)],
            "how": sorted({r["how"] for r in found})}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--lock", default="", help="flock this file around each run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = measure(args.runs, args.lock)
    if args.json:
        print(json.dumps(found))
        return
    print(f"locate pair noise here, median of {found['runs']} clean 6-rank runs: busbw "
          f"{found['busbw']:.3f} [{found['busbw_range'][0]:.3f}-{found['busbw_range'][1]:.3f}], "
          f"latency {found['lat']:.3f} [{found['lat_range'][0]:.3f}-{found['lat_range'][1]:.3f}]"
          f" (log units; {', '.join(found['how'])})")


if __name__ == "__main__":
    main()
