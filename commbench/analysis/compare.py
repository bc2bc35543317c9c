"""Compare loaded runs (or backends within one run): ratios, significance, verdicts.

Data in, data out; never imports torch. A row is ``slower`` only when the change exceeds the
threshold **and** the two 95 % confidence intervals of the median do not overlap, so noise alone
cannot fail CI (asv marks such insignificant changes with ``~``; so does this table).
"""

from __future__ import annotations

from commbench.errors import UsageError
from commbench.results import Run
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


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05; a bare number of 1 or more is read as a percentage."""
    raw = text.strip().rstrip("%")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"bad --threshold {text!r}: use e.g. 5% or 0.05") from None
    if text.strip().endswith("%") or value >= 1:
        value /= 100
    if value < 0:
        raise UsageError(f"bad --threshold {text!r}: it must not be negative")
    return value


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


def compare_runs(runs: list[Run], metric: str, threshold: float, sizes: str | None):
    """Every run after the first against the first; a single run: its backends against the
    first backend. Returns (comparison frame, warnings)."""
    import pandas as pd

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
    return pd.concat(parts, ignore_index=True), warnings


def verdict_counts(frame) -> dict[str, int]:
    counts = frame["verdict"].value_counts().to_dict()
    return {v: int(counts.get(v, 0)) for v in ("slower", "faster", "same")}
