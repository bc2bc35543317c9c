"""torch.profiler traces in, commbench traces out (SPEC §9): the chrome-trace JSON that
``torch.profiler.profile(...).export_chrome_trace(path)`` writes, one file per rank, becomes
``rank-<r>.jsonl`` in the trace format of ``commbench.trace.format``, so ``replay`` and
``estimate --trace`` read a profiled job as they read a recorded one.

Where the calls come from, in order of preference:

- ``record_param_comms`` CPU events (ProcessGroupNCCL emits one per call): "Collective name",
  "In msg nelems" / "Out msg nelems" (what a rank hands in and gets back, as the trace format
  counts them), "dtype" (c10's ScalarType name), "Process Group Name" / "Process Group Ranks"
  (or "Global rank start" / "stride" / "Group size" where the ranks list is cut with "..."),
  "In split size" / "Out split size", "Is asynchronized op", "Src Rank" / "Dst Rank" for p2p
  (group ranks). The GPU kernels (``ncclDevKernel_*``, ``ncclKernel_*``) carry the External id
  of the record_param_comms event that launched them (Kineto links them); their durations are
  the in-situ time (``dur_ns``), their end the completion (``t_end_ns``). A kernel whose id
  matches nothing is matched by its own copy of the metadata (group name and "Seq").
- Where a trace has none (gloo in torch 2.13 emits none), the dispatcher's ``c10d::`` CPU ops,
  read from their recorded shapes (``record_shapes=True``). They do not say which process group
  a call used: every call is put on the default group, and a note says so when the job had
  others. The work's ``gloo:<op>`` annotation on gloo's worker thread gives the completion
  time and the dtype of tensor lists.

Steps are the profiler's own (``ProfilerStep#N``, from ``prof.step()`` under a schedule): a
call belongs to the last step begun before it; a trace without steps is step 0. Timestamps are
the profiler's timeline in ns (``clock: torch.profiler``). Roots of broadcast and reduce are not
in record_param_comms: they are left empty there (the gloo path reads them).

Pure: JSON in, header dicts and calls out; nothing here writes, prints or imports torch.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from commbench.analysis.importers.common import ImportFormatError, fail
from commbench.trace.format import ITEMSIZES, Call, Group, header

SOURCE = "torch.profiler"
CLOCK = "torch.profiler"
PARAM_COMMS = "record_param_comms"

# record_param_comms "Collective name" -> commbench's op. Names that are not a call of their
# own (a wait, the bracket of a coalesced group) are dropped without a note.
COLLECTIVES = {
    "allreduce": "allreduce", "allreduce_coalesced": "allreduce",
    "allgather": "allgather", "_allgather_base": "allgather",
    "allgather_coalesced": "allgather", "allgather_into_tensor_coalesced": "allgather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast", "_broadcast_oop": "broadcast",
    "reduce": "reduce", "_reduce_oop": "reduce",
    "gather": "gather", "scatter": "scatter",
    "all_to_all": "alltoall", "all_to_allv": "alltoall", "alltoall": "alltoall",
    "alltoall_base": "alltoall",
    "barrier": "barrier", "send": "send", "recv": "recv",
}
NOT_CALLS = frozenset({"wait", "coalesced", "startCoalescing", "endCoalescing"})


@dataclass(frozen=True)
class DispatcherOp:
    """A ``c10d::`` op as the profiler records it: which recorded argument (by position, the
    schema's order) a rank hands in and which it gets back, where the root or peer is."""

    op: str
    inputs: int | None
    outputs: int | None
    root: int | None = None  # index in "Concrete Inputs" (a group rank)
    peer: int | None = None


DISPATCHER = {
    "c10d::allreduce_": DispatcherOp("allreduce", 0, 0),
    "c10d::allreduce_coalesced_": DispatcherOp("allreduce", 0, 0),
    "c10d::_allgather_base_": DispatcherOp("allgather", 1, 0),
    "c10d::allgather_": DispatcherOp("allgather", 1, 0),
    "c10d::allgather_into_tensor_coalesced_": DispatcherOp("allgather", 1, 0),
    "c10d::_reduce_scatter_base_": DispatcherOp("reduce_scatter", 1, 0),
    "c10d::reduce_scatter_": DispatcherOp("reduce_scatter", 1, 0),
    "c10d::reduce_scatter_tensor_coalesced_": DispatcherOp("reduce_scatter", 1, 0),
    "c10d::broadcast_": DispatcherOp("broadcast", 0, 0, root=2),
    "c10d::reduce_": DispatcherOp("reduce", 0, 0, root=2),
    "c10d::gather_": DispatcherOp("gather", 1, 0, root=3),
    "c10d::scatter_": DispatcherOp("scatter", 1, 0, root=3),
    "c10d::alltoall_base_": DispatcherOp("alltoall", 1, 0),
    "c10d::alltoall_": DispatcherOp("alltoall", 1, 0),
    "c10d::barrier": DispatcherOp("barrier", None, None),
    "c10d::monitored_barrier_": DispatcherOp("barrier", None, None),
    "c10d::send": DispatcherOp("send", 0, 0, peer=2),
    "c10d::recv_": DispatcherOp("recv", 0, 0, peer=2),
}

# c10 ScalarType names (record_param_comms "dtype") and C++ type names (recorded shapes'
# "Input type") -> torch's dtype names, as the trace format spells them.
DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
    "Int": "int32", "Long": "int64", "Short": "int16", "Char": "int8", "Byte": "uint8",
    "Bool": "bool", "ComplexFloat": "complex64", "Float8_e4m3fn": "float8_e4m3",
    "Float8_e5m2": "float8_e5m2",
    "float": "float32", "double": "float64", "c10::Half": "float16",
    "c10::BFloat16": "bfloat16", "int": "int32", "long int": "int64", "long": "int64",
    "short int": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::Float8_e4m3fn": "float8_e4m3",
    "c10::Float8_e5m2": "float8_e5m2",
}
_STEP = re.compile(r"ProfilerStep#(\d+)")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass
class ProfiledRank:
    """One rank's file, converted: the trace header, its calls in issue order, notes."""

    path: str
    rank: int
    header: dict
    calls: list[Call]
    notes: list[str] = field(default_factory=list)


