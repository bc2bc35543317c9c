"""The trace of a training job's communication (SPEC §9): one ``rank-<r>.jsonl`` per rank.

Line 1 is the header::

    {"format": "commbench-trace", "version": 1, "torch": "2.13.0", "backend": "gloo",
     "world_size": 2, "rank": 0, "host": "node1", "source": "record", "clock": "monotonic",
     "groups": {"0": {"ranks": [0, 1], "backend": "gloo", "desc": "default_pg"}}}

then one line per call, in issue order (``seq`` counts from 0 on each rank)::

    {"seq": 3, "pg": "0", "op": "allreduce", "dtype": "float32", "in_numel": 4096,
     "out_numel": 4096, "splits": null, "reduce_op": "sum", "root": null, "peer": null,
     "async": true, "t_issue_ns": 81234, "t_end_ns": 98410, "dur_ns": null, "step": 1}

``pg`` names a group of the header; ``root`` and ``peer`` are global ranks. ``t_end_ns`` is
when the call's work completed (its future's callback on gloo; null where the backend gives no
completion), ``dur_ns`` a duration the device measured (NCCL's timing events), which is the
in-situ time where present. A recorder that crashes mid-run leaves group lines
(``{"group": "3", "ranks": [...], ...}``) between its calls, since the header was written before
those groups existed; the reader folds them into the header, so a torn trace loads as far as it
got. Sizes are elements, as the dispatcher sees them: ``in_numel`` what a rank hands in,
``out_numel`` what it gets back (an allgather's gathered output, a reduce-scatter's shard).

Nothing here imports torch: traces are read by replay, estimate and import on any machine.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commbench.core.dtypes import ITEMSIZE
from commbench.core.errors import UsageError

FORMAT = "commbench-trace"
VERSION = 1
TRACE_GLOB = "rank-*.jsonl"

# commbench's op names (the measuring commands' names), which the recorder and the importers
# map torch's collectives onto.
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "gather",
       "scatter", "barrier", "send", "recv")
P2P_OPS = ("send", "recv")
ITEMSIZES = ITEMSIZE  # core.dtypes: the one table


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
        return self.op in P2P_OPS

    @property
    def sends(self) -> bool:
        return self.op == "send"

    @property
    def receives(self) -> bool:
        return self.op == "recv"

    @property
    def is_barrier(self) -> bool:
        return self.op == "barrier"

    @property
    def itemsize(self) -> int:
        return ITEMSIZES.get(self.dtype, 4)

    @property
    def size_bytes(self) -> int:
        """The size commbench's curves are indexed by (SPEC §2: the largest buffer a rank
        holds): an allgather's gathered output, a reduce-scatter's full input."""
        return max(self.in_numel, self.out_numel) * self.itemsize

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
    """One rank's file: its header and its calls in issue order."""

    header: dict
    groups: dict[str, Group]
    calls: list[Call] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return int(self.header["rank"])

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

    def calls(self, rank: int, step: int | None = None) -> list[Call]:
        calls = self.ranks[rank].calls
        return calls if step is None else [call for call in calls if call.step == step]


def header(*, torch_version: str, backend: str, world_size: int, rank: int, host: str,
           groups: dict[str, Group], source: str = "record", clock: str = "monotonic") -> dict:
    """The header line of a rank's file."""
    return {"format": FORMAT, "version": VERSION, "torch": torch_version, "backend": backend,
            "world_size": world_size, "rank": rank, "host": host, "source": source,
            "clock": clock, "groups": {name: group_json(group) for name, group in groups.items()}}


def group_json(group: Group) -> dict:
    return {"ranks": list(group.ranks), "backend": group.backend, "desc": group.desc}


def group_line(group: Group) -> dict:
    """A group first seen after the header was written (a torn trace keeps these)."""
    return {"group": group.name, **group_json(group)}


def write_rank(path: Path, head: dict, calls: list[Call]) -> None:
    """A whole rank file at once (the importers, and the recorder's tidy rewrite at exit)."""
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as out:
        out.write(json.dumps(head) + "\n")
        for call in calls:
            out.write(json.dumps(call.to_json()) + "\n")
    tmp.replace(path)


def read_rank(path: Path) -> RankTrace:
    """One rank's file; a last line cut by a crash is dropped, any other bad line is an
    error naming the file and line."""
    lines = path.read_text().splitlines()
    if not lines:
        raise TraceError(f"{path}: empty trace file")
    records = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            records.append(json.loads(text))
        except json.JSONDecodeError:
            if number == len(lines):  # torn by a crash mid-write
                break
            raise TraceError(f"{path}:{number}: not a JSON line") from None
    head = records[0]
    if head.get("format") != FORMAT:
        raise TraceError(f"{path}:1: not a commbench trace (format {head.get('format')!r})")
    if int(head.get("version", 0)) > VERSION:
        raise TraceError(f"{path}:1: trace version {head['version']} is newer than this "
                         f"commbench reads ({VERSION}); upgrade commbench")
    groups = {name: _group(name, value) for name, value in head.get("groups", {}).items()}
    calls = []
    for number, record in enumerate(records[1:], start=2):
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
    return RankTrace(header=head, groups=groups, calls=calls)


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


def check_order(trace: Trace) -> list[str]:
    """Where the members of a group disagree on the calls they made on it, in order (a
    recorder that dropped a call, a replay that would deadlock): one line per group that
    differs, empty when every group's members agree. Only ranks present in the folder are
    compared."""
    problems = []
    for name, group in sorted(trace.groups.items()):
        members = [rank for rank in group.ranks if rank in trace.ranks]
        sequences = {rank: [c.signature() for c in trace.ranks[rank].calls if c.pg == name
                            and not c.is_p2p]
                     for rank in members}
        if len({tuple(seq) for seq in sequences.values()}) <= 1:
            continue
        lengths = Counter(len(seq) for seq in sequences.values())
        first = min(members)
        for rank in members[1:]:
            mine, theirs = sequences[first], sequences[rank]
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                      min(len(mine), len(theirs)))
            if mine != theirs:
                problems.append(f"group {name}: rank {rank} differs from rank {first} at its "
                                f"call {at} (calls per rank: {dict(sorted(lengths.items()))})")
                break
    return problems
