"""Compare loaded runs (or backends within one run): ratios, significance, verdicts, and every
gap a CI gate must not hide.

Data in, data out; never imports torch. The verdict rule lives in ``verdict`` alone: a row is
``slower`` (``faster``) when the ratio of medians is beyond the threshold **and** significant,
its 95 % interval entirely above (below) 1. The interval comes from the spread each run
measured. Where both runs hold two or more launches (``--repeat``), the launch is the unit:
Welch's t on the log of each launch's median (core.student.welch_t), because a launch lands
on a fast or a slow level as a whole, and a bootstrap over five launches (or over rounds and
blocks inside them) reads that spread several times too narrow at the gate's 1 % level. Runs of
one launch keep the bootstrap of the median over rounds, then the blocks of a round
(stats.ratio_interval), each side resampled on its own; a row that kept no rounds is resampled
in batches of correlated blocks. An ``unstable`` mark widens nothing by itself and
vetoes nothing: the samples that made it unstable are in the bootstrap. A change beyond the
threshold that is not significant is ``noisy`` (asv marks it ``~``), not ``same``. Rows without
raw samples (imported ones) fall back to their stored intervals: [lo_new / hi_base,
hi_new / lo_base].

Rows are paired only when they measured the same thing (results.schema.KEY_COLUMNS: op,
pattern, backend, dtype, reduce op, in-place, device, root, rank-time, mesh, dim, group size,
group, peers, world size, size). Rows of the same op and size that differ in the rest are kept
apart and named; sizes one side lacks are named; a partial or failed run is named. Rows of
several launches of one run (``--repeat``) are pooled into one before pairing
(results.launches, which the report, model and a run's own summary and plots share).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from commbench.core.errors import UsageError
from commbench.core.sizes import format_size, parse_size
from commbench.core.stats import Nested, ratio_interval
from commbench.core.student import welch_t
from commbench.results import Run, meta_value
from commbench.results.launches import plain as _plain
from commbench.results.launches import pool_launches
from commbench.results.schema import IDENTITY_COLUMNS, KEY_COLUMNS, op_label

METRICS = ("lat_us_p50", "busbw_gbps")
VERDICTS = ("slower", "faster", "noisy", "same")
BOOTSTRAP_TEST = "bootstrap ratio of medians"
STORED_TEST = "stored intervals"
WELCH_TEST = "Welch t over launch medians"
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


def verdict(ratio: float, lo: float, hi: float, threshold: float) -> str:
    """The one rule: ``ratio`` is new time / base time, (lo, hi) its 95 % interval."""
    if ratio > 1 + threshold:
        return "slower" if lo > 1 else "noisy"
    if ratio * (1 + threshold) < 1:
        return "faster" if hi < 1 else "noisy"
    return "same"


def _significance(base: Nested, new: Nested, record: dict) -> tuple[float, float, str, float]:
    """(lo, hi) of the time ratio new / base, the test's name, its p-value (NaN: none)."""
    base_launches, new_launches = _launch_medians(base), _launch_medians(new)
    if len(base_launches) >= 2 and len(new_launches) >= 2:
        _, lo, hi, p_value = welch_t([math.log(v) for v in base_launches],
                                     [math.log(v) for v in new_launches])
        return (math.exp(lo), math.exp(hi),
                f"{WELCH_TEST} ({len(base_launches)} vs {len(new_launches)})", p_value)
    if base and new and any(r.size for launch in base for r in launch) and any(
            r.size for launch in new for r in launch):
        found = ratio_interval(base, new)
        levels = record["_levels_new"] if record["_levels_new"] == record["_levels_base"] else (
            f"{record['_levels_base']} vs {record['_levels_new']}")
        return found.lo, found.hi, f"{BOOTSTRAP_TEST} over {levels}", found.p_value
    lo = record["lat_us_ci_lo_new"] / record["lat_us_ci_hi_base"] if record[
        "lat_us_ci_hi_base"] else float("nan")
    hi = record["lat_us_ci_hi_new"] / record["lat_us_ci_lo_base"] if record[
        "lat_us_ci_lo_base"] else float("nan")
    return lo, hi, STORED_TEST, float("nan")


def _launch_medians(launches: Nested) -> list[float]:
    """Each launch's median over its samples (launches without samples left out)."""
    medians = []
    for rounds in launches:
        kept = [r for r in rounds if r.size]
        if kept:
            value = float(np.median(np.concatenate(kept)))
            if value > 0:
                medians.append(value)
    return medians


# Two tools' runs (an OSU or nccl-tests import beside a commbench run) differ in what each
# records (backend mpi vs gloo, rank-time, dtype, in-place); where nothing pairs on the full
# key, their cross-tool view pairs rows on what both measured: the op at a byte size and world.
CROSS_TOOL_KEYS = ("op", "pattern", "world_size", "size_bytes")


class NothingInCommon(UsageError):
    """No row of one run measured what a row of the other did; says in which keys they
    differ."""

    def __init__(self, differences: list[str], apart: list[str]) -> None:
        self.differences = differences
        reason = apart[0] if apart else "; ".join(differences)
        super().__init__("the runs have no measurement in common" + (
            f" ({reason})" if reason else ""))


def _differences(base, new, keys: list[str]) -> list[str]:
    """Key columns whose values never meet between the two sides (size aside)."""
    found = []
    for key in keys:
        if key == "size_bytes":
            continue
        left = {_plain(v) for v in base[key]} if key in base else {None}
        right = {_plain(v) for v in new[key]} if key in new else {None}
        if left and right and left.isdisjoint(right):
            show = lambda values: "/".join(sorted(  # noqa: E731
                _shown(v) if v is None or isinstance(v, bool) else str(v) for v in values))
            found.append(f"{key} {show(left)} vs {show(right)}")
    return found


