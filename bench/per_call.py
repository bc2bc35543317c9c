"""What --per-call costs, in the run's own wall time and in memory (issue 40.5).

Time: commbench allreduce with and without --per-call, the same fixed calls (``-n``) on both
sides, launches alternated A/B then B/A on 2 gloo ranks. A pair's ratio is the wall time the
sizes took with --per-call over without (each row's ``wall_s``: warm-up, timing and
bookkeeping of that size, start-up left out, since --per-call does not touch it); the figure
is the median over pairs, with the distribution-free 95 % interval of that median
(core.stats.median_ci), whose half-width is the resolution this many pairs give on this
machine; the target is met only when the interval's upper end is within it.

Memory: peak RSS of a rank (run.json) in two --per-call runs of one size that differ only in
their calls (``--calls-low`` and ``--calls-high``), the difference over the extra calls: what
a call costs a rank at its peak, measured, kept calls, the all-gather and the calls file's
writing all in it. Repeated (``--memory-pairs``) and the median taken.

    python bench/per_call.py [--pairs 10] [--iters 2000] [--sizes 8,65536]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from commbench.core.stats import median_ci

PYTHON = sys.executable


def run(scratch: Path, name: str, sizes: str, iters: int, per_call: bool) -> dict:
    args = [PYTHON, "-m", "commbench", "allreduce", "--nproc", "2", "--sizes", sizes,
            "--iters", str(iters), "--no-check", "--quiet", "--out", str(scratch),
            "--name", name] + (["--per-call"] if per_call else [])
    subprocess.run(args, capture_output=True, text=True, check=True)
    folder = scratch / name
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    meta = json.loads((folder / "run.json").read_text())
    calls_file = next((folder / n for n in ("calls.parquet", "calls.jsonl")
                       if (folder / n).exists()), None)
    return {"wall": {r["size_bytes"]: float(r["wall_s"]) for r in rows},
            "calls": sum(int(r.get("calls") or 0) for r in rows) * int(meta["world_size"]),
            "file_bytes": calls_file.stat().st_size if calls_file else 0,
            "file": calls_file.name if calls_file else "",
            "peak_rss_mib": max(r.get("peak_rss_mib", 0) for r in meta.get("ranks") or [{}]),
            "world": int(meta["world_size"])}


def time_figures(scratch: Path, pairs: int, iters: int, sizes: str) -> list[dict]:
    ratios: dict[int, list[float]] = {}
    totals, disk = [], []
    for index in range(pairs):
        order = (False, True) if index % 2 == 0 else (True, False)
        result = {per_call: run(scratch, f"pc-{index}-{int(per_call)}", sizes, iters, per_call)
                  for per_call in order}
        for size, plain in result[False]["wall"].items():
            ratios.setdefault(size, []).append(result[True]["wall"][size] / plain)
        totals.append(sum(result[True]["wall"].values()) / sum(result[False]["wall"].values()))
        if result[True]["calls"]:
            disk.append(result[True]["file_bytes"] / result[True]["calls"])
        file = result[True]["file"]
    out = []
    for label, values in [*((f"allreduce {size} B", v) for size, v in ratios.items()),
                          ("all sizes", totals)]:
        ratio = statistics.median(values)
        low, high = median_ci(sorted(values))
        resolution = max(ratio - low, high - ratio) / ratio
        out.append({"figure": f"--per-call cost, {label} (wall time)", "value": f"{ratio:.3f}x",
                    "detail": f"median of {len(values)} alternated pairs, -n {iters}; 95 % "
                              f"interval of the median {low:.3f}-{high:.3f}x (resolves "
                              f"±{100 * resolution:.0f} %); pairs {min(values):.2f}-"
                              f"{max(values):.2f}",
                    "target": "<= 1.05", "met": high <= 1.05, "resolution": round(resolution, 4)})
    out.append({"figure": "--per-call calls file, bytes per call",
                "value": f"{statistics.median(disk):.1f} B ({file})",
                "detail": "file size over the calls it holds (every rank's)", "target": "stated",
                "met": True})
    return out


def memory_figure(scratch: Path, repeats: int, low: int, high: int) -> dict:
    per_call = []
    for index in range(repeats):
        small = run(scratch, f"mem-{index}-low", "8", low, True)
        large = run(scratch, f"mem-{index}-high", "8", high, True)
        extra = (large["calls"] - small["calls"]) / large["world"]  # a rank's own calls
        per_call.append((large["peak_rss_mib"] - small["peak_rss_mib"]) * 2 ** 20 / extra)
    value = statistics.median(per_call)
    each = ", ".join(f"{v:.0f}" for v in per_call)
    return {"figure": "--per-call memory per call, a rank's peak RSS", "value": f"{value:.0f} B",
            "detail": f"peak RSS of a --per-call run of {high} calls minus one of {low}, over "
                      f"the extra calls, median of {repeats} ({each}"
                      " B): the kept times and starts, their all-gather (every rank's) and the "
                      "calls file's writing",
            "target": "measured", "met": True}


def figures(pairs: int = 10, iters: int = 2000, sizes: str = "8,65536",
            memory_pairs: int = 2, calls_low: int = 2000, calls_high: int = 40000) -> list[dict]:
    with tempfile.TemporaryDirectory() as scratch:
        out = time_figures(Path(scratch), pairs, iters, sizes)
        if memory_pairs:
            out.append(memory_figure(Path(scratch), memory_pairs, calls_low, calls_high))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--sizes", default="8,65536")
    parser.add_argument("--memory-pairs", type=int, default=2)
    parser.add_argument("--calls-low", type=int, default=2000)
    parser.add_argument("--calls-high", type=int, default=40000)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for figure in figures(args.pairs, args.iters, args.sizes, args.memory_pairs,
                          args.calls_low, args.calls_high):
        print(json.dumps(figure), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
