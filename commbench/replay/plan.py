"""What a replay runs and what it reports (docs/commands/replay.md), as pure functions over a trace.

The plan
    ``select_steps``: which recorded steps are replayed, in order. By default the trace's
    steps (``results.trace.step_split``, the rule ``estimate --trace`` shares: not step 0's
    set-up traffic, not the tail after the last step end), in whole passes until at least
    ``DEFAULT_STEPS`` steps are replayed. ``--steps K`` replays K steps, cycling over those;
    ``--steps 2-4,7`` replays the named recorded steps once each (set-up and tail included
    when named); ``all`` every recorded step once.
    ``gaps``: with ``--gaps recorded``, a call waits for the compute time the recording saw
    before it: its issue minus its predecessor's end within the step, where the end of an
    asynchronous predecessor is its issue (the host had control back at once); the first call
    of a step waits for the compute since the previous recorded step's last completion (its
    latest end, or issue where no end is known: the step's boundary waits for all of it, as
    DDP's does before the optimizer), which is where a straggler's slow forward shows; a step
    with no recorded step before it waits for nothing. Negative gaps (overlapping calls) are 0.
    ``isolated_plan``: the default model is a quick sweep of this launch at the trace's own
    sizes: every distinct call (same group, op, dtype, sizes, root, reduction; a p2p message
    by its two ends) is timed alone, back to back, after the replay. Every rank reads the
    same plan from the trace, so they time the same calls in the same order.

The figures from what the ranks measured: replay.figures.

Data in, data out: nothing here imports torch or prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from commbench.core.errors import UsageError
from commbench.results.trace import Call, RankTrace, StepSplit, Trace, check_order

GAPS = ("none", "recorded", "compute")  # compute: the gaps filled with matmuls (replay.rank)
# A short trace is replayed in whole passes until this many steps are timed: one step of a
# busy machine can read 5x another (seen on the 2-core VM), and in situ is averaged alike.
DEFAULT_STEPS = 10


@dataclass(frozen=True)
class Item:
    """One distinct call timed alone: the group, and each member's call (rank, seq)."""

    group: str
    op: str
    calls: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ReplayPlan:
    """What every rank runs: the recorded steps in replay order, the waits before calls
    (rank -> seq -> seconds; empty without --gaps recorded) and the calls to time alone."""

    steps: tuple[int, ...]
    gaps: dict[int, dict[int, float]] = field(default_factory=dict)
    isolated: tuple[Item, ...] = ()