def compare_rows(base_rows, new_rows, metric: str = "lat_us_p50", threshold: float = 0.05,
                 sizes: list[tuple[int, int]] | None = None, keys=KEY_COLUMNS):
    """Pair rows on ``keys``; returns (pairs frame, apart messages, missing messages)."""
    if metric not in METRICS:
        raise UsageError(f"unknown --metric {metric!r} (choose from {', '.join(METRICS)})")
    if not threshold >= 0:
        raise UsageError(f"bad --threshold {threshold}: it must not be negative")
    keys = list(keys)
    base_rows, base_nested = pool_launches(base_rows, keys)
    new_rows, new_nested = pool_launches(new_rows, keys)
    base = _frame([{**r, "_index": i} for i, r in enumerate(base_rows)], sizes)
    new = _frame([{**r, "_index": i} for i, r in enumerate(new_rows)], sizes)
    values = [metric, "lat_us_ci_lo", "lat_us_ci_hi", "lat_us_p50", "unstable", "_index",
              "_levels"]
    columns = list(dict.fromkeys([*keys, *values]))
    joined = base.reindex(columns=columns).merge(new.reindex(columns=columns), on=keys,
                                                 suffixes=("_base", "_new"))
    apart = _apart(base, new, keys)
    missing = _missing(base, new, keys)
    if joined.empty:
        raise NothingInCommon(_differences(base, new, keys), apart)
    b, n = joined[f"{metric}_base"], joined[f"{metric}_new"]
    joined["baseline"], joined["new"], joined["ratio"] = b, n, n / b
    joined["delta_us"] = joined["lat_us_p50_new"] - joined["lat_us_p50_base"]
    for side in ("base", "new"):
        joined[f"ci_lo_{side}"] = joined[f"lat_us_ci_lo_{side}"]
        joined[f"ci_hi_{side}"] = joined[f"lat_us_ci_hi_{side}"]
    found = [_significance(base_nested[int(r["_index_base"])], new_nested[int(r["_index_new"])],
                           r) for r in joined.to_dict("records")]
    time_ratio = joined["lat_us_p50_new"] / joined["lat_us_p50_base"]
    lo = [f[0] for f in found]
    hi = [f[1] for f in found]
    joined["test"] = [f[2] for f in found]
    joined["p_value"] = [f[3] for f in found]
    # The gate's p-value: Welch's own where it judged launches; elsewhere familywise reads it
    # off the interval (the bootstrap's tail count cannot go below 1 / 2000).
    joined["p_row"] = [f[3] if f[2].startswith(WELCH_TEST) else float("nan") for f in found]
    # The rule judges time; on bandwidth a row is slower when its bandwidth dropped beyond
    # the threshold (barrier rows have no bandwidth: their time decides).
    judged = time_ratio if metric != "busbw_gbps" else (b / n).where(b != 0, time_ratio)
    joined["verdict"] = [verdict(float(r), low, high, threshold)
                         for r, low, high in zip(judged, lo, hi, strict=True)]
    if metric == "busbw_gbps":  # the interval of the bandwidth ratio is the inverse
        joined["ratio_lo"] = [1 / h if h else float("nan") for h in hi]
        joined["ratio_hi"] = [1 / low if low else float("nan") for low in lo]
    else:
        joined["ratio_lo"], joined["ratio_hi"] = lo, hi
    joined["significant"] = [low > 1 or high < 1 for low, high in zip(lo, hi, strict=True)]
    unstable = joined["unstable_base"].fillna("").astype(bool) | joined[
        "unstable_new"
    ].fillna("").astype(bool)
    joined["note"] = ""
    joined.loc[unstable, "note"] = "unstable"
    kept = [*keys, "baseline", "new", "ratio", "ratio_lo", "ratio_hi", "delta_us",
            "ci_lo_base", "ci_hi_base", "ci_lo_new", "ci_hi_new", "test", "p_value",
            "p_row", "verdict", "significant", "note"]
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


def _keys(frame, keys: list[str]) -> set[tuple]:
    return {tuple(_plain(v) for v in row) for row in frame[keys].itertuples(index=False)}


def _missing(base, new, keys: list[str]) -> list[str]:
    """Sizes of a series (everything but the size) that one side measured and the other not."""
    series = [k for k in keys if k != "size_bytes"]
    if base.empty or new.empty:
        return []
    if "group" in series:  # --per-group rows: the groups of a dim share their sizes
        keys = [k for k in keys if k != "group"]
        series = [k for k in series if k != "group"]
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
            if run.path.resolve() == runs[0].path.resolve():
                result.warnings.append(f"{run.name} is compared with itself: every row can "
                                       "only be the same")
            result.warnings += metadata_warnings(runs[0], run)
            try:
                part, apart, missing = compare_rows(runs[0].rows, run.rows, metric,
                                                    threshold, ranges)
            except NothingInCommon as error:
                tools = {_source(runs[0]), _source(run)}
                if len(tools) < 2 or "mixed" in tools:
                    raise
                part, apart, missing = compare_rows(runs[0].rows, run.rows, metric,
                                                    threshold, ranges, CROSS_TOOL_KEYS)
                backends = [" / ".join(sorted({str(r["backend"]) for r in side.rows}))
                            for side in (run, runs[0])]
                part = part.assign(backend=" vs ".join(backends), **{
                    key: None for key in KEY_COLUMNS if key not in part and key != "backend"})
                result.warnings.append(
                    f"{runs[0].name} ({_source(runs[0])}) and {run.name} ({_source(run)}) "
                    f"measured nothing alike ({'; '.join(error.differences)}): the "
                    "cross-tool view pairs them on op, world size and size alone")
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