@dataclass
class _Event:
    index: int  # position in traceEvents, for messages
    name: str
    ts_us: float
    dur_us: float
    tid: object
    args: dict

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


def trace_files(path: str | Path) -> list[Path]:
    """FILE, or every ``*.json`` / ``*.json.gz`` in a folder (the profiler's tensorboard handler
    writes ``<worker>.<time>.pt.trace.json``)."""
    where = Path(path)
    if where.is_dir():
        files = sorted(p for p in where.iterdir()
                       if p.is_file() and p.name.endswith((".json", ".json.gz")))
        if not files:
            raise ImportFormatError(f"{where}: no *.json or *.json.gz profiler traces in it")
        return files
    if not where.exists():
        raise ImportFormatError(f"{where}: no such file or folder")
    return [where]


def read_document(path: Path) -> dict:
    """The JSON object of one trace file; what is not one is an error naming the file."""
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise fail(str(path), None, f"cannot read it ({error})") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise fail(str(path), error.lineno, f"not JSON ({error.msg}; a trace cut short?)") \
            from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise fail(str(path), None, "not a torch.profiler trace (no traceEvents list; write "
                   "one with prof.export_chrome_trace(path))")
    return document


def parse(document: dict, source: str, rank_hint: int | None = None) -> ProfiledRank:
    """One rank's trace document -> its header and calls. ``rank_hint`` (from the file name)
    is used where the trace does not say which rank wrote it."""
    info = document.get("distributedInfo") or {}
    events = _events(document["traceEvents"], source)
    rank = _rank(info, rank_hint, source)
    notes: list[str] = []
    groups = _declared_groups(info)
    comms = [e for e in events if e.name == PARAM_COMMS]
    if comms:
        calls = _from_param_comms(comms, groups, info, source, notes)
        _attach_kernels(calls, comms, events, source, notes)
    else:
        calls = _from_dispatcher(events, groups, info, source, notes)
    _assign_steps(calls, events)
    world_size = _world_size(info, groups, source)
    head = header(torch_version=str(document.get("torch_version", "")),
                  backend=str(info.get("backend", "")), world_size=world_size, rank=rank,
                  host=str(document.get("host_name", "")), groups=groups, source=SOURCE,
                  clock=CLOCK)
    return ProfiledRank(path=source, rank=rank, header=head, calls=calls, notes=notes)


