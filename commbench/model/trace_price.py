"""A recorded step priced on a run's measured curves (``estimate --trace DIR --run RUN``): what
the calls a job really made would cost on the cluster that measured RUN, instead of the
idealised model of ``model.estimate``.

Each call is read on RUN's curve of its op, at its size (``Call.size_bytes``: the largest
buffer a rank holds, docs/reference/metrics-and-formulas.md#sizes, so an allgather is read at its
gathered output and a reduce-scatter at its input), for groups of its group's size, the way
``estimate`` reads a term (``model.curves.RunCurves``): the median where the run measured that size
("measured"), log-log interpolation between its sizes ("interpolated"), the α–β fit outside them
("model fit (extrapolated)"), and a projection per ring step where the run measured another group
size ("projected"). Rows of a mesh dimension whose groups have the call's size are preferred; else
the whole world's. send and recv read the run's p2p rows (pingpong first: the one-way time of one
message); a barrier reads the run's barrier rows (median of their medians, no size). A call the run
cannot price (an op it did not measure, a size outside a curve too short to fit) is left out of the
sums with a note naming what to measure.

The steps priced by default are the trace's steps as ``results.trace.step_split`` decides
them, the rule replay shares: step 0's set-up traffic and the tail after the last step end
are not steps (``--step N`` prices any recorded step), so the mean per step here and a
replay's model per step are of the same steps.

Per rank and step, calls of one (op, dtype, size, group size) make one line: calls x the
price of one call. A step's time is the sum of its lines, nothing overlapping (as
``estimate`` assumes); the in-situ time beside it is the trace's own (``Call.in_situ_s``)
where it has one. The ranks of a job usually make the same calls; where they differ (p2p,
pipeline stages), the line-up shown is one rank's: by default the one whose priced steps cost
most.

``CurvePricer`` is also a ``replay.plan.Price``: ``pricer(rank, call) -> (seconds or
None, source)``. Data in, data out: nothing here prints or imports torch.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from commbench.core.errors import UsageError
from commbench.model.curves import RunCurves
from commbench.model.estimate import NO_OVERLAP, StepSpec
from commbench.results.schema import is_combined
from commbench.results.trace import ITEMSIZES, Call, Group, Trace, step_split, trace_op

BARRIER_SOURCE = "measured (barrier)"
# RunCurves names a term by its parallelism; a trace's call has a group, not a parallelism.
TERM = "group"


class CurvePricer:
    """Prices calls on one run's rows; ``notes`` says how each curve was chosen and what could
    not be priced. One ``RunCurves`` per dtype (the run's rows in the call's dtype first, else
    its most measured dtype at the same byte size, with a note)."""

    def __init__(self, rows: list[dict], groups: dict[str, Group]) -> None:
        self.rows = rows
        self.groups = groups
        self._curves: dict[str, RunCurves] = {}
        self._cache: dict[tuple, tuple[float | None, str]] = {}
        self._notes: list[str] = []

    @property
    def notes(self) -> list[str]:
        found = list(self._notes)
        for curves in self._curves.values():
            for note in map(_as_call_note, curves.notes):
                if note not in found:
                    found.append(note)
        return found

    def __call__(self, rank: int, call: Call) -> tuple[float | None, str]:
        return self.price(call)

    def group_size(self, call: Call) -> int:
        group = self.groups.get(call.pg)
        return len(group.ranks) if group else 2

    def price(self, call: Call) -> tuple[float | None, str]:
        """(seconds for one call or None, where the price came from)."""
        key = (call.op, call.dtype, call.size_bytes, self.group_size(call))
        if key not in self._cache:
            try:
                self._cache[key] = self._price(call, key[3])
            except UsageError as error:
                self._note(f"{call.op} calls are not priced: {error}")
                self._cache[key] = (None, "not priced")
        return self._cache[key]

    def _note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def _price(self, call: Call, group: int) -> tuple[float | None, str]:
        if call.is_barrier:
            return self._barrier(group)
        if call.size_bytes <= 0:
            return 0.0, "empty call"
        # A message has two ends: it is priced on the p2p curve of a pair.
        op, world = ("p2p", 2) if call.is_p2p else (call.op, group)
        curve = self._for(call.dtype).curve(op, self._dimension(op, group), world)
        micros, source = curve.time_us(call.size_bytes)
        return micros * 1e-6, source

    def _for(self, dtype: str) -> RunCurves:
        if dtype not in self._curves:
            spec = StepSpec(params=1, dtype=dtype, dtype_bytes=ITEMSIZES.get(dtype, 4))
            self._curves[dtype] = RunCurves(self.rows, spec)
        return self._curves[dtype]

    def _dimension(self, op: str, group: int) -> str:
        """A mesh dimension of the run whose groups have ``group`` ranks, so that RunCurves
        reads its own rows (measured, not projected); else the whole world's rows."""
        for row in self.rows:
            dim = str(row.get("dim") or "")
            size = int(row.get("group_size") or row.get("world_size") or 0)
            if dim and row["op"] == op and size == group and is_combined(row):
                return dim
        return TERM

    def _barrier(self, group: int) -> tuple[float | None, str]:
        rows = [r for r in self.rows if trace_op(r["op"]).barrier and is_combined(r)
                and float(r["lat_us_p50"]) > 0]
        if not rows:
            raise UsageError("the run has no barrier rows: measure `commbench barrier`")
        sizes = sorted({int(r.get("group_size") or r["world_size"]) for r in rows})
        nearest = min(sizes, key=lambda size: (abs(size - group), -size))
        if nearest != group:
            self._note(f"barrier calls on groups of {group} ranks read the run's barrier of "
                       f"{nearest} ranks as it is (a barrier is not projected)")
        medians = [float(r["lat_us_p50"]) for r in rows
                   if int(r.get("group_size") or r["world_size"]) == nearest]
        return statistics.median(medians) * 1e-6, BARRIER_SOURCE


