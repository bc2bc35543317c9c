"""Calls matched across the members of their group (docs/commands/stragglers.md, "Matching").

A collective is the group's N-th call on every member (``check_order`` in the trace format
says where members disagree); a point-to-point message is the k-th send from a to b matched
with b's k-th receive from a. A member with fewer calls on a group than the others never
issued the next one: ``missing`` at that call, which is how a hang looks in a recording (the
others sit in call N, the missing rank never arrives).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from commbench.results.trace import TRACE_OPS, Call, Trace

# the other end of a message: what the rank that never arrived would have issued
_COUNTERPART = {name: next(other.name for other in TRACE_OPS.values()
                           if other.p2p and other.sends != op.sends)
                for name, op in TRACE_OPS.items() if op.p2p}


@dataclass(frozen=True)
class Arrival:
    """One member's side of a matched call: when it issued (on its own clock) and how long
    it spent inside (None where the trace does not say)."""

    rank: int
    issue_ns: int | None
    wait_ns: int | None
    seq: int


@dataclass
class Matched:
    """One call of a group as all its members made it; ``index`` counts the group's calls
    from 0 (the call number a hang is named by)."""

    group: str
    index: int
    op: str
    step: int
    arrivals: dict[int, Arrival] = field(default_factory=dict)


@dataclass(frozen=True)
class Missing:
    """A rank that never issued the group's call ``call`` while another member did."""

    rank: int
    call: int
    op: str
    group: str


def _arrival(rank: int, call: Call) -> Arrival:
    wait = call.in_situ_s
    return Arrival(rank, call.t_issue_ns, None if wait is None else round(wait * 1e9), call.seq)


def match(trace: Trace) -> tuple[list[Matched], list[Missing]]:
    """Every call matched across the members present in the trace, and the missing ranks."""
    matched: list[Matched] = []
    missing: list[Missing] = []
    for name, group in sorted(trace.groups.items()):
        members = [rank for rank in group.ranks if rank in trace.ranks]
        if len(members) < 2:
            continue
        calls = {rank: [c for c in trace.ranks[rank].calls if c.pg == name and not c.is_p2p]
                 for rank in members}
        _pair_up(name, calls, matched, missing)
    sends: dict[tuple[int, int], list[Call]] = defaultdict(list)
    receives: dict[tuple[int, int], list[Call]] = defaultdict(list)
    for rank, rank_trace in trace.ranks.items():
        for call in rank_trace.calls:
            if call.peer is None or call.peer not in trace.ranks:
                continue
            if call.sends:
                sends[(rank, call.peer)].append(call)
            elif call.receives:
                receives[(call.peer, rank)].append(call)
    for src, dst in sorted(set(sends) | set(receives)):
        _pair_up(f"p2p {src}->{dst}", {src: sends.get((src, dst), []),
                                        dst: receives.get((src, dst), [])}, matched, missing)
    return matched, missing


def _pair_up(name: str, calls: dict[int, list[Call]], matched: list[Matched],
             missing: list[Missing]) -> None:
    common = min(len(mine) for mine in calls.values())
    longest = max(calls.values(), key=len)
    for index in range(common):
        first = calls[min(calls)][index]
        matched.append(Matched(name, index, first.op, first.step,
                               {rank: _arrival(rank, mine[index])
                                for rank, mine in calls.items()}))
    for rank, mine in sorted(calls.items()):
        if len(mine) < len(longest):
            op = longest[len(mine)].op
            missing.append(Missing(rank, len(mine), _COUNTERPART.get(op, op), name))