def read(path: str | Path) -> list[ProfiledRank]:
    """Every rank file under ``path``, all parsed before anything is written: one rank per
    file, one world size, at least one call somewhere."""
    ranks: dict[int, ProfiledRank] = {}
    for file in trace_files(path):
        match = _RANK_IN_NAME.search(file.name)
        profiled = parse(read_document(file), str(file),
                         rank_hint=int(match.group(1)) if match else None)
        if profiled.rank in ranks:
            raise ImportFormatError(f"{file}: rank {profiled.rank} again (also "
                                    f"{ranks[profiled.rank].path}): one file per rank")
        ranks[profiled.rank] = profiled
    sizes = {r.header["world_size"] for r in ranks.values()}
    if len(sizes) > 1:
        raise ImportFormatError(f"{path}: the files disagree on the world size "
                                f"({sorted(sizes)}): they are not from one job")
    if not any(r.calls for r in ranks.values()):
        raise ImportFormatError(f"{path}: no collective calls in the trace (no "
                                f"{PARAM_COMMS} or c10d:: events; profile with "
                                "ProfilerActivity.CPU and, on gloo, record_shapes=True)")
    return [ranks[r] for r in sorted(ranks)]


# -- events --------------------------------------------------------------------------------

def _events(raw: list, source: str) -> list[_Event]:
    events = []
    for index, event in enumerate(raw):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        try:
            ts, dur = float(event["ts"]), float(event.get("dur", 0))
        except (KeyError, TypeError, ValueError):
            raise fail(source, None, f"event {index} ({event.get('name')!r}): no numeric ts "
                       "and dur") from None
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        events.append(_Event(index, str(event.get("name", "")), ts, dur,
                             event.get("tid"), args))
    events.sort(key=lambda e: (e.ts_us, e.index))
    return events


def _ns(us: float) -> int:
    return round(us * 1000)


def _where(event: _Event) -> str:
    return f"event {event.index} ({event.name} at ts {event.ts_us:.3f})"


def _int_arg(event: _Event, key: str, source: str) -> int:
    value = event.args.get(key)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise fail(source, None, f"{_where(event)}: {key!r} is {value!r}, not a whole "
                   "number") from None


def _dtype(name: object, event: _Event, source: str) -> str:
    dtype = DTYPES.get(str(name))
    if dtype is None or dtype not in ITEMSIZES:
        raise fail(source, None, f"{_where(event)}: dtype {name!r} is not one commbench knows")
    return dtype


def _int_list(value: object) -> list[int] | None:
    """[1, 2], "[1, 2]", "" -> list; a list cut with '...' (long groups) -> None."""
    if value is None:
        return []
    if isinstance(value, list):
        items = value
    else:
        text = str(value).strip().strip("[]")
        if "..." in text:
            return None
        items = [item for item in text.split(",") if item.strip()]
    try:
        return [int(item) for item in items]
    except (TypeError, ValueError):
        return None


# -- the job: rank, world, groups ------------------------------------------------------------

def _rank(info: dict, hint: int | None, source: str) -> int:
    if "rank" in info:
        return int(info["rank"])
    if hint is not None:
        return hint
    raise fail(source, None, "the trace does not say which rank wrote it (no distributedInfo; "
               "name the file rank<r>.json)")


def _declared_groups(info: dict) -> dict[str, Group]:
    """The groups the profiler listed (``distributedInfo.pg_config``): every group the job
    created, in creation order, which is the order replay rebuilds them in."""
    groups = {}
    for config in info.get("pg_config") or []:
        ranks = _int_list(config.get("ranks"))
        if not ranks:
            continue
        name = str(config.get("pg_name"))
        backend = str(config.get("backend_config", "")).split(",")[0].split(":")[-1]
        groups[name] = Group(name=name, ranks=tuple(ranks), backend=backend or
                             str(info.get("backend", "")), desc=str(config.get("pg_desc", "")))
    return groups


def _world_size(info: dict, groups: dict[str, Group], source: str) -> int:
    if "world_size" in info:
        return int(info["world_size"])
    if groups:
        return max(max(g.ranks) for g in groups.values()) + 1
    raise fail(source, None, "the trace does not give the world size (no distributedInfo)")