def _as_call_note(note: str) -> str:
    """RunCurves speaks of an estimate's terms ("group allreduce term is a projection:
    group=4 groups were not measured", "pp term uses p2p pingpong rows"); a trace has calls."""
    note = re.sub(rf"^{TERM} (\w+) term is a projection: {TERM}=(\d+) groups were",
                  r"\1 calls on groups of \2 ranks are a projection: such groups were", note)
    note = re.sub(r"^pp term uses p2p", "send/recv calls use p2p", note)
    return re.sub(rf"^{TERM} p2p term uses whole-world pairs \(ranks 0-1, 2-3, \.\.\. of "
                  r"(\d+)\), not neighbouring pipeline stages",
                  r"send/recv calls use the run's whole-world pairs (ranks 0-1, 2-3, ... of "
                  r"\1)", note)


@dataclass
class Line:
    """Calls of one (op, dtype, size, group size) in one step of one rank."""

    step: int
    op: str
    dtype: str
    nbytes: int
    group_size: int
    calls: int = 0
    per_call_s: float | None = None
    source: str = ""
    in_situ_s: float | None = 0.0

    @property
    def model_s(self) -> float | None:
        return None if self.per_call_s is None else self.calls * self.per_call_s

    def as_dict(self) -> dict:
        return {"step": self.step, "op": self.op, "dtype": self.dtype, "bytes": self.nbytes,
                "group_size": self.group_size, "calls": self.calls,
                "per_call_us": None if self.per_call_s is None else self.per_call_s * 1e6,
                "model_s": self.model_s, "in_situ_s": self.in_situ_s, "source": self.source}


