"""What --per-call costs: commbench allreduce with and without it, launches alternated A/B then
B/A on 2 gloo ranks, same sizes and budget. The figure is the median over pairs of the
per-call run's median time over the plain run's, per size (target <= 1.05x), and the bytes a
call costs: on disk (the calls file's size over its records) and in memory (what each rank
holds per call: a duration and a start, 8 bytes each, and after the all-gather every rank's,
16 x world bytes; peak RSS of both runs from run.json).

    python bench/per_call.py [--pairs 4] [--seconds 0.5] [--sizes 8,65536]
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

PYTHON = sys.executable


def run(scratch: Path, name: str, sizes: str, seconds: float, per_call: bool) -> dict:
    args = [PYTHON, "-m", "commbench", "allreduce", "--nproc", "2", "--sizes", sizes,
            "--min-time", str(seconds), "--no-check", "--quiet", "--out", str(scratch),
            "--name", name] + (["--per-call"] if per_call else [])
    subprocess.run(args, capture_output=True, text=True, check=True)
    folder = scratch / name
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    meta = json.loads((folder / "run.json").read_text())
    calls_file = next((folder / n for n in ("calls.parquet", "calls.jsonl")
                       if (folder / n).exists()), None)
    return {"p50": {r["size_bytes"]: r["lat_us_p50"] for r in rows},
            "calls": sum(int(r.get("calls") or 0) for r in rows) * int(meta["world_size"]),
            "file_bytes": calls_file.stat().st_size if calls_file else 0,
            "file": calls_file.name if calls_file else "",
            "peak_rss_mib": max(r.get("peak_rss_mib", 0) for r in meta.get("ranks") or [{}]),
            "world": int(meta["world_size"])}


def figures(pairs: int, seconds: float, sizes: str) -> list[dict]:
    ratios: dict[int, list[float]] = {}
    disk, rss = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(pairs):
            order = (False, True) if index % 2 == 0 else (True, False)
            result = {}
            for per_call in order:
                result[per_call] = run(Path(scratch), f"pc-{index}-{int(per_call)}", sizes,
                                       seconds, per_call)
            for size, plain in result[False]["p50"].items():
                ratios.setdefault(size, []).append(result[True]["p50"][size] / plain)
            if result[True]["calls"]:
                disk.append(result[True]["file_bytes"] / result[True]["calls"])
            rss.append(result[True]["peak_rss_mib"] - result[False]["peak_rss_mib"])
            world, file = result[True]["world"], result[True]["file"]
    out = []
    for size, values in ratios.items():
        ratio = statistics.median(values)
        out.append({"figure": f"per-call cost allreduce {size} B", "value": f"{ratio:.3f}x",
                    "detail": f"median of {len(values)} A/B pairs ({min(values):.2f}-"
                              f"{max(values):.2f}), time with --per-call over without",
                    "target": "<= 1.05", "met": ratio <= 1.05})
    out.append({"figure": "per-call bytes per call", "value":
                f"{statistics.median(disk):.1f} B on disk ({file}), per record",
                "detail": f"in memory: 16 B per call on the rank that timed it, 16 x {world} B "
                          f"per call on every rank after the gather; peak RSS +"
                          f"{statistics.median(rss):.1f} MiB (median of pairs)",
                "target": "stated", "met": True})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--sizes", default="8,65536")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for figure in figures(args.pairs, args.seconds, args.sizes):
        print(json.dumps(figure), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
