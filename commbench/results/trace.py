"""The trace of a training job's communication (docs/reference/trace-format.md): one
``rank-<r>.jsonl`` per rank.

Line 1 is the header::

    {"format": "commbench-trace", "version": 1, "torch": "2.13.0", "backend": "gloo",
     "world_size": 2, "rank": 0, "host": "node1", "source": "record", "clock": "monotonic",
     "groups": {"0": {"ranks": [0, 1], "backend": "gloo", "desc": "default_pg"}}}

then one line per call, in issue order (``seq`` counts from 0 on each rank)::

    {"seq": 3, "pg": "0", "op": "allreduce", "dtype": "float32", "in_numel": 4096,
     "out_numel": 4096, "splits": null, "reduce_op": "sum", "root": null, "peer": null,
     "async": true, "t_issue_ns": 81234, "t_end_ns": 98410, "dur_ns": null, "step": 1}

and, where a step ended (an ``optimizer.step()`` or ``commbench.record.step()``), a step-end
line, ``{"step_end": 3, "t_ns": 99120}`` (the 3rd end; version 2). The header's
``steps_ended`` counts them at a clean exit (0 in the header a crash leaves behind: the
step-end lines count then). ``pg`` names a group of the header; ``root`` and ``peer`` are
global ranks. ``t_end_ns`` is
when the call's work completed (its future's callback on gloo; null where the backend gives no
completion), ``dur_ns`` a duration the device measured (NCCL's timing events), which is the
in-situ time where present. A recorder that crashes mid-run leaves group lines
(``{"group": "3", "ranks": [...], ...}``) between its calls, since the header was written before
those groups existed; the reader folds them into the header, so a torn trace loads as far as it
got. Sizes are elements, as the dispatcher sees them: ``in_numel`` what a rank hands in,
``out_numel`` what it gets back (an allgather's gathered output, a reduce-scatter's shard).

Which recorded steps are steps (``step_split``, the one rule replay and ``estimate --trace``
share): a step is what ends at a step end. Calls before the first end (step 0) hold the
set-up traffic (DDP's parameter broadcast, its first, not yet rebuilt buckets) and are not a
step; calls after the last end every rank reached (a Trainer's closing allgather, a step a
crash cut short) are a tail, not a step. A trace that does not say where its steps ended
counts, if it is a version 1 recording, every recorded step after the first, and if it is an
import (torch.profiler), every recorded step: those are the profiler's own steps, each ended
by ``prof.step()``.

Nothing here imports torch: traces are read by replay, estimate and import on any machine.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commbench.core.dtypes import ITEMSIZE
from commbench.core.errors import UsageError

FORMAT = "commbench-trace"
# 2: step-end lines and the header's steps_ended (version 1 traces are read as before)
VERSION = 2
STEP_END = "step_end"
TRACE_GLOB = "rank-*.jsonl"

@dataclass(frozen=True)
class TraceOp:
    """What the trace format knows of one op: the recorder, the importers and replay ask these
    traits, never the op's name. (The measuring commands' descriptors live in collectives/,
    which results/ may not import: the two are sibling layers.)"""

    name: str
    per_peer: bool = False  # its bytes go to each peer by its split sizes (an all-to-all)
    sends: bool = False  # the sending end of a point-to-point message, not a group's call
    receives: bool = False  # the receiving end
    barrier: bool = False  # moves no data
    rooted: bool = False  # one rank is its root (broadcast's and scatter's source, reduce's
    # and gather's destination): the trace's ``root`` field

    @property
    def p2p(self) -> bool:
        return self.sends or self.receives


# commbench's op names (the measuring commands' names), which the recorder and the importers
# map torch's collectives onto.
TRACE_OPS = {op.name: op for op in (
    TraceOp("allreduce"), TraceOp("allgather"), TraceOp("reduce_scatter"),
    TraceOp("broadcast", rooted=True), TraceOp("reduce", rooted=True),
    TraceOp("alltoall", per_peer=True), TraceOp("gather", rooted=True),
    TraceOp("scatter", rooted=True),
    TraceOp("barrier", barrier=True), TraceOp("send", sends=True), TraceOp("recv", receives=True))}
OPS = tuple(TRACE_OPS)
P2P_OPS = tuple(name for name, op in TRACE_OPS.items() if op.p2p)
ITEMSIZES = ITEMSIZE  # core.dtypes: the one table
_UNKNOWN = TraceOp("")


def trace_op(name: str) -> TraceOp:
    """An op's traits; an op the format does not know has none (load refuses it)."""
    return TRACE_OPS.get(name, _UNKNOWN)