@dataclass
class TracePrice:
    """One rank's steps priced line by line, every rank's priced step totals, and notes."""

    rank: int
    steps: list[int]
    lines: list[Line]
    rank_totals: dict[int, dict[int, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def step_model_s(self, step: int) -> float:
        """The step's priced time (calls that could not be priced count 0; the notes say)."""
        return sum(line.model_s or 0.0 for line in self.lines if line.step == step)

    def step_in_situ_s(self, step: int) -> float | None:
        values = [line.in_situ_s for line in self.lines if line.step == step]
        return None if any(v is None for v in values) else sum(values)

    @property
    def mean_model_s(self) -> float:
        return statistics.fmean(self.step_model_s(s) for s in self.steps) if self.steps else 0.0

    @property
    def unpriced_calls(self) -> int:
        return sum(line.calls for line in self.lines if line.per_call_s is None)

    def as_dict(self) -> dict:
        return {"rank": self.rank, "steps": self.steps,
                "per_step": [{"step": s, "model_s": self.step_model_s(s),
                              "in_situ_s": self.step_in_situ_s(s)} for s in self.steps],
                "mean_model_s": self.mean_model_s,
                "ops": [line.as_dict() for line in self.lines],
                "rank_model_s": {str(r): {str(s): t for s, t in totals.items()}
                                 for r, totals in self.rank_totals.items()},
                "notes": self.notes}


def price_calls(calls: list[Call], pricer: CurvePricer) -> list[Line]:
    """One rank's calls folded into lines (in order of first appearance within each step),
    each priced once."""
    lines: dict[tuple, Line] = {}
    for call in calls:
        group = pricer.group_size(call)
        key = (call.step, call.op, call.dtype, call.size_bytes, group)
        line = lines.get(key)
        if line is None:
            per_call, source = pricer.price(call)
            line = lines[key] = Line(call.step, call.op, call.dtype, call.size_bytes, group,
                                     per_call_s=per_call, source=source)
        line.calls += 1
        situ = call.in_situ_s
        line.in_situ_s = None if line.in_situ_s is None or situ is None else (
            line.in_situ_s + situ)
    return list(lines.values())


def price_trace(trace: Trace, rows: list[dict], rank: int | None = None,
                steps: list[int] | None = None, waited: str | None = None) -> TracePrice:
    """Every rank's chosen steps priced on ``rows``; the lines of ``rank`` (default: the rank
    whose priced steps cost most, the lowest such rank on a tie). ``waited`` is the command's
    note on which rank the others waited for (stragglers' rule: a sibling capability, so the
    command asks it and hands the words in)."""
    available = trace.steps()
    # By default the trace's steps, as replay decides them (results.trace.step_split): not
    # step 0's set-up traffic, not the tail after the last step end; --step names any.
    split = step_split(trace)
    chosen = list(dict.fromkeys(steps)) if steps else list(split.steps)
    missing = [s for s in chosen if s not in available and s not in split.steps]
    if missing:
        raise UsageError(f"{trace.path}: no step {missing[0]} in the trace (its steps: "
                         f"{', '.join(map(str, available)) or 'none'})")
    if rank is not None and rank not in trace.ranks:
        raise UsageError(f"{trace.path}: no file for rank {rank} (ranks "
                         f"{', '.join(map(str, sorted(trace.ranks)))})")
    pricer = CurvePricer(rows, trace.groups)
    per_rank: dict[int, list[Line]] = {}
    totals: dict[int, dict[int, float]] = {}
    for number in sorted(trace.ranks):
        calls = [c for c in trace.calls(number) if c.step in chosen]
        per_rank[number] = price_calls(calls, pricer)
        totals[number] = {s: sum(line.model_s or 0.0 for line in per_rank[number]
                                 if line.step == s) for s in chosen}
    shown = rank if rank is not None else max(
        sorted(per_rank), key=lambda r: sum(totals[r].values()))
    notes = list(trace.notes)
    if not steps and split.left_out():
        notes.append(f"not priced: {split.left_out()} (--step N prices any recorded step)")
    if not steps and split.fallback:
        notes.append(split.fallback)
    notes += pricer.notes
    priced = any(line.model_s is not None for lines in per_rank.values() for line in lines)
    if not priced:
        # 0.000 totals would read as a time: say that nothing was priced, and name no rank
        # as costing most
        notes.append("nothing was priced: the run has no curve for any of the trace's calls "
                     "(op, dtype, group size); the step totals are 0 because nothing was "
                     "priced, not a time")
    elif len(trace.ranks) > 1:
        spread = sorted({round(sum(t.values()), 12) for t in totals.values()})
        how = "chosen with --rank" if rank is not None else "the rank whose steps cost most"
        notes.append(f"lines of rank {shown} ({how}); the {len(trace.ranks)} ranks' priced "
                     + ("steps cost the same" if len(spread) == 1 else
                        f"totals range {spread[0] * 1e3:.3f}-{spread[-1] * 1e3:.3f} ms"))
    if waited:
        notes.append(waited)
    result = TracePrice(rank=shown, steps=list(chosen), lines=per_rank[shown],
                        rank_totals=totals, notes=notes)
    if result.unpriced_calls:
        result.notes.append(f"{result.unpriced_calls} call(s) of rank {shown} could not be "
                            "priced and are left out of the step times")
    result.notes.append(NO_OVERLAP)
    return result
