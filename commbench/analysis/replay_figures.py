"""What a replay reports (SPEC §9): the figures from what the ranks measured.

Per op and dtype and per rank: bytes (commbench's size, the largest buffer) and calls per
replayed step, and three times per step: in situ (the recording's own call times), replayed
(issue to completion of each replayed call, summed) and model (each call priced, summed).
A rank's figure is its median over the replayed steps (bytes and calls: the mean); a row
is the mean over the ranks that make the op's calls; ``per_step`` the mean over ranks of
each rank's median step total, and the replayed step's wall (first issue to last
completion, where overlapping calls count once). Sums of call times count overlapping
calls twice, as an estimate does: the wall is the number to set beside a step's time.

Data in, data out: nothing here imports torch or prints.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from commbench.analysis.replay import Price, ReplayPlan, calls_by_seq
from commbench.trace.format import Call, Trace


@dataclass
class RankResult:
    """One rank's replay: per replayed step its wall and every call's (seq, issue, end,
    bytes), times in seconds from the step's start; the isolated medians by item index."""

    rank: int
    steps: list[dict]
    isolated: dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, record: dict) -> RankResult:
        return cls(int(record["rank"]), list(record["steps"]),
                   {int(k): float(v) for k, v in record.get("isolated", {}).items()})


@dataclass
class OpFigures:
    """One (op, dtype) of one rank: its sums in each replayed step (None: not known)."""

    op: str
    dtype: str
    steps: int
    trace_bytes: list[float] = field(default_factory=list)
    trace_calls: list[float] = field(default_factory=list)
    replay_bytes: list[float] = field(default_factory=list)
    replay_calls: list[float] = field(default_factory=list)
    in_situ: list[float | None] = field(default_factory=list)
    replayed: list[float] = field(default_factory=list)
    model: list[float | None] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)
    timed: int = 0  # calls with an in-situ time
    untimed: int = 0  # calls the recording has no completion for (left out of in situ)

    def __post_init__(self) -> None:
        for name in ("trace_bytes", "trace_calls", "replay_bytes", "replay_calls", "in_situ",
                     "replayed", "model"):
            setattr(self, name, [0.0] * self.steps)

    def add(self, name: str, index: int, value: float | None) -> None:
        column = getattr(self, name)
        column[index] = None if column[index] is None or value is None else \
            column[index] + value

    def figures(self) -> dict:
        """Per step: bytes and calls as means, times as medians over the replayed steps (a
        busy machine's spells make a step's time heavy-tailed; the median is the headline,
        as everywhere in commbench)."""
        return {"op": self.op, "dtype": self.dtype, "bytes": _mean(self.trace_bytes),
                "calls": _mean(self.trace_calls),
                "in_situ_s": _median(self.in_situ) if self.timed else None,
                "replayed_s": _median(self.replayed), "model_s": _median(self.model),
                "replayed_bytes": _mean(self.replay_bytes),
                "replayed_calls": _mean(self.replay_calls),
                "model_source": ", ".join(sorted(self.sources)), "untimed": self.untimed,
                "timed": self.timed}


@dataclass
class Summary:
    steps: int
    per_step: dict
    ops: list[dict]
    ranks: list[dict]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"steps": self.steps, "per_step": self.per_step, "ops": self.ops,
                "notes": self.notes}


def rank_figures(trace: Trace, result: RankResult,
                 price: Price) -> dict[tuple[str, str], OpFigures]:
    """(op, dtype) -> this rank's sums per replayed step, the trace's beside the replay's."""
    rank, count = result.rank, len(result.steps)
    figures: dict[tuple[str, str], OpFigures] = {}
    by_seq = calls_by_seq(trace, rank)

    def of(call: Call) -> OpFigures:
        key = (call.op, call.dtype)
        if key not in figures:
            figures[key] = OpFigures(call.op, call.dtype, count)
        return figures[key]

    for index, replayed in enumerate(result.steps):
        for call in trace.calls(rank, int(replayed["step"])):
            fig = of(call)
            fig.add("trace_bytes", index, call.size_bytes)
            fig.add("trace_calls", index, 1)
            # A call the recording saw no completion of (a recorder cut short at exit) is
            # left out of in situ and counted, rather than hiding the op's whole figure.
            if call.in_situ_s is None:
                fig.untimed += 1
            else:
                fig.timed += 1
                fig.add("in_situ", index, call.in_situ_s)
            cost, source = price(rank, call)
            fig.add("model", index, cost)
            fig.sources.add(source)
        for seq, issue, end, nbytes in replayed["calls"]:
            fig = of(by_seq[int(seq)])
            fig.add("replay_bytes", index, nbytes)
            fig.add("replay_calls", index, 1)
            fig.add("replayed", index, max(0.0, end - issue))
    return figures