def _group_of(event: _Event, groups: dict[str, Group], info: dict, source: str) -> str:
    """The call's group, added to ``groups`` when the header did not list it."""
    args = event.args
    name = str(args.get("Process Group Name", "0"))
    if name in groups:
        return name
    ranks = _int_list(args.get("Process Group Ranks"))
    if not ranks and "Group size" in args:
        start = int(args.get("Global rank start", 0))
        stride = int(args.get("Global rank stride", 1)) or 1
        ranks = list(range(start, start + stride * int(args["Group size"]), stride))
    if not ranks:
        raise fail(source, None, f"{_where(event)}: group {name!r} has no ranks in the trace")
    groups[name] = Group(name=name, ranks=tuple(ranks), backend=str(info.get("backend", "")),
                         desc=str(args.get("Process Group Description", "")))
    return name


def _global(group: Group, group_rank: int | None) -> int | None:
    if group_rank is None or not 0 <= group_rank < len(group.ranks):
        return group_rank
    return group.ranks[group_rank]


# -- record_param_comms ------------------------------------------------------------------

def _from_param_comms(comms: list[_Event], groups: dict[str, Group], info: dict, source: str,
                      notes: list[str]) -> list[Call]:
    calls, skipped = [], {}
    for event in comms:
        args = event.args
        name = str(args.get("Collective name", ""))
        if name in NOT_CALLS:
            continue
        op = COLLECTIVES.get(name)
        if op is None:
            skipped[name] = skipped.get(name, 0) + 1
            continue
        for key in ("In msg nelems", "Out msg nelems", "dtype"):
            if key not in args:
                raise fail(source, None, f"{_where(event)}: no {key!r} (a {PARAM_COMMS} event "
                           "carries it)")
        pg = _group_of(event, groups, info, source)
        peer = None
        if op in ("send", "recv"):
            key = "Dst Rank" if op == "send" else "Src Rank"
            peer = _global(groups[pg], int(args[key])) if key in args else None
        splits = None
        if op == "alltoall":
            split_in = _int_list(args.get("In split size"))
            split_out = _int_list(args.get("Out split size"))
            if split_in or split_out:
                splits = {"in": split_in or [], "out": split_out or []}
        calls.append(Call(
            seq=len(calls), pg=pg, op=op, dtype=_dtype(args["dtype"], event, source),
            in_numel=_int_arg(event, "In msg nelems", source),
            out_numel=_int_arg(event, "Out msg nelems", source), splits=splits,
            peer=peer, is_async=bool(args.get("Is asynchronized op", False)),
            t_issue_ns=_ns(event.ts_us)))
    rootless = sum(1 for call in calls if call.op in ("broadcast", "reduce"))
    if rootless:
        notes.append(f"{rootless} broadcast/reduce call(s): {PARAM_COMMS} does not "
                     "record the root, which is left empty")
    for name, count in skipped.items():
        notes.append(f"{count} {PARAM_COMMS} event(s) of collective {name!r}, which commbench "
                     "does not replay, were left out")
    return calls


def _attach_kernels(calls: list[Call], comms: list[_Event], events: list[_Event], source: str,
                    notes: list[str]) -> None:
    """NCCL kernels' durations onto their calls: by the External id Kineto gives a kernel
    (its launching record_param_comms event), else by the group and Seq it carries."""
    by_id, by_seq = {}, {}
    kept = iter(calls)
    for event in comms:
        name = str(event.args.get("Collective name", ""))
        if name in NOT_CALLS or name not in COLLECTIVES:
            continue
        call = next(kept)
        if "External id" in event.args:
            by_id[event.args["External id"]] = call
        if "Seq" in event.args:
            by_seq[(str(event.args.get("Process Group Name", "0")), event.args["Seq"])] = call
    unmatched = 0
    for kernel in events:
        if not kernel.name.startswith(("ncclDevKernel", "ncclKernel")):
            continue
        call = by_id.get(kernel.args.get("External id"))
        if call is None and "Seq" in kernel.args:
            call = by_seq.get((str(kernel.args.get("Process Group Name", "0")),
                               kernel.args["Seq"]))
        if call is None:
            unmatched += 1
            continue
        call.dur_ns = (call.dur_ns or 0) + _ns(kernel.dur_us)
        call.t_end_ns = max(call.t_end_ns or 0, _ns(kernel.end_us))
    if unmatched:
        notes.append(f"{unmatched} NCCL kernel(s) matched no {PARAM_COMMS} event (by External "
                     "id or group and Seq): their time is not counted")
    if calls and not any(call.dur_ns is not None for call in calls):
        notes.append("no NCCL kernel durations in the trace (profile with "
                     "ProfilerActivity.CUDA too): calls have no in-situ time")


