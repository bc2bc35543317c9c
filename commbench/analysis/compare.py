"""Compare loaded runs (or backends within one run): ratios, significance, verdicts, and every
gap a CI gate must not hide.

Data in, data out; never imports torch. A row is ``slower`` only when the change exceeds the
threshold **and** the two 95 % confidence intervals of the median do not overlap **and** neither
side was flagged unstable; a change beyond the threshold that fails either test is ``noisy``
(asv marks it ``~``), not ``same``. Unstable sides are excluded because their intervals are
not to be trusted: a size whose blocks switched between a fast and a slow mode of the machine
(block p99 over 3x the median) can look precise within its run and still land in the other
mode in the next run, and a gate must not fail on that.

Rows are paired only when they measured the same thing (results.schema.KEY_COLUMNS: op,
pattern, backend, dtype, reduce op, in-place, device, root, rank-time, mesh, dim, group size,
group, peers, world size, size). Rows of the same op and size that differ in the rest are kept
apart and named; sizes one side lacks are named; a partial or failed run is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commbench.errors import UsageError
from commbench.results import Run, meta_value
from commbench.results.schema import IDENTITY_COLUMNS, KEY_COLUMNS, op_label
from commbench.sizes import format_size, parse_size

METRICS = ("lat_us_p50", "busbw_gbps")
VERDICTS = ("slower", "faster", "noisy", "same")
# Metadata that makes a comparison suspect when it differs between runs.
SUSPECT_FIELDS = (
    ("world size", ("world_size",)),
    ("node count", ("nnodes",)),
    ("hosts", ("hosts",)),
    ("torch version", ("versions", "torch")),
    ("NCCL version", ("versions", "nccl")),
    ("GPU model", ("gpus",)),
    ("dtype", ("config", "dtype")),
)
# How a run was timed: a difference makes its numbers not comparable like for like.
TIMING_FIELDS = (
    ("--cuda-graph", "cuda_graph"),
    ("--host-timer", "host_timer"),
    ("--blocking", "blocking"),
    ("--min-time", "min_time"),
    ("--iters", "iters"),
    ("--warmup", "warmup"),
)


@dataclass
class Comparison:
    """The paired rows with verdicts, and everything that was not compared, in words."""

    frame: object  # pandas.DataFrame: one row per pair
    warnings: list[str] = field(default_factory=list)  # metadata and timing differences
    apart: list[str] = field(default_factory=list)  # rows kept apart, and why
    missing: list[str] = field(default_factory=list)  # sizes one side lacks
    incomplete: list[str] = field(default_factory=list)  # partial or failed runs
    sources: tuple[str, str] | None = None  # (base, new) when they came from different tools

    def counts(self) -> dict[str, int]:
        found = self.frame["verdict"].value_counts().to_dict()
        return {verdict: int(found.get(verdict, 0)) for verdict in VERDICTS}


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


def metadata_warnings(base: Run, new: Run) -> list[str]:
    """Differences between two runs' metadata that make their comparison suspect."""
    warnings = []
    for label, keys in SUSPECT_FIELDS:
        a, b = meta_value(base.meta, keys), meta_value(new.meta, keys)
        if a is not None and b is not None and a != b:
            warnings.append(f"{base.name} and {new.name} differ in {label}: {a} vs {b}; the "
                            "comparison may be suspect")
    for flag, key in TIMING_FIELDS:
        a, b = meta_value(base.meta, ("config", key)), meta_value(new.meta, ("config", key))
        if (a is not None or b is not None) and a != b and base.meta and new.meta:
            warnings.append(f"{base.name} and {new.name} were timed differently: {flag} "
                            f"{_shown(a)} vs {_shown(b)}")
    return warnings


def _shown(value) -> str:
    return "off" if value in (None, False) else "on" if value is True else str(value)


def incomplete_runs(runs: list[Run]) -> list[str]:
    """Runs that did not finish: a gate must not read a cut-short run as a pass."""
    found = []
    for run in runs:
        status = run.meta.get("status")
        if status in ("partial", "failed", "running", "starting"):
            error = run.meta.get("error")
            found.append(f"{run.name} is {status}" + (f" ({error})" if error else ""))
    return found


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


