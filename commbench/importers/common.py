"""What both importers share: the parsed result, errors that name file and line, and the step
from "one time per size, as the tool printed it" to a commbench results row.

nccl-tests and OSU print one time per size: a mean over the timed iterations, combined over the
ranks as the tool does it (nccl-tests ``-a``, 1 = the mean over ranks by default; OSU always the
mean over ranks). Such a row has one sample: p50 = mean = that time and the median's interval is
that point. What the tool prints beyond it fills the tail columns:

- ``min``/``max`` where the file has them (OSU ``-f``: the fastest and slowest rank's mean);
- per-iteration statistics (nccl-tests ``-I``, OSU ``-z`` percentiles): ``tail`` says ``call``,
  the tail columns are then over single calls, not over the one block;
- the same size measured several times (nccl-tests ``-N`` cycles, or sizes that round to the
  same bytes): each time is one sample, and the statistics are over those samples.

algbw = size / time and busbw = algbw x the collective's factor (nccl-tests doc/PERFORMANCE.md),
computed here from the size and time the file gives, so imported rows and measured rows follow
one formula.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commbench import collectives
from commbench.core.dtypes import ITEMSIZE
from commbench.core.errors import UsageError
from commbench.core.stats import instability, summarize
from commbench.results.schema import Row

NAN = float("nan")  # a statistic the file does not print

# commbench's dtypes plus the ones the tools know and commbench does not measure.
ITEMSIZES = ITEMSIZE  # core.dtypes: the one table


class ImportFormatError(UsageError):
    """A file that does not read as the tool's output; the message names the file and line."""


def fail(source: str, line: int | None, message: str) -> ImportFormatError:
    """``source:line: message`` (``source: message`` where no line applies)."""
    where = f"{source}:{line}" if line else source
    return ImportFormatError(f"{where}: {message}")


def to_int(text: str, source: str, line: int, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise fail(source, line, f"{what} {text!r} is not a whole number") from None


def to_float(text: str, source: str, line: int, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise fail(source, line, f"{what} {text!r} is not a number") from None


@dataclass
class Timing:
    """One printed time (µs) and whatever the file says about its spread."""

    time_us: float
    min_us: float | None = None
    max_us: float | None = None
    p10_us: float | None = None
    p90_us: float | None = None
    p99_us: float | None = None
    std_us: float | None = None
    tail: str = "block"  # "call" when the spread is over single iterations
    # per-iteration times (nccl-tests -I): the row's samples, and its per-call columns
    # (core.percall: calls, lat_us_p95, cv_pct, spikes, stragglers)
    samples_us: list[float] = field(default_factory=list)
    per_call: dict = field(default_factory=dict)


@dataclass
class Measured:
    """One size of one op as the file printed it, before it becomes a row.

    ``fields`` holds the Row fields the importer knows (op, backend, sizes, validation...);
    ``where`` says where the file printed it ("line 14", "results[3]"), for messages.
    """

    fields: dict
    timing: Timing
    where: str


# What makes two printed lines the same measurement (repeats of one size become samples).
_SAME = ("op", "pattern", "backend", "device", "dtype", "reduce_op", "inplace", "size_bytes",
         "root", "world_size", "group_size", "rank_time", "timer")


@dataclass
class Imported:
    """A parsed file: rows ready for results.jsonl, run.json metadata, notes for the user."""

    rows: list[dict]
    meta: dict
    notes: list[str] = field(default_factory=list)


def build_rows(measured: list[Measured]) -> tuple[list[dict], list[str]]:
    """Rows in file order; a size printed more than once becomes one row of several samples."""
    groups: dict[tuple, list[Measured]] = {}
    for item in measured:
        key = tuple(item.fields.get(name) for name in _SAME)
        groups.setdefault(key, []).append(item)
    rows = [_row(items) for items in groups.values()]
    repeated = [items for items in groups.values() if len(items) > 1]
    if not repeated:
        return rows, []
    first = repeated[0]
    example = (f"{first[0].fields['op']} {first[0].fields['size_bytes']} B at "
               f"{', '.join(item.where for item in first)}")
    return rows, [f"{len(repeated)} row(s) were printed more than once (e.g. {example}; "
                  "nccl-tests -N, or sizes rounded to the same bytes): each printing is one "
                  "sample of its row"]


def _row(items: list[Measured]) -> dict:
    fields = dict(items[0].fields)
    op = collectives.get(fields["op"])
    itemsize = ITEMSIZES[fields["dtype"]]
    size = fields["size_bytes"]
    if len(items) == 1:
        # One printed time, an average over the tool's iterations: a statistic the file does
        # not print is unknown (NaN, shown '-'), never the average again. The interval is the
        # printed point itself (lo = hi), which compare reads as "no spread known on this
        # side" and tables show as '-', not as a measured zero-width interval.
        timing = items[0].timing
        p50 = timing.time_us
        latency = {
            "lat_us_p50": p50,
            "lat_us_mean": p50,
            "lat_us_min": _given(timing.min_us, NAN),
            "lat_us_max": _given(timing.max_us, NAN),
            "lat_us_p10": _given(timing.p10_us, NAN),
            "lat_us_p90": _given(timing.p90_us, NAN),
            "lat_us_p99": _given(timing.p99_us, NAN),
            "lat_us_std": _given(timing.std_us, NAN),
            "lat_us_ci_lo": p50,
            "lat_us_ci_hi": p50,
        }
        samples, samples_us, tail = 1, [], timing.tail
        if timing.samples_us:  # one time per iteration: each is a sample
            samples, samples_us = len(timing.samples_us), [round(t, 4) for t in
                                                           timing.samples_us]
        fields.update(timing.per_call)
    else:
        times = [item.timing.time_us for item in items]
        latency = summarize(times).as_columns()
        samples, samples_us, tail = len(times), [round(t, 4) for t in times], "block"
        fields["wrong"] = sum(item.fields.get("wrong", 0) for item in items)
    p50 = latency["lat_us_p50"]
    algbw = size / (p50 * 1e-6) / 1e9 if p50 > 0 and size > 0 else 0.0
    factor = op.busbw_factor(fields["group_size"], fields.get("pattern", ""))
    row = Row(
        **fields,
        count=size // itemsize if op.sized else 0,
        samples=samples,
        **latency,
        algbw_gbps=algbw,
        busbw_gbps=algbw * factor,
        unstable=instability(p50, latency["lat_us_p90"], latency["lat_us_ci_lo"],
                             latency["lat_us_ci_hi"]),
        tail=tail,
        samples_us=samples_us,
    )
    return row.to_dict()


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


def skew_pct(min_us: float | None, max_us: float | None) -> float:
    """(slowest - fastest) / slowest, as commbench's skew column, where a file gives both
    (else unknown: NaN, shown '-')."""
    if min_us is None or max_us is None or max_us <= 0:
        return NAN
    return (max_us - min_us) / max_us * 100


def normalized_op(text: str) -> str:
    """'reduce-scatter', 'osu_reduce_scatter', 'all_reduce_perf' -> 'reducescatter' etc."""
    name = text.strip().lower()
    for prefix in ("osu_",):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.endswith("_perf"):
        name = name[: -len("_perf")]
    return name.replace("-", "").replace("_", "")