# -- the dispatcher's c10d:: ops (gloo) ------------------------------------------------------

def _numel(dims: object) -> int:
    """Elements of a recorded argument: a tensor's shape, or a (nested) list of shapes."""
    if not isinstance(dims, list):
        return 0
    if all(isinstance(d, int) for d in dims):
        count = 1
        for d in dims:
            count *= d
        return count
    return sum(_numel(d) for d in dims)


def _from_dispatcher(events: list[_Event], groups: dict[str, Group], info: dict, source: str,
                     notes: list[str]) -> list[Call]:
    ops = [e for e in events if e.name in DISPATCHER]
    if not ops:
        return []
    default = next((name for name, g in groups.items() if g.desc == "default_pg"), "0")
    if default not in groups:
        world = int(info.get("world_size", 0))
        if not world:
            raise fail(source, None, "the trace lists no process groups and no world size")
        groups[default] = Group(default, tuple(range(world)), str(info.get("backend", "")),
                                "default_pg")
    works = [e for e in events if e.name.startswith("gloo:")]
    used: set[int] = set()
    calls, untyped = [], 0
    for event in ops:
        spec = DISPATCHER[event.name]
        dims = event.args.get("Input Dims")
        if spec.inputs is not None and not isinstance(dims, list):
            raise fail(source, None, f"{_where(event)}: no recorded shapes (profile with "
                       "record_shapes=True)")
        in_numel = _numel(dims[spec.inputs]) if spec.inputs is not None else 0
        out_numel = _numel(dims[spec.outputs]) if spec.outputs is not None else 0
        work = _work_of(event, in_numel, works, used)
        types = event.args.get("Input type") or []
        given = types[spec.inputs] if spec.inputs is not None and spec.inputs < len(types) \
            else ""
        if given in DTYPES:
            dtype = _dtype(given, event, source)
        elif work is not None and (work.args.get("Input type") or [""])[0] in DTYPES:
            dtype = _dtype(work.args["Input type"][0], event, source)
        else:
            dtype, untyped = "float32", untyped + (spec.inputs is not None)
        concrete = event.args.get("Concrete Inputs") or []
        group = groups[default]
        calls.append(Call(
            seq=len(calls), pg=default, op=spec.op, dtype=dtype, in_numel=in_numel,
            out_numel=out_numel,
            root=_global(group, _concrete_int(concrete, spec.root)),
            peer=_global(group, _concrete_int(concrete, spec.peer)),
            is_async=_async(concrete), t_issue_ns=_ns(event.ts_us),
            t_end_ns=_ns(work.end_us) if work is not None else None))
    others = [name for name in groups if name != default]
    if others:
        notes.append(f"c10d:: ops do not say which process group they used: all "
                     f"{len(calls)} calls are put on the default group {default!r} (the job "
                     f"also had group(s) {', '.join(others)})")
    if untyped:
        notes.append(f"{untyped} call(s) on tensor lists had no dtype in the trace "
                     "(no matching gloo: work event): read as float32")
    return calls


def _work_of(event: _Event, in_numel: int, works: list[_Event], used: set[int]) -> _Event | None:
    """The gloo work a c10d op enqueued: the first one not yet taken that starts after the op
    does and hands in as many elements (gloo runs a group's work in enqueue order)."""
    for work in works:
        if work.index in used or work.ts_us < event.ts_us:
            continue
        if _numel((work.args.get("Input Dims") or [[]])[0]) == in_numel:
            used.add(work.index)
            return work
    return None


def _concrete_int(concrete: list, index: int | None) -> int | None:
    if index is None or index >= len(concrete):
        return None
    try:
        return int(concrete[index])
    except (TypeError, ValueError):
        return None


def _async(concrete: list) -> bool:
    return any(str(value) == "True" for value in concrete)


# -- steps ---------------------------------------------------------------------------------

def _assign_steps(calls: list[Call], events: list[_Event]) -> None:
    starts = sorted((_ns(e.ts_us), int(m.group(1))) for e in events
                    if (m := _STEP.fullmatch(e.name)))
    if not starts:
        return
    for call in calls:
        begun = [step for start, step in starts if start <= (call.t_issue_ns or 0)]
        call.step = begun[-1] if begun else starts[0][1]