def _frame(rows: list[dict], sizes: list[tuple[int, int]] | None):
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in KEY_COLUMNS:  # rows are filled by the loader; rows built in tests may not be
        if column not in frame:
            frame[column] = None
    frame = frame.astype({"group": object, "root": object})
    frame[["group", "root"]] = frame[["group", "root"]].where(
        frame[["group", "root"]].notna(), None)
    if sizes:
        frame = frame[frame["size_bytes"].apply(lambda s: any(lo <= s <= hi for lo, hi in sizes))]
    return frame


def _series_name(record: dict) -> str:
    op = op_label(record["op"], record.get("pattern"))
    where = f" dim {record['dim']}" if record.get("dim") else ""
    backend = f" {record['backend']}" if record.get("backend") else ""
    return f"{op}{backend}{where}"


def compare_rows(base_rows, new_rows, metric: str = "lat_us_p50", threshold: float = 0.05,
                 sizes: list[tuple[int, int]] | None = None, keys=KEY_COLUMNS):
    """Pair rows on ``keys``; returns (pairs frame, apart messages, missing messages)."""
    if metric not in METRICS:
        raise UsageError(f"unknown --metric {metric!r} (choose from {', '.join(METRICS)})")
    if not threshold >= 0:
        raise UsageError(f"bad --threshold {threshold}: it must not be negative")
    keys = list(keys)
    base, new = _frame(base_rows, sizes), _frame(new_rows, sizes)
    values = [metric, "lat_us_ci_lo", "lat_us_ci_hi", "lat_us_p50", "unstable"]
    columns = list(dict.fromkeys([*keys, *values]))
    joined = base.reindex(columns=columns).merge(new.reindex(columns=columns), on=keys,
                                                 suffixes=("_base", "_new"))
    apart = _apart(base, new, keys)
    missing = _missing(base, new, keys)
    if joined.empty:
        reason = f" ({apart[0]})" if apart else ""
        raise UsageError(f"the runs have no measurement in common{reason}")
    b, n = joined[f"{metric}_base"], joined[f"{metric}_new"]
    joined["baseline"], joined["new"], joined["ratio"] = b, n, n / b
    joined["delta_us"] = joined["lat_us_p50_new"] - joined["lat_us_p50_base"]
    for side in ("base", "new"):
        joined[f"ci_lo_{side}"] = joined[f"lat_us_ci_lo_{side}"]
        joined[f"ci_hi_{side}"] = joined[f"lat_us_ci_hi_{side}"]
    # The median's interval in time; bandwidth is size / time, so overlap is the same test.
    disjoint = (joined["lat_us_ci_hi_base"] < joined["lat_us_ci_lo_new"]) | (
        joined["lat_us_ci_hi_new"] < joined["lat_us_ci_lo_base"]
    )
    slower = joined["lat_us_p50_new"] > joined["lat_us_p50_base"] * (1 + threshold)
    faster = joined["lat_us_p50_new"] * (1 + threshold) < joined["lat_us_p50_base"]
    if metric == "busbw_gbps":  # barrier rows have no bandwidth: judge them by time as well
        slower = (n * (1 + threshold) < b) | ((b == 0) & slower)
        faster = (n > b * (1 + threshold)) | ((b == 0) & faster)
    unstable = joined["unstable_base"].fillna("").astype(bool) | joined[
        "unstable_new"
    ].fillna("").astype(bool)
    significant = disjoint & ~unstable
    joined["significant"] = significant
    joined["verdict"] = "same"
    joined.loc[(slower | faster) & ~significant, "verdict"] = "noisy"
    joined.loc[slower & significant, "verdict"] = "slower"
    joined.loc[faster & significant, "verdict"] = "faster"
    joined["note"] = ""
    joined.loc[unstable, "note"] = "unstable"
    kept = [*keys, "baseline", "new", "ratio", "delta_us", "ci_lo_base", "ci_hi_base",
            "ci_lo_new", "ci_hi_new", "verdict", "significant", "note"]
    return joined[kept], apart, missing


