"""Compare result folders (or backends within one run): ratios, significance, verdicts.

Works on files only and never imports torch. A row is ``slower`` only when the change exceeds
the threshold **and** the two 95 % confidence intervals of the median do not overlap, so noise
alone cannot fail CI (asv marks such insignificant changes with ``~``; so does this table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from commbench.errors import UsageError
from commbench.results.rundir import JSONL, RUN_JSON
from commbench.results.schema import KEY_COLUMNS
from commbench.sizes import parse_size

METRICS = ("lat_us_p50", "busbw_gbps")
# Metadata that makes a comparison suspect when it differs between runs.
SUSPECT_FIELDS = (
    ("world size", ("world_size",)),
    ("node count", ("nnodes",)),
    ("hosts", ("hosts",)),
    ("torch version", ("versions", "torch")),
    ("NCCL version", ("versions", "nccl")),
    ("dtype", ("config", "dtype")),
)


@dataclass
class Run:
    """A loaded results folder."""

    name: str
    rows: list[dict]
    meta: dict


def load_run(path: str | Path) -> Run:
    """A run folder, or a results.jsonl file inside one."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    jsonl = path if path.is_file() else path / JSONL
    if not jsonl.exists():
        raise UsageError(f"no results at {path} (expected a run folder or its {JSONL})")
    rows = []
    for number, line in enumerate(jsonl.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            raise UsageError(f"{jsonl}:{number} is not JSON") from None
    if not rows:
        raise UsageError(f"{jsonl} holds no rows")
    try:
        meta = json.loads((folder / RUN_JSON).read_text())
    except (OSError, ValueError):
        meta = {}
    return Run(name=meta.get("name") or folder.name, rows=rows, meta=meta)


def lookup(meta: dict, keys: tuple[str, ...]):
    """A nested run.json value, or None."""
    value = meta
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def metadata_warnings(base: Run, new: Run) -> list[str]:
    """Differences between two runs' metadata that make their comparison suspect."""
    warnings = []
    for label, keys in SUSPECT_FIELDS:
        a, b = lookup(base.meta, keys), lookup(new.meta, keys)
        if a is not None and b is not None and a != b:
            warnings.append(f"{base.name} and {new.name} differ in {label}: {a} vs {b}")
    return warnings


def size_ranges(text: str) -> list[tuple[int, int]]:
    """``--sizes`` for compare: sizes and ranges (A-B keeps every size between A and B)."""
    ranges = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        low, _, high = item.partition("-")
        low_bytes = parse_size(low)
        high_bytes = parse_size(high) if high else low_bytes
        if low_bytes > high_bytes:
            raise UsageError(f"bad range {item!r}: the start is larger than the end")
        ranges.append((low_bytes, high_bytes))
    if not ranges:
        raise UsageError("no sizes given")
    return ranges


def _frame(rows: list[dict]):
    import pandas as pd

    frame = pd.DataFrame(rows)
    if "pattern" not in frame:
        frame["pattern"] = ""
    frame["pattern"] = frame["pattern"].fillna("")
    return frame


def compare_rows(base_rows, new_rows, metric: str = "lat_us_p50", threshold: float = 0.05,
                 sizes: list[tuple[int, int]] | None = None, keys=KEY_COLUMNS):
    """Join on ``keys``; one result row per match with baseline, new, ratio and verdict."""
    if metric not in METRICS:
        raise UsageError(f"unknown --metric {metric!r} (choose from {', '.join(METRICS)})")
    if not threshold >= 0:
        raise UsageError(f"bad --threshold {threshold}: it must not be negative")
    columns = [*keys, metric, "lat_us_ci_lo", "lat_us_ci_hi", "lat_us_p50", "unstable"]
    base = _frame(base_rows).reindex(columns=list(dict.fromkeys(columns)))
    new = _frame(new_rows).reindex(columns=list(dict.fromkeys(columns)))
    joined = base.merge(new, on=list(keys), suffixes=("_base", "_new"))
    if sizes:
        inside = joined["size_bytes"].apply(lambda s: any(lo <= s <= hi for lo, hi in sizes))
        joined = joined[inside]
    if joined.empty:
        raise UsageError("the runs have no (op, backend, dtype, world size, size) in common")
    b, n = joined[f"{metric}_base"], joined[f"{metric}_new"]
    joined["baseline"] = b
    joined["new"] = n
    joined["ratio"] = n / b
    # The median's interval in time; bandwidth is size / time, so overlap is the same test.
    disjoint = (joined["lat_us_ci_hi_base"] < joined["lat_us_ci_lo_new"]) | (
        joined["lat_us_ci_hi_new"] < joined["lat_us_ci_lo_base"]
    )
    slower_time = joined["lat_us_p50_new"] > joined["lat_us_p50_base"] * (1 + threshold)
    faster_time = joined["lat_us_p50_new"] * (1 + threshold) < joined["lat_us_p50_base"]
    if metric == "busbw_gbps":  # barrier rows have no bandwidth: judge them by time as well
        slower_time = (n * (1 + threshold) < b) | ((b == 0) & slower_time)
        faster_time = (n > b * (1 + threshold)) | ((b == 0) & faster_time)
    joined["significant"] = disjoint
    joined["verdict"] = "same"
    joined.loc[slower_time & disjoint, "verdict"] = "slower"
    joined.loc[faster_time & disjoint, "verdict"] = "faster"
    # asv's "~": beyond the threshold, but the intervals overlap.
    joined["note"] = ""
    joined.loc[(slower_time | faster_time) & ~disjoint, "note"] = "~ not significant"
    unstable = joined["unstable_base"].fillna("").astype(bool) | joined[
        "unstable_new"
    ].fillna("").astype(bool)
    joined.loc[unstable & (joined["note"] == ""), "note"] = "unstable"
    return joined[[*keys, "baseline", "new", "ratio", "verdict", "significant", "note"]]


def compare_runs(paths: list[str], metric: str, threshold: float, sizes: str | None):
    """Every run after the first against the first; a single run: its backends against the
    first backend. Returns (comparison frame, warnings, runs)."""
    import pandas as pd

    runs = [load_run(p) for p in paths]
    ranges = size_ranges(sizes) if sizes else None
    warnings: list[str] = []
    parts = []
    if len(runs) == 1:
        frame = _frame(runs[0].rows)
        backends = list(dict.fromkeys(frame["backend"]))
        if len(backends) < 2:
            raise UsageError("give two runs, or one run measured with several --backend")
        keys = tuple(k for k in KEY_COLUMNS if k != "backend")
        first = frame[frame["backend"] == backends[0]].to_dict("records")
        for other in backends[1:]:
            rows = frame[frame["backend"] == other].to_dict("records")
            part = compare_rows(first, rows, metric, threshold, ranges, keys)
            parts.append(part.assign(backend=f"{other} vs {backends[0]}", base=backends[0],
                                     candidate=other))
    else:
        for run in runs[1:]:
            warnings += metadata_warnings(runs[0], run)
            part = compare_rows(runs[0].rows, run.rows, metric, threshold, ranges)
            parts.append(part.assign(base=runs[0].name, candidate=run.name))
    return pd.concat(parts, ignore_index=True), warnings, runs


def table_records(frame, metric: str) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells, shared by the console, Markdown and HTML."""
    from commbench.sizes import format_size

    unit = "us" if metric.startswith("lat") else "GB/s"
    headers = ["op", "backend", "size", f"baseline {unit}", f"new {unit}", "ratio", "verdict",
               "", "candidate"]
    rows = []
    for record in frame.to_dict("records"):
        op = record["op"] + (f"/{record['pattern']}" if record.get("pattern") else "")
        rows.append([
            op,
            str(record["backend"]),
            format_size(int(record["size_bytes"])) if record["size_bytes"] else "-",
            f"{record['baseline']:.3f}" if unit == "GB/s" else f"{record['baseline']:.1f}",
            f"{record['new']:.3f}" if unit == "GB/s" else f"{record['new']:.1f}",
            f"{record['ratio']:.2f}x",
            record["verdict"],
            record["note"],
            str(record["candidate"]),
        ])
    return headers, rows


def verdict_counts(frame) -> dict[str, int]:
    counts = frame["verdict"].value_counts().to_dict()
    return {v: int(counts.get(v, 0)) for v in ("slower", "faster", "same")}
