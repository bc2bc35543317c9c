"""The model column of a replay: what each recorded call costs on measured curves.

Two sources, one shape (``(rank, call) -> (seconds or None, source)``):

- ``isolated_prices`` (the default): this launch's quick sweep at the trace's own sizes. After
  the replay, every distinct call is timed alone, back to back (analysis.replay's
  ``isolated_plan``), so a call costs the median of its distinct call's timings on its own rank:
  the same sizes, groups and cluster, without the step's other traffic around it.
- ``curve_prices`` (``--curves RUN``): another results folder, read the way ``estimate`` reads
  it (analysis.curves.RunCurves): the median where the run measured the size, log-log
  interpolation between its sizes, its α–β fit outside them, and a projection per ring step
  where the trace's group has another size than the run's. "What would this step cost on the
  cluster of RUN". p2p calls read the run's p2p rows (pingpong first: one-way time of one
  message); a barrier has no size and is not priced from curves.

Data in, data out: nothing here imports torch.
"""

from __future__ import annotations

from commbench.analysis.curves import RunCurves
from commbench.analysis.estimate import StepSpec
from commbench.analysis.replay import (
    P2P_OPS,
    Price,
    RankResult,
    ReplayPlan,
    calls_by_seq,
    local_key,
)
from commbench.config import ITEMSIZE
from commbench.errors import UsageError
from commbench.trace.format import Call, Trace

ISOLATED = "this launch, alone"
# The label RunCurves' notes give the term: "group allreduce term is a projection: group=4
# groups were not measured ..."
TERM = "group"


def isolated_prices(trace: Trace, plan: ReplayPlan, results: dict[int, RankResult]) -> Price:
    """A call costs what its distinct call took alone on its rank (the module docstring)."""
    index: dict[tuple[int, tuple], int] = {}
    for number, item in enumerate(plan.isolated):
        for rank, seq in item.calls:
            call = calls_by_seq(trace, rank).get(seq)
            if call is not None:
                index.setdefault((rank, local_key(call)), number)

    def price(rank: int, call: Call) -> tuple[float | None, str]:
        number = index.get((rank, local_key(call)))
        result = results.get(rank)
        if number is None or result is None or number not in result.isolated:
            return None, "not timed alone"
        return result.isolated[number], ISOLATED

    return price


class CurvePrices:
    """Prices on another run's curves, one RunCurves per dtype (its rows in that dtype first,
    else the run's most measured dtype at the same byte size, with a note)."""

    def __init__(self, rows: list[dict], trace: Trace) -> None:
        self.rows = rows
        self.groups = trace.groups
        self._curves: dict[str, RunCurves] = {}
        self._cache: dict[tuple, tuple[float | None, str]] = {}

    @property
    def notes(self) -> list[str]:
        found: list[str] = []
        for curves in self._curves.values():
            found += [n for n in curves.notes if n not in found]
        return found

    def _for(self, dtype: str) -> RunCurves:
        if dtype not in self._curves:
            spec = StepSpec(params=1, dtype=dtype, dtype_bytes=ITEMSIZE.get(dtype, 4))
            self._curves[dtype] = RunCurves(self.rows, spec)
        return self._curves[dtype]

    def __call__(self, rank: int, call: Call) -> tuple[float | None, str]:
        key = (call.op, call.dtype, call.size_bytes, call.pg)
        if key not in self._cache:
            self._cache[key] = self._price(call)
        return self._cache[key]

    def _price(self, call: Call) -> tuple[float | None, str]:
        if call.size_bytes <= 0:
            return None, "no size to read a curve at"
        group = len(self.groups[call.pg].ranks) if call.pg in self.groups else 2
        op = "p2p" if call.op in P2P_OPS else call.op
        curve = self._for(call.dtype).curve(op, TERM, 2 if op == "p2p" else group)
        micros, source = curve.time_us(call.size_bytes)
        return micros * 1e-6, source


def curve_prices(rows: list[dict], trace: Trace, calls: list[tuple[int, Call]]) -> CurvePrices:
    """Prices on ``rows`` (a run's), every call read once now: a curve the run lacks, or one
    too short to read at a size, is refused before anything is launched."""
    prices = CurvePrices(rows, trace)
    for rank, call in calls:
        try:
            prices(rank, call)
        except UsageError as error:
            raise UsageError(f"--curves cannot price the trace's {call.op} calls: {error}") \
                from None
    return prices
