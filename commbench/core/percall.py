"""Statistics of single calls (``--per-call``, nccl-tests ``-I``): p95, CV, spikes, stragglers.

Pure functions over arrays, shared by the sweep (measure.rows) and the importers, so one
definition of each number holds wherever a row comes from:

- **p95**: the 95th percentile of the size's call times (linear interpolation, as the other
  percentiles of a row);
- **CV**: standard deviation / mean of the call times, in % (population deviation, as nccl-tests'
  ``cv_pct``);
- **spikes**: calls that took more than SPIKE_RATIO x the size's median call;
- **stragglers**: for every call, the rank the others waited for; counted per rank.

Which rank the others waited for: in a collective that synchronises (allreduce, all-to-all ...)
every rank leaves a call at about the same moment, so the durations of one call are about the
same on every rank, whoever was late: the late rank's own call is short by as much as the others
wait. What tells the late rank is *when* each rank started the call: the last to arrive is the
straggler of that call (``lateness``). A call counts for its straggler only when the last rank
arrived at least STRAGGLER_SHARE of a median call after the first: below that, every rank was
on time and the last one is the clock's noise (or an op's fixed order, such as a ring's).
Where only durations are known (nccl-tests' per-process times), the rank with the longest time
stands in for it (``stragglers`` takes either).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# a spike: a call over 1.5x the size's median call
# (docs/reference/metrics-and-formulas.md#per-call-timing-per-call)
SPIKE_RATIO = 1.5
STRAGGLER_SHARE = 0.5  # the others waited at least half a median call: a spike's worth


@dataclass(frozen=True)
class CallStats:
    """The per-call columns of a row."""

    calls: int  # calls per rank the statistics are over
    p95: float  # µs
    cv_pct: float
    spikes: int
    stragglers: str  # "1:37,0:3": rank:calls it was the straggler of, most first

    def as_columns(self) -> dict:
        return {"calls": self.calls, "lat_us_p95": self.p95, "cv_pct": self.cv_pct,
                "spikes": self.spikes, "stragglers": self.stragglers}


def lateness(starts: np.ndarray, ends: np.ndarray, shared_clock: bool) -> np.ndarray:
    """Seconds each rank (row) started each call (column) after the first rank to start it.

    ``starts``/``ends``: each rank's clock at the start and end of each call. Ranks that share
    one clock (host timers on one host) compare directly; otherwise each rank's clock is set
    against rank 0's by the median difference of their ends (a synchronising call ends at
    about the same moment everywhere; the median ignores the calls where it did not).
    """
    starts = np.asarray(starts, dtype=np.float64)
    if not shared_clock:
        ends = np.asarray(ends, dtype=np.float64)
        offsets = np.median(ends - ends[:1], axis=1)
        starts = starts - offsets[:, None]
    return starts - starts.min(axis=0)


def straggler_counts(values: np.ndarray, margin: float) -> np.ndarray:
    """Per rank (row), the calls (columns) where its value was the largest and exceeded the
    smallest by ``margin`` or more (a lateness, or a duration where that is all there is)."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.zeros(values.shape[0], dtype=np.int64)
    if values.size == 0:
        return counts
    spread = values.max(axis=0) - values.min(axis=0)
    counted = spread >= margin
    if margin <= 0:
        counted &= spread > 0
    np.add.at(counts, values.argmax(axis=0)[counted], 1)
    return counts


def stragglers_text(counts, ranks=None) -> str:
    """'1:37,0:3': ranks with a count, the most first (ties by rank); ``ranks`` names the rows
    (global ranks; default 0..n-1)."""
    ranks = list(range(len(counts))) if ranks is None else list(ranks)
    pairs = [(int(rank), int(count)) for rank, count in zip(ranks, counts, strict=True)
             if count > 0]
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return ",".join(f"{rank}:{count}" for rank, count in pairs)


def parse_stragglers(text: str) -> list[tuple[int, int]]:
    """'1:37,0:3' -> [(1, 37), (0, 3)]; '' -> []."""
    pairs = []
    for item in filter(None, (part.strip() for part in str(text or "").split(","))):
        rank, _, count = item.partition(":")
        pairs.append((int(rank), int(count)))
    return pairs


def call_stats(times_us: np.ndarray, straggler_values: np.ndarray | None = None,
               ranks=None, margin_share: float = STRAGGLER_SHARE) -> CallStats:
    """The per-call columns from one time per call (``times_us``: the ranks' times combined as
    the row's --rank-time says, or a tool's per-iteration times) and, where known, a value per
    rank and call to name stragglers by (``straggler_values``: lateness, or durations, in the
    unit of ``times_us``)."""
    times = np.asarray(times_us, dtype=np.float64)
    times = times[np.isfinite(times)]
    if times.size == 0:
        return CallStats(0, 0.0, 0.0, 0, "")
    median = float(np.median(times))
    mean = float(times.mean())
    stragglers = ""
    if straggler_values is not None and np.size(straggler_values):
        counts = straggler_counts(straggler_values, margin_share * median)
        stragglers = stragglers_text(counts, ranks)
    return CallStats(
        calls=int(times.size),
        p95=float(np.percentile(times, 95)),
        cv_pct=float(times.std() / mean * 100) if mean > 0 else 0.0,
        spikes=int(np.count_nonzero(times > SPIKE_RATIO * median)),
        stragglers=stragglers,
    )