def _apart(base, new, keys: list[str]) -> list[str]:
    """Rows of the same op, backend, world and size that differ in another key and found no
    exact partner: never paired, and named (one message per kind of difference)."""
    rest = [k for k in keys if k not in IDENTITY_COLUMNS]
    identity = [k for k in IDENTITY_COLUMNS if k in keys]
    if not rest or base.empty or new.empty:
        return []
    left = base.reindex(columns=keys).drop_duplicates()
    right = new.reindex(columns=keys).drop_duplicates()
    paired = _keys(left, keys) & _keys(right, keys)
    both = left.merge(right, on=identity, suffixes=("_base", "_new"))
    messages: list[str] = []
    for record in both.to_dict("records"):
        sides = [tuple(_plain(record[k] if k in identity else record[f"{k}_{side}"])
                       for k in keys) for side in ("base", "new")]
        if all(side in paired for side in sides):
            continue
        diffs = [f"{k} {_shown(record[f'{k}_base'])} vs {_shown(record[f'{k}_new'])}"
                 for k in rest if _plain(record[f"{k}_base"]) != _plain(record[f"{k}_new"])]
        message = (f"{_series_name({**record, 'pattern': record.get('pattern_base')})}: "
                   f"{', '.join(diffs)} (kept apart: they measured different things)")
        if diffs and message not in messages:
            messages.append(message)
    return messages


def _plain(value):
    """None for a missing value (pandas gives NaN), the value itself otherwise."""
    return None if value is None or value != value else value


def _keys(frame, keys: list[str]) -> set[tuple]:
    return {tuple(_plain(v) for v in row) for row in frame[keys].itertuples(index=False)}


def _missing(base, new, keys: list[str]) -> list[str]:
    """Sizes of a series (everything but the size) that one side measured and the other not."""
    series = [k for k in keys if k != "size_bytes"]
    if base.empty or new.empty:
        return []
    messages = []
    left = base.reindex(columns=keys).drop_duplicates()
    right = new.reindex(columns=keys).drop_duplicates()
    for side, have, lack in (("new", left, right), ("base", right, left)):
        both = have.merge(lack[series].drop_duplicates(), on=series)  # series in both runs
        gaps = both.merge(lack, on=keys, how="left", indicator=True)
        gaps = gaps[gaps["_merge"] == "left_only"]
        for _, part in gaps.groupby(series, dropna=False, sort=False):
            record = part.iloc[0].to_dict()
            total = len(have.merge(part[series].iloc[:1], on=series))
            shown = ", ".join(format_size(int(s)) if s else "-" for s in part["size_bytes"][:8])
            more = f" and {len(part) - 8} more" if len(part) > 8 else ""
            messages.append(f"{side} lacks {len(part)} of {total} sizes of "
                            f"{_series_name(record)}: {shown}{more}")
    return messages


def compare_runs(runs: list[Run], metric: str, threshold: float, sizes: str | None
                 ) -> Comparison:
    """Every run after the first against the first; a single run: its backends against the
    first backend."""
    import pandas as pd

    ranges = size_ranges(sizes) if sizes else None
    result = Comparison(frame=None, incomplete=incomplete_runs(runs))
    parts = []
    if len(runs) == 1:
        frame = pd.DataFrame(runs[0].rows)
        backends = list(dict.fromkeys(frame["backend"]))
        if len(backends) < 2:
            raise UsageError("give two runs, or one run measured with several --backend")
        # Backends side by side: gloo's buffers live on the CPU, NCCL's on the GPU.
        keys = tuple(k for k in KEY_COLUMNS if k not in ("backend", "device"))
        first = frame[frame["backend"] == backends[0]].to_dict("records")
        for other in backends[1:]:
            rows = frame[frame["backend"] == other].to_dict("records")
            part, apart, missing = compare_rows(first, rows, metric, threshold, ranges, keys)
            result.apart += apart
            result.missing += missing
            parts.append(part.assign(backend=f"{other} vs {backends[0]}", base=backends[0],
                                     candidate=other))
    else:
        for run in runs[1:]:
            result.warnings += metadata_warnings(runs[0], run)
            part, apart, missing = compare_rows(runs[0].rows, run.rows, metric, threshold,
                                                ranges)
            result.apart += apart
            result.missing += missing
            parts.append(part.assign(base=runs[0].name, candidate=run.name))
        sources = (_source(runs[0]), _source(runs[1]))
        if len(runs) == 2 and sources[0] != sources[1]:
            result.sources = sources
    result.frame = pd.concat(parts, ignore_index=True)
    return result


def _source(run: Run) -> str:
    found = {row.get("source", "commbench") for row in run.rows}
    return found.pop() if len(found) == 1 else "mixed"