def _mean(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else statistics.fmean(values)


def _median(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else statistics.median(values)


def summarise(trace: Trace, plan: ReplayPlan, results: dict[int, RankResult],
              price: Price) -> Summary:
    """The table's rows, the per-step totals and one row per rank and op (replay_ranks.csv):
    a rank's figure is its median over the replayed steps, a row the mean over the ranks that
    make the op's calls (as --rank-time avg combines ranks)."""
    per_rank = {rank: rank_figures(trace, result, price)
                for rank, result in sorted(results.items())}
    rows = [{"rank": rank, **f.figures()} for rank, figures in per_rank.items()
            for f in figures.values()]
    ops = []
    for op, dtype in sorted({key for figures in per_rank.values() for key in figures}):
        mine = [f.figures() for figures in per_rank.values() for key, f in figures.items()
                if key == (op, dtype)]
        row = {"op": op, "dtype": dtype}
        for name in ("bytes", "calls", "in_situ_s", "replayed_s", "model_s", "replayed_bytes",
                     "replayed_calls"):
            row[name] = _mean([m[name] for m in mine])
        for name in ("bytes", "calls", "replayed_bytes", "replayed_calls"):
            row[name] = _whole(row[name])
        row["ranks"] = len(mine)
        row["untimed_calls"] = sum(m["untimed"] for m in mine)
        # in situ: the mean over the ranks the recording timed the op on
        row["in_situ_s"] = _mean([m["in_situ_s"] for m in mine if m["in_situ_s"] is not None])
        row["model_source"] = ", ".join(sorted({s for m in mine
                                                for s in m["model_source"].split(", ") if s}))
        ops.append(row)
    # A step's model leaves out what could not be priced (the notes say so); its in situ
    # time is only known where every call has one.
    totals: dict[str, list] = {"in_situ_s": [], "replayed_s": [], "model_s": []}
    for figures in per_rank.values():
        if not figures:
            continue
        for name, column in (("in_situ_s", "in_situ"), ("replayed_s", "replayed"),
                             ("model_s", "model")):
            steps = zip(*(getattr(f, column) for f in figures.values()), strict=True)
            totals[name].append(_median([_total(list(values), partial=name == "model_s")
                                         for values in steps]))
    walls = [statistics.median(s["wall_s"] for s in r.steps) for r in results.values()
             if r.steps]
    spans = [_span(trace, rank, [int(s["step"]) for s in results[rank].steps])
             for rank in results]
    per_step = {name: _mean(values) for name, values in totals.items()}
    per_step.update(replayed_wall_s=_mean(walls), in_situ_span_s=_mean(spans),
                    replayed_max_rank_s=max(totals["replayed_s"], default=None))
    return Summary(len(plan.steps), per_step, ops, rows, _notes(ops, plan))


def _total(values: list, partial: bool = False) -> float | None:
    known = [v for v in values if v is not None]
    if not known or (len(known) < len(values) and not partial):
        return None
    return sum(known)


def _whole(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(round(value)) if abs(value - round(value)) < 1e-9 else value


def _span(trace: Trace, rank: int, steps: list[int]) -> float | None:
    """The recorded steps' communication span: first issue to last end, median over steps."""
    spans = []
    for step in steps:
        calls = trace.calls(rank, step)
        issued = [c.t_issue_ns for c in calls if c.t_issue_ns is not None]
        ended = [c.t_end_ns for c in calls if c.t_end_ns is not None]
        if not issued or not ended or len(ended) < len(calls):
            return None
        spans.append(max(0, max(ended) - min(issued)) / 1e9)
    return statistics.median(spans) if spans else None


def _notes(ops: list[dict], plan: ReplayPlan) -> list[str]:
    notes = []
    for row in ops:
        if row["bytes"] != row["replayed_bytes"] or row["calls"] != row["replayed_calls"]:
            notes.append(f"{row['op']} {row['dtype']}: the replay moved {row['replayed_bytes']} "
                         f"bytes in {row['replayed_calls']} calls per step, the trace "
                         f"{row['bytes']} in {row['calls']}")
        if row["in_situ_s"] is None:
            notes.append(f"{row['op']} {row['dtype']}: the trace has no completion times, so "
                         "no in-situ time")
        elif row["untimed_calls"]:
            notes.append(f"{row['op']} {row['dtype']}: {row['untimed_calls']} replayed call(s) "
                         "have no completion time in the trace and are left out of in situ")
        if row["model_s"] is None:
            why = "" if row["model_source"] == "not priced" else f" ({row['model_source']})"
            notes.append(f"{row['op']} {row['dtype']}: not priced{why}, left out of the "
                         "step's model")
    if plan.gaps:
        notes.append("--gaps recorded: each call waited for the compute time recorded before it")
    return notes


def mismatches(summary: Summary) -> list[str]:
    """Where the replay's bytes or calls per step differ from the trace's (a check)."""
    return [note for note in summary.notes if "the replay moved" in note]