def select_steps(split: StepSplit, recorded: list[int], text: str | None) -> list[int]:
    """The recorded steps to replay, in order (the module docstring); ``split`` says which
    recorded steps are steps, ``recorded`` every step the trace holds calls of."""
    if not recorded and not split.steps:
        raise UsageError("the trace holds no calls to replay")
    later = list(split.steps) or list(recorded)
    available = sorted(set(recorded) | set(split.steps))
    if text is None or text.strip().lower() in ("", "default"):
        passes = -(-DEFAULT_STEPS // len(later))  # whole passes, at least DEFAULT_STEPS
        return later * passes
    value = text.strip().lower()
    if value == "all":
        return list(available)
    if value.isdigit():
        count = int(value)
        if count < 1:
            raise UsageError(f"bad --steps {text!r}: at least 1 step")
        return [later[i % len(later)] for i in range(count)]
    chosen: list[int] = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise UsageError(f"bad --steps {text!r}: a count (5), recorded steps (1-3,7) or "
                             "all") from None
        missing = [s for s in range(first, last + 1) if s not in available]
        if missing or last < first:
            raise UsageError(f"bad --steps {text!r}: the trace has steps "
                             f"{_ranges(available)}, not {_ranges(missing) or part}")
        chosen += list(range(first, last + 1))
    if not chosen:
        raise UsageError(f"bad --steps {text!r}: no step named")
    return chosen


def _ranges(values: list[int]) -> str:
    values = sorted(set(values))
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def check_trace(trace: Trace, launched: int, steps: list[int] | None = None) -> None:
    """Refuse what cannot be replayed: missing rank files, ranks that disagree on a group's
    calls in the steps to replay (the replay would deadlock; a recording cut short by a
    crash disagrees in its last step only, and the others can still be replayed), more
    ranks than the launch has."""
    world = trace.world_size
    missing = sorted(set(range(world)) - set(trace.ranks))
    if missing:
        raise UsageError(f"{trace.path}: the trace has no file for rank(s) "
                         f"{_ranges(missing)} of its {world}: every rank's calls are needed")
    if world > launched:
        raise UsageError(f"{trace.path}: the trace needs {world} ranks and this launch has "
                         f"{launched}")
    wanted = sorted(set(trace.steps() if steps is None else steps))
    problems = check_order(only_steps(trace, set(wanted)))
    if problems:
        bad = [s for s in wanted if check_order(only_steps(trace, {s}))]
        torn = trace.notes
        if torn:  # not the ranks' doing: a crash cut a file short
            raise UsageError(f"{trace.path}: step(s) {_ranges(bad) or _ranges(wanted)} are "
                             f"not whole on every rank, a crash cut the recording short "
                             f"({torn[0]}): leave them out of --steps")
        hint = (f" (in step(s) {_ranges(bad)}: --steps can leave them out)"
                if bad and len(bad) < len(wanted) else "")
        raise UsageError(f"{trace.path}: the ranks disagree on their calls, a replay would "
                         f"deadlock: {problems[0]}{hint}")


def only_steps(trace: Trace, steps: set[int]) -> Trace:
    """The trace with only the calls of ``steps``."""
    return Trace(trace.path, {rank: RankTrace(r.header, r.groups,
                                              [c for c in r.calls if c.step in steps])
                              for rank, r in trace.ranks.items()})


def gaps(calls: list[Call], before: list[Call] | None = None) -> dict[int, float]:
    """seq -> seconds to wait before the call (``--gaps recorded``, the module docstring);
    ``before``: the previous recorded step's calls of the rank, whose last completion the
    step's first call waits from."""
    out: dict[int, float] = {}
    previous: Call | None = None
    ends = [c.t_end_ns if c.t_end_ns is not None else c.t_issue_ns for c in before or []]
    last_end = max((end for end in ends if end is not None), default=None)
    for call in calls:
        wait = 0.0
        if call.t_issue_ns is not None:
            if previous is None:
                end = last_end
            else:
                end = previous.t_issue_ns if previous.is_async else previous.t_end_ns
            if end is not None:
                wait = max(0, call.t_issue_ns - end) / 1e9
        out[call.seq] = wait
        previous = call
    return out


def local_key(call: Call) -> tuple:
    """What makes two calls of one rank the same call to time (and one buffer to share)."""
    splits = json.dumps(call.splits, sort_keys=True) if call.splits else ""
    return (call.pg, call.op, call.dtype, call.in_numel, call.out_numel, call.reduce_op,
            call.root, call.peer, splits)


def isolated_plan(trace: Trace, steps: list[int]) -> tuple[Item, ...]:
    """The distinct calls of the replayed steps, in one order every rank computes alike."""
    wanted = set(steps)
    items: list[Item] = []
    for name, group in sorted(trace.groups.items(), key=lambda kv: (kv[1].ranks, kv[0])):
        members = [r for r in group.ranks if r in trace.ranks]
        if not members:
            continue
        sequences = {r: [c for c in trace.calls(r) if c.pg == name and c.step in wanted
                         and not c.is_p2p] for r in members}
        seen: set[tuple] = set()
        for index, call in enumerate(sequences[members[0]]):
            key = local_key(call)
            if key in seen:
                continue
            seen.add(key)
            calls = tuple((r, sequences[r][index].seq) for r in members
                          if index < len(sequences[r]))
            items.append(Item(name, call.op, calls))
    items += _p2p_items(trace, wanted)
    return tuple(items)


def _p2p_items(trace: Trace, wanted: set[int]) -> list[Item]:
    """A message by its two ends: the k-th send from a to b meets the k-th recv of b from a."""
    sends: dict[tuple, list[Call]] = {}
    recvs: dict[tuple, list[Call]] = {}
    for rank in sorted(trace.ranks):
        for call in trace.calls(rank):
            if call.step not in wanted or call.peer is None:
                continue
            if call.sends:
                sends.setdefault((call.pg, rank, call.peer), []).append(call)
            elif call.receives:
                recvs.setdefault((call.pg, call.peer, rank), []).append(call)
    items, seen = [], set()
    for (pg, src, dst), sent in sorted(sends.items()):
        received = recvs.get((pg, src, dst), [])
        for send, recv in zip(sent, received, strict=False):
            key = (pg, src, dst, send.dtype, send.size_bytes)
            if key not in seen:
                seen.add(key)
                items.append(Item(pg, "p2p", ((src, send.seq), (dst, recv.seq))))
    return items


def make_plan(trace: Trace, steps: list[int], gap_mode: str, isolated: bool) -> ReplayPlan:
    if gap_mode not in GAPS:
        raise UsageError(f"bad --gaps {gap_mode!r}: none, recorded or compute")
    waits: dict[int, dict[int, float]] = {}
    if gap_mode in ("recorded", "compute"):
        for rank in trace.ranks:
            waits[rank] = {}
            recorded = sorted({call.step for call in trace.calls(rank)})
            for step in set(steps):
                earlier = [s for s in recorded if s < step]
                before = trace.calls(rank, earlier[-1]) if earlier else None
                waits[rank].update(gaps(trace.calls(rank, step), before))
        if not any(any(v > 0 for v in w.values()) for w in waits.values()):
            raise UsageError(f"{trace.path}: --gaps {gap_mode} needs issue and end times, and "
                             "the trace has none")
    return ReplayPlan(tuple(steps), waits, isolated_plan(trace, steps) if isolated else ())


# (rank, call) -> (seconds or None, where the price came from): replay.price
Price = Callable[[int, Call], "tuple[float | None, str]"]


def calls_by_seq(trace: Trace, rank: int) -> dict[int, Call]:
    return {call.seq: call for call in trace.calls(rank)}
