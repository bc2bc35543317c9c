"""The dispatcher's c10d:: ops, read from their recorded shapes, where a trace has no
record_param_comms (gloo), and gloo's work events for their completion (the package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

from commbench.importers.common import fail
from commbench.importers.torch_profiler.events import (
    DTYPES,
    Event,
    dtype_of,
    ns,
    to_global,
    where,
)
from commbench.results.trace import Call, Group


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


def numel(dims: object) -> int:
    """Elements of a recorded argument: a tensor's shape, or a (nested) list of shapes."""
    if not isinstance(dims, list):
        return 0
    if all(isinstance(d, int) for d in dims):
        count = 1
        for d in dims:
            count *= d
        return count
    return sum(numel(d) for d in dims)


def from_dispatcher(events: list[Event], groups: dict[str, Group], info: dict, source: str,
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
            raise fail(source, None, f"{where(event)}: no recorded shapes (profile with "
                       "record_shapes=True)")
        in_numel = numel(dims[spec.inputs]) if spec.inputs is not None else 0
        out_numel = numel(dims[spec.outputs]) if spec.outputs is not None else 0
        work = work_of(event, in_numel, works, used)
        types = event.args.get("Input type") or []
        given = types[spec.inputs] if spec.inputs is not None and spec.inputs < len(types) \
            else ""
        if given in DTYPES:
            dtype = dtype_of(given, event, source)
        elif work is not None and (work.args.get("Input type") or [""])[0] in DTYPES:
            dtype = dtype_of(work.args["Input type"][0], event, source)
        else:
            dtype, untyped = "float32", untyped + (spec.inputs is not None)
        concrete = event.args.get("Concrete Inputs") or []
        group = groups[default]
        calls.append(Call(
            seq=len(calls), pg=default, op=spec.op, dtype=dtype, in_numel=in_numel,
            out_numel=out_numel,
            root=to_global(group, concrete_int(concrete, spec.root)),
            peer=to_global(group, concrete_int(concrete, spec.peer)),
            is_async=is_async_op(concrete), t_issue_ns=ns(event.ts_us),
            t_end_ns=ns(work.end_us) if work is not None else None))
    others = [name for name in groups if name != default]
    if others:
        notes.append(f"c10d:: ops do not say which process group they used: all "
                     f"{len(calls)} calls are put on the default group {default!r} (the job "
                     f"also had group(s) {', '.join(others)})")
    if untyped:
        notes.append(f"{untyped} call(s) on tensor lists had no dtype in the trace "
                     "(no matching gloo: work event): read as float32")
    return calls


def work_of(event: Event, in_numel: int, works: list[Event], used: set[int]) -> Event | None:
    """The gloo work a c10d op enqueued: the first one not yet taken that starts after the op
    does and hands in as many elements (gloo runs a group's work in enqueue order)."""
    for work in works:
        if work.index in used or work.ts_us < event.ts_us:
            continue
        if numel((work.args.get("Input Dims") or [[]])[0]) == in_numel:
            used.add(work.index)
            return work
    return None


def concrete_int(concrete: list, index: int | None) -> int | None:
    if index is None or index >= len(concrete):
        return None
    try:
        return int(concrete[index])
    except (TypeError, ValueError):
        return None


def is_async_op(concrete: list) -> bool:
    return any(str(value) == "True" for value in concrete)
