"""What a replay reports (docs/commands/replay.md#json-output-and-files): the figures from what the
ranks measured.

Per op and dtype and per rank: bytes (commbench's size, the largest buffer) and calls per
replayed step, for an all-to-all also the bytes a rank sends and receives (its split sizes:
MoE dispatch and combine are uneven, and their largest buffer says neither), and three times
per step: in situ (the recording's own call times), replayed (issue to completion of each
replayed call, summed) and model (each call priced, summed).
A replayed call's time is its median over the replays of its recorded step (a busy
machine's spells make single timings heavy-tailed: on the 2-core VM one replay of a 1 MiB
allreduce read 31 ms among 0.5 ms ones; the median is the headline, as everywhere in
commbench), a step's wall likewise; a rank's figure is then the mean over the plan's steps
of the step's sums (each recorded step weighted by how often it is replayed), the trace's
bytes, calls, in situ and model alike. A row is the mean over the ranks that make the op's
calls; ``per_step`` the mean over ranks of each rank's total, and the replayed step's wall
(first issue to last completion, where overlapping calls count once). Sums of call times
count overlapping calls twice, as an estimate does: the wall is the number to set beside a
step's time.

Data in, data out: nothing here imports torch or prints.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from commbench.core.sizes import format_size
from commbench.replay.plan import Price, ReplayPlan, calls_by_seq
from commbench.results.trace import Call, Trace, moves_per_peer

# An op's first keys, in their order (the extra keys follow):
# docs/commands/replay.md#json-output-and-files
OP_KEYS = ("op", "dtype", "bytes", "calls", "in_situ_s", "replayed_s", "model_s")
# what a step moves, recorded and replayed (the replay must match the trace exactly)
COUNTS = ("bytes", "calls", "replayed_bytes", "replayed_calls", "sent_bytes",
          "received_bytes", "replayed_sent_bytes", "replayed_received_bytes")


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
    """One (op, dtype) of one rank, per step: means over the plan's steps, each recorded step
    weighted by how often the plan replays it (None: not known)."""

    op: str
    dtype: str
    bytes: float = 0.0
    calls: float = 0.0
    replayed_bytes: float = 0.0
    replayed_calls: float = 0.0
    # an all-to-all's bytes sent and received (the trace's split sizes, and what the replay
    # handed torch); not reported for other ops
    sent_bytes: float = 0.0
    received_bytes: float = 0.0
    replayed_sent_bytes: float = 0.0
    replayed_received_bytes: float = 0.0
    in_situ_s: float = 0.0
    replayed_s: float = 0.0
    model_s: float | None = 0.0
    sources: set[str] = field(default_factory=set)
    timed: int = 0  # calls with an in-situ time
    untimed: int = 0  # calls the recording has no completion for (left out of in situ)
    step_calls: dict[int, int] = field(default_factory=dict)  # recorded step -> its calls
    calls_range: tuple[int, int] = (0, 0)  # fewest and most calls in a replayed step

    def figures(self) -> dict:
        moves = moves_per_peer(self.op)
        return {"sent_bytes": self.sent_bytes if moves else None,
                "received_bytes": self.received_bytes if moves else None,
                "replayed_sent_bytes": self.replayed_sent_bytes if moves else None,
                "replayed_received_bytes": self.replayed_received_bytes if moves else None,
                "op": self.op, "dtype": self.dtype, "bytes": self.bytes, "calls": self.calls,
                "in_situ_s": self.in_situ_s if self.timed else None,
                "replayed_s": self.replayed_s, "model_s": self.model_s,
                "replayed_bytes": self.replayed_bytes, "replayed_calls": self.replayed_calls,
                "model_source": ", ".join(sorted(self.sources)), "untimed": self.untimed,
                "timed": self.timed, "calls_min": self.calls_range[0],
                "calls_max": self.calls_range[1],
                "steps_with_calls": sorted(s for s, n in self.step_calls.items() if n)}


@dataclass
class Summary:
    steps: int
    per_step: dict
    ops: list[dict]
    ranks: list[dict]
    notes: list[str] = field(default_factory=list)
    left_out: str = ""  # what of the recording is not a step (results.trace.step_split)

    def as_json(self) -> dict:
        return {"steps": self.steps, "per_step": self.per_step, "ops": self.ops,
                "notes": self.notes, "left_out": self.left_out}


def replays_by_step(result: RankResult) -> dict[int, list[dict]]:
    """Recorded step -> its replays (in replay order)."""
    found: dict[int, list[dict]] = {}
    for replayed in result.steps:
        found.setdefault(int(replayed["step"]), []).append(replayed)
    return found


def rank_figures(trace: Trace, result: RankResult,
                 price: Price) -> tuple[dict[tuple[str, str], OpFigures], float | None]:
    """(op, dtype) -> this rank's figures per step, and its step wall (the module
    docstring: medians over each recorded step's replays, means over the plan's steps)."""
    rank = result.rank
    figures: dict[tuple[str, str], OpFigures] = {}
    by_seq = calls_by_seq(trace, rank)
    replays = replays_by_step(result)
    total = sum(len(r) for r in replays.values())
    wall = 0.0

    def of(call: Call) -> OpFigures:
        return figures.setdefault((call.op, call.dtype), OpFigures(call.op, call.dtype))

    for step, runs in sorted(replays.items()):
        weight = len(runs) / total
        wall += weight * statistics.median(r["wall_s"] for r in runs)
        for call in trace.calls(rank, step):
            fig = of(call)
            fig.bytes += weight * call.size_bytes
            fig.calls += weight
            peers = call.peer_bytes(len(trace.groups[call.pg].ranks))
            if peers is not None:
                fig.sent_bytes += weight * sum(peers["in"])
                fig.received_bytes += weight * sum(peers["out"])
            fig.step_calls[step] = fig.step_calls.get(step, 0) + 1
            # A call the recording saw no completion of (a recorder cut short at exit) is
            # left out of in situ and counted, rather than hiding the op's whole figure.
            if call.in_situ_s is None:
                fig.untimed += 1
            else:
                fig.timed += 1
                fig.in_situ_s += weight * call.in_situ_s
            cost, source = price(rank, call)
            fig.model_s = None if fig.model_s is None or cost is None else \
                fig.model_s + weight * cost
            fig.sources.add(source)
        durations: dict[int, list[float]] = {}
        handed: dict[int, tuple] = {}
        for run in runs:
            for seq, issue, end, nbytes, *moved in run["calls"]:
                durations.setdefault(int(seq), []).append(max(0.0, end - issue))
                handed[int(seq)] = (int(nbytes), *(moved or (None, None)))
        for seq, times in durations.items():
            fig = of(by_seq[seq])
            nbytes, sent, received = handed[seq]
            fig.replayed_bytes += weight * nbytes
            if sent is not None:
                fig.replayed_sent_bytes += weight * sent
                fig.replayed_received_bytes += weight * received
            fig.replayed_calls += weight
            fig.replayed_s += weight * statistics.median(times)
    for fig in figures.values():  # an op some replayed steps lack: said, not hidden in a mean
        counts = [fig.step_calls.get(step, 0) for step in replays]
        fig.calls_range = (min(counts), max(counts))
    return figures, (wall if replays else None)


def _mean(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else statistics.fmean(values)


def summarise(trace: Trace, plan: ReplayPlan, results: dict[int, RankResult],
              price: Price) -> Summary:
    """The table's rows, the per-step totals and one row per rank and op (replay_ranks.csv):
    a row is the mean over the ranks that make the op's calls (as --rank-time avg combines
    ranks)."""
    per_rank, walls = {}, []
    for rank, result in sorted(results.items()):
        per_rank[rank], wall = rank_figures(trace, result, price)
        walls.append(wall)
    rows = [{"rank": rank, **f.figures()} for rank, figures in per_rank.items()
            for f in figures.values()]
    ops = []
    for op, dtype in sorted({key for figures in per_rank.values() for key in figures}):
        mine = [f.figures() for figures in per_rank.values() for key, f in figures.items()
                if key == (op, dtype)]
        row = {"op": op, "dtype": dtype}
        for name in ("bytes", "calls", "replayed_s", "model_s", *COUNTS[2:]):
            row[name] = _mean([m[name] for m in mine])
        for name in COUNTS:
            row[name] = _whole(row[name])
        # in situ: the mean over the ranks the recording timed the op on
        row["in_situ_s"] = _mean([m["in_situ_s"] for m in mine if m["in_situ_s"] is not None])
        row["ranks"] = len(mine)
        for name in ("sent", "received"):  # MoE routing: each rank moves its own bytes
            values = [m[f"{name}_bytes"] for m in mine if m[f"{name}_bytes"] is not None]
            row[f"{name}_range"] = (min(values), max(values)) if values else None
        row["calls_min"] = min(m["calls_min"] for m in mine)
        row["calls_max"] = max(m["calls_max"] for m in mine)
        row["steps_with_calls"] = sorted({s for m in mine for s in m["steps_with_calls"]})
        row["untimed_calls"] = sum(m["untimed"] for m in mine)
        row["model_source"] = ", ".join(sorted({m["model_source"] for m in mine}))
        ops.append({**{key: row[key] for key in OP_KEYS}, **row})
    # A step's model leaves out what could not be priced (the notes say so); its in situ
    # time is only known where the recording timed some call.
    totals: dict[str, list] = {"in_situ_s": [], "replayed_s": [], "model_s": []}
    for figures in per_rank.values():
        if figures:
            for name in totals:
                values = [f.figures()[name] for f in figures.values()]
                totals[name].append(_total(values, partial=name != "replayed_s"))
    spans = [_span(trace, rank, [int(s["step"]) for s in results[rank].steps])
             for rank in results]
    per_step = {name: _mean(values) for name, values in totals.items()}
    per_step.update(replayed_wall_s=_mean([w for w in walls if w is not None]),
                    in_situ_span_s=_mean(spans),
                    replayed_max_rank_s=max(totals["replayed_s"], default=None))
    replayed = sorted(set(plan.steps))
    return Summary(len(plan.steps), per_step, ops, rows, _notes(ops, plan, replayed))


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
    """The recorded steps' wall as the replay's step wall measures it, mean over the plan:
    from the previous recorded step's last completion (the replay waits for the compute
    before a step's first call: replay.plan.gaps) to the step's last end; from its first
    issue where no step was recorded before it. Counting from the first issue instead made a
    replay with recorded gaps read 1.45x its DDP recording (2026-12-06): the replay's wall
    held the forward, the span did not."""
    recorded = sorted({call.step for call in trace.calls(rank)})
    spans = []
    for step in steps:
        calls = trace.calls(rank, step)
        issued = [c.t_issue_ns for c in calls if c.t_issue_ns is not None]
        ended = [c.t_end_ns for c in calls if c.t_end_ns is not None]
        if not issued or not ended or len(ended) < len(calls):
            return None
        begin = min(issued)
        earlier = [s for s in recorded if s < step]
        if earlier:
            before = [c.t_end_ns if c.t_end_ns is not None else c.t_issue_ns
                      for c in trace.calls(rank, earlier[-1])]
            before = [t for t in before if t is not None]
            if before:
                begin = min(begin, max(before))
        spans.append(max(0, max(ended) - begin) / 1e9)
    return statistics.fmean(spans) if spans else None


def _notes(ops: list[dict], plan: ReplayPlan, replayed: list[int]) -> list[str]:
    notes = []
    for row in ops:
        if row["calls_min"] != row["calls_max"]:
            some = row["steps_with_calls"]
            notes.append(f"{row['op']} {row['dtype']}: {row['calls_min']}-{row['calls_max']} "
                         f"calls a step, made in {len(some)} of the {len(replayed)} "
                         f"replayed recorded step(s) ({_steps_text(some)}): its per-step "
                         "figures are means over all of them")
        if row["bytes"] != row["replayed_bytes"] or row["calls"] != row["replayed_calls"]:
            notes.append(f"{row['op']} {row['dtype']}: the replay moved {row['replayed_bytes']} "
                         f"bytes in {row['replayed_calls']} calls per step, the trace "
                         f"{row['bytes']} in {row['calls']}")
        elif _differs(row.get("sent_bytes"), row.get("replayed_sent_bytes")) or _differs(
                row.get("received_bytes"), row.get("replayed_received_bytes")):
            notes.append(f"{row['op']} {row['dtype']}: the replay moved "
                         f"{row['replayed_sent_bytes']} bytes sent and "
                         f"{row['replayed_received_bytes']} received per step, the trace "
                         f"{row['sent_bytes']} and {row['received_bytes']}")
        if row.get("sent_bytes") is not None and (row["sent_bytes"], row["received_bytes"]) != (
                row["bytes"], row["bytes"]):
            notes.append(f"{row['op']} {row['dtype']}: split sizes replayed as recorded; a "
                         f"rank sends {_spread(row['sent_range'])} and receives "
                         f"{_spread(row['received_range'])} a step (bytes/step adds each "
                         "call's largest buffer)")
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


def _differs(recorded: float | None, replayed: float | None) -> bool:
    """Means over steps of whole bytes: equal up to the rounding of the means (each call's
    bytes were checked exactly before timing)."""
    if recorded is None or replayed is None:
        return recorded is not replayed
    return abs(recorded - replayed) > 1e-9 * max(1.0, abs(recorded))


def _spread(low_high: tuple[float, float]) -> str:
    """A per-step figure's range over the ranks, in bytes (``54.4KB-72.6KB``)."""
    low, high = (f"{format_size(int(round(value)))}B" for value in low_high)
    return low if low == high else f"{low}-{high}"


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(map(str, steps[:6]))
    return f"step{'s' * (len(steps) != 1)} {shown}{', ...' if len(steps) > 6 else ''}"


def mismatches(summary: Summary) -> list[str]:
    """Where the replay's bytes or calls per step differ from the trace's (a check)."""
    return [note for note in summary.notes if "the replay moved" in note]