def moves_per_peer(op: str) -> bool:
    """A recorded op whose bytes go to each peer by its split sizes (an all-to-all): what it
    returns and what it sends and receives come from the splits, not from one numel."""
    return trace_op(op).per_peer


class TraceError(UsageError):
    """A trace folder that cannot be read or does not hang together; the message says where."""


@dataclass(frozen=True)
class Group:
    """A process group as the trace names it, with its members as global ranks."""

    name: str
    ranks: tuple[int, ...]
    backend: str = ""
    desc: str = ""


@dataclass
class Call:
    """One collective or p2p call as one rank issued it."""

    seq: int
    pg: str
    op: str
    dtype: str
    in_numel: int
    out_numel: int
    step: int = 0
    splits: dict | None = None
    reduce_op: str | None = None
    root: int | None = None
    peer: int | None = None
    is_async: bool = False
    t_issue_ns: int | None = None
    t_end_ns: int | None = None
    dur_ns: int | None = None

    # What a call's op means, said once here: the trace names torch's calls, and send/recv
    # are the two ends of one message rather than a group's collective.
    @property
    def is_p2p(self) -> bool:
        return trace_op(self.op).p2p

    @property
    def sends(self) -> bool:
        return trace_op(self.op).sends

    @property
    def receives(self) -> bool:
        return trace_op(self.op).receives

    @property
    def is_barrier(self) -> bool:
        return trace_op(self.op).barrier

    @property
    def is_alltoall(self) -> bool:
        """An all-to-all: what it moves is per peer, by its split sizes."""
        return moves_per_peer(self.op)

    @property
    def itemsize(self) -> int:
        return ITEMSIZES.get(self.dtype, 4)

    @property
    def size_bytes(self) -> int:
        """The size commbench's curves are indexed by (the largest buffer a rank holds,
        docs/reference/metrics-and-formulas.md#sizes): an allgather's gathered output, a
        reduce-scatter's full input."""
        return max(self.in_numel, self.out_numel) * self.itemsize

    @property
    def row_numel(self) -> int:
        """Elements per row of an all-to-all's split sizes, which count rows of dim 0 (a
        token's hidden vector in MoE code): from the side that moves something, 1 where
        neither does."""
        for side, numel in (("in", self.in_numel), ("out", self.out_numel)):
            rows = sum((self.splits or {}).get(side) or [])
            if rows > 0:
                return max(1, numel // rows)
        return 1

    def peer_bytes(self, group_size: int) -> dict[str, list[int]] | None:
        """An all-to-all's bytes to and from each member of its group, in group order: ``in``
        what this rank sends each, ``out`` what it receives from each. From the recorded split
        sizes (rows of ``row_numel`` elements); a side recorded without them is torch's even
        split. None for other ops."""
        if not self.is_alltoall or group_size < 1:
            return None
        splits, row = self.splits or {}, self.row_numel * self.itemsize
        out = {}
        for side, numel in (("in", self.in_numel), ("out", self.out_numel)):
            given = splits.get(side) or []
            out[side] = ([int(rows) * row for rows in given] if given else
                         [numel * self.itemsize // group_size] * group_size)
        return out

    @property
    def in_situ_s(self) -> float | None:
        """How long the call took where it was recorded: the device's own timing where the
        backend gave one, else issue to completion; None where neither is known."""
        if self.dur_ns is not None:
            return self.dur_ns / 1e9
        if self.t_issue_ns is not None and self.t_end_ns is not None:
            return max(0, self.t_end_ns - self.t_issue_ns) / 1e9
        return None

    def signature(self) -> tuple:
        """What every member of the group must agree on for the call to match up. An uneven
        all-to-all (``splits``) gives each rank its own buffer sizes: its members agree on the
        number of splits, not on the bytes. A gather's output exists on its root only and a
        scatter's input likewise, so they agree on the per-rank piece."""
        if self.splits:
            size = len(self.splits.get("in") or [])
        else:
            agreed = {"gather": self.in_numel, "scatter": self.out_numel}
            size = agreed.get(self.op, max(self.in_numel, self.out_numel)) * self.itemsize
        return (self.pg, self.op, self.dtype, size, self.reduce_op, self.root)

    def to_json(self) -> dict:
        record = asdict(self)
        record["async"] = record.pop("is_async")
        return record

    @classmethod
    def from_json(cls, record: dict) -> Call:
        known = {key: record[key] for key in cls.__dataclass_fields__ if key in record}
        known["is_async"] = bool(record.get("async", False))
        return cls(**known)


@dataclass
class RankTrace:
    """One rank's file: its header, its calls in issue order, how many steps it saw end
    (None: the trace does not say) and, for a file a crash cut mid-line, that line's
    number."""

    header: dict
    groups: dict[str, Group]
    calls: list[Call] = field(default_factory=list)
    ended: int | None = None
    torn_line: int | None = None
    path: Path | None = None

    @property
    def rank(self) -> int:
        return int(self.header["rank"])

    @property
    def complete(self) -> int | None:
        """Steps 0 .. complete-1 are whole on this rank. A torn line may have been a call of
        the last step read (or a later one), so that step is not known whole."""
        if self.torn_line is None:
            return self.ended
        last = max((call.step for call in self.calls), default=0)
        return last if self.ended is None else min(self.ended, last)

    def torn_note(self) -> str | None:
        if self.torn_line is None:
            return None
        name = self.path.name if self.path else f"rank-{self.rank}.jsonl"
        return (f"{name}:{self.torn_line}: the last line was cut short (a crash mid-write) "
                f"and is left out; rank {self.rank}'s recording is whole up to step "
                f"{(self.complete or 0) - 1}" if self.complete else
                f"{name}:{self.torn_line}: the last line was cut short (a crash mid-write) "
                "and is left out")

    def steps(self) -> list[int]:
        return sorted({call.step for call in self.calls})


@dataclass
class Trace:
    """A trace folder: every rank's calls, the groups they used."""

    path: Path
    ranks: dict[int, RankTrace]

    @property
    def world_size(self) -> int:
        return int(self.header["world_size"])

    @property
    def header(self) -> dict:
        return self.ranks[min(self.ranks)].header

    @property
    def groups(self) -> dict[str, Group]:
        merged: dict[str, Group] = {}
        for rank in sorted(self.ranks):
            merged.update(self.ranks[rank].groups)
        return merged

    def steps(self) -> list[int]:
        return sorted({step for rank in self.ranks.values() for step in rank.steps()})

    @property
    def notes(self) -> list[str]:
        """What the reader left out (lines torn by a crash), one line each."""
        return [note for rank in sorted(self.ranks)
                if (note := self.ranks[rank].torn_note()) is not None]

    def calls(self, rank: int, step: int | None = None) -> list[Call]:
        calls = self.ranks[rank].calls
        return calls if step is None else [call for call in calls if call.step == step]


def header(*, torch_version: str, backend: str, world_size: int, rank: int, host: str,
           groups: dict[str, Group], source: str = "record", clock: str = "monotonic",
           steps_ended: int | None = None) -> dict:
    """The header line of a rank's file; ``steps_ended`` where the writer knows where steps
    ended (the recorder), absent where it does not (an import)."""
    head = {"format": FORMAT, "version": VERSION, "torch": torch_version, "backend": backend,
            "world_size": world_size, "rank": rank, "host": host, "source": source,
            "clock": clock, "groups": {name: group_json(group) for name, group in groups.items()}}
    if steps_ended is not None:
        head["steps_ended"] = int(steps_ended)
    return head


def step_end_line(ended: int, t_ns: int | None) -> dict:
    """The ``ended``-th step end (1 for the first), written as it happens."""
    return {STEP_END: int(ended), "t_ns": t_ns}


def group_json(group: Group) -> dict:
    return {"ranks": list(group.ranks), "backend": group.backend, "desc": group.desc}


def group_line(group: Group) -> dict:
    """A group first seen after the header was written (a torn trace keeps these)."""
    return {"group": group.name, **group_json(group)}


def write_rank(path: Path, head: dict, calls: list[Call],
               step_ends: list[int | None] | None = None) -> None:
    """A whole rank file at once (the importers, and the recorder's tidy rewrite at exit);
    ``step_ends`` (the recorder's: each end's time) go before the first call of the step
    they open."""
    tmp = path.with_suffix(".jsonl.tmp")
    ends = list(enumerate(step_ends or [], start=1))
    with tmp.open("w") as out:
        out.write(json.dumps(head) + "\n")
        for call in calls:
            while ends and ends[0][0] <= call.step:
                out.write(json.dumps(step_end_line(*ends.pop(0))) + "\n")
            out.write(json.dumps(call.to_json()) + "\n")
        for ended, t_ns in ends:
            out.write(json.dumps(step_end_line(ended, t_ns)) + "\n")
    tmp.replace(path)


def read_rank(path: Path) -> RankTrace:
    """One rank's file; a last line cut by a crash is left out (and said: ``torn_line``,
    ``Trace.notes``), any other bad line is an error naming the file and line."""
    lines = path.read_text().splitlines()
    if not lines:
        raise TraceError(f"{path}: empty trace file")
    records, torn = [], None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            records.append(json.loads(text))
        except json.JSONDecodeError:
            if number == len(lines):  # torn by a crash mid-write
                torn = number
                break
            raise TraceError(f"{path}:{number}: not a JSON line") from None
    if not records:
        raise TraceError(f"{path}:1: the header line is cut short (the recording crashed "
                         "before its first line was written): not a usable trace")
    head = records[0]
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        head = head if isinstance(head, dict) else {}
        raise TraceError(f"{path}:1: not a commbench trace (format {head.get('format')!r})")
    if int(head.get("version", 0)) > VERSION:
        raise TraceError(f"{path}:1: trace version {head['version']} is newer than this "
                         f"commbench reads ({VERSION}); upgrade commbench")
    groups = {name: _group(name, value) for name, value in head.get("groups", {}).items()}
    calls = []
    ended = int(head["steps_ended"]) if "steps_ended" in head else None
    for number, record in enumerate(records[1:], start=2):
        if STEP_END in record:
            ended = max(ended or 0, int(record[STEP_END]))
            continue
        if "group" in record:
            groups[str(record["group"])] = _group(str(record["group"]), record)
            continue
        try:
            call = Call.from_json(record)
        except TypeError as error:
            raise TraceError(f"{path}:{number}: not a call ({error})") from None
        if call.op not in OPS:
            raise TraceError(f"{path}:{number}: unknown op {call.op!r}")
        calls.append(call)
    calls.sort(key=lambda call: call.seq)
    for call in calls:
        if call.pg not in groups:
            raise TraceError(f"{path}: call {call.seq} uses group {call.pg!r}, which the trace "
                             "never declares")
    return RankTrace(header=head, groups=groups, calls=calls, ended=ended, torn_line=torn,
                     path=path)


def _group(name: str, record: dict) -> Group:
    return Group(name=name, ranks=tuple(int(r) for r in record["ranks"]),
                 backend=str(record.get("backend", "")), desc=str(record.get("desc", "")))


def load(path: str | Path) -> Trace:
    """A trace folder: every ``rank-<r>.jsonl``, checked to come from one job."""
    folder = Path(path)
    if not folder.is_dir():
        raise TraceError(f"{folder}: no such trace folder")
    files = sorted(folder.glob(TRACE_GLOB))
    if not files:
        raise TraceError(f"{folder}: no rank-<r>.jsonl files (record one with "
                         "`commbench record --out DIR -- CMD`)")
    ranks = {}
    for file in files:
        rank_trace = read_rank(file)
        ranks[rank_trace.rank] = rank_trace
    sizes = {int(r.header["world_size"]) for r in ranks.values()}
    if len(sizes) != 1:
        raise TraceError(f"{folder}: the rank files disagree on the world size ({sorted(sizes)})")
    return Trace(path=folder, ranks=ranks)


@dataclass(frozen=True)
class StepSplit:
    """Which recorded steps are steps (the module docstring): ``steps`` count (replayed,
    priced, averaged over); ``setup`` (step 0) and the ``tail`` (steps from ``ended`` on:
    after the last end every rank reached) do not. ``tail_calls``: the most calls a rank
    made in the tail. ``fallback``: no step ended after set-up, so the whole recording
    (step 0) stands in for a step, said in ``left_out``."""

    steps: tuple[int, ...]
    setup: int | None = None
    tail: tuple[int, ...] = ()
    tail_calls: int = 0
    ended: int | None = None
    torn: tuple[str, ...] = ()  # the files a crash cut short
    fallback: str = ""

    def left_out(self) -> str:
        """What is not a step, in words ('' when nothing is left out)."""
        parts = []
        if self.setup is not None:
            parts.append(f"step {self.setup} (set-up: before the first step ended)")
        if self.tail_calls:
            where = (f"cut short by a crash in {', '.join(self.torn)}" if self.torn else
                     f"after the last of {self.ended} step ends")
            parts.append(f"a tail of {self.tail_calls} call{'s' * (self.tail_calls != 1)} "
                         f"({where})")
        return " and ".join(parts)


def step_split(trace: Trace) -> StepSplit:
    """The one rule deciding which recorded steps count (the module docstring), shared by
    replay and ``estimate --trace``."""
    recorded = trace.steps()
    known = [r.complete for r in trace.ranks.values() if r.complete is not None]
    torn = tuple(r.path.name if r.path else f"rank-{r.rank}.jsonl"
                 for _, r in sorted(trace.ranks.items()) if r.torn_line is not None)
    if not known and trace.header.get("source", "record") != "record":
        # an import: its steps are the profiler's own (prof.step() ends each), all whole
        return StepSplit(tuple(recorded))
    if not known:  # a version 1 recording: every step after the first
        steps = tuple(recorded[1:])
        if steps:
            return StepSplit(steps, setup=recorded[0])
        return StepSplit(tuple(recorded), fallback="the trace has one step only: it is "
                         "used as it is, set-up traffic included" if recorded else "")
    ended = min(known)
    tail = tuple(s for s in recorded if s >= ended)
    tail_calls = max(sum(1 for c in r.calls if c.step >= ended) for r in trace.ranks.values())
    steps = tuple(range(1, ended))
    if steps:
        return StepSplit(steps, 0, tail, tail_calls, ended, torn)
    # No step after set-up: step 0 (set-up and the first step together) stands in.
    why = ("no step ended in the recording (no optimizer.step() or "
           "commbench.record.step())" if ended == 0 else "the recording ended one step only")
    after = max(ended, 1)
    rest = tuple(s for s in recorded if s >= after)
    rest_calls = max(sum(1 for c in r.calls if c.step >= after) for r in trace.ranks.values())
    return StepSplit((0,) if recorded else (), None, rest, rest_calls, ended, torn,
                     fallback=f"{why}: step 0 is used as the step, set-up traffic included")


def _described(call: Call) -> str:
    return f"call {call.seq} (step {call.step}: {call.op} {call.dtype} {call.size_bytes} B)"


def check_order(trace: Trace) -> list[str]:
    """Where the members of a group disagree on the calls they made on it, in order (a
    recorder that dropped a call, a replay that would deadlock): one line per group that
    differs, empty when every group's members agree. Calls are named by their ``seq``, the
    number in the rank's file, so every command names the same call alike. Only ranks present
    in the folder are compared."""
    problems = []
    for name, group in sorted(trace.groups.items()):
        members = [rank for rank in group.ranks if rank in trace.ranks]
        sequences = {rank: [c for c in trace.ranks[rank].calls if c.pg == name
                            and not c.is_p2p]
                     for rank in members}
        signatures = {rank: [c.signature() for c in calls] for rank, calls in sequences.items()}
        if len({tuple(seq) for seq in signatures.values()}) <= 1:
            continue
        first = min(members)
        for rank in members[1:]:
            mine, theirs = signatures[first], signatures[rank]
            if mine == theirs:
                continue
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                      min(len(mine), len(theirs)))
            if at < len(mine) and at < len(theirs):
                problems.append(f"group {name}: rank {rank}'s "
                                f"{_described(sequences[rank][at])} is not rank {first}'s "
                                f"{_described(sequences[first][at])}")
            else:
                longer, shorter = (first, rank) if len(mine) > len(theirs) else (rank, first)
                extra = sequences[longer][at]
                problems.append(f"group {name}: rank {longer}'s {_described(extra)} has no "
                                f"match on rank {shorter}, which makes {at} call(s) on the "
                                f"group to rank {longer}'s {len(sequences[longer])}")
            break
    return problems
