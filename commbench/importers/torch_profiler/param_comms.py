"""record_param_comms events (ProcessGroupNCCL emits one per call) and the NCCL kernels Kineto
links to them: the calls of an NCCL rank, with their kernel time (see the package docstring)."""

from __future__ import annotations

from commbench.importers.common import fail
from commbench.importers.torch_profiler.events import (
    Event,
    dtype_of,
    group_of,
    int_arg,
    int_list,
    ns,
    to_global,
    where,
)
from commbench.results.trace import Call, Group, trace_op

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


def from_param_comms(comms: list[Event], groups: dict[str, Group], info: dict, source: str,
                     notes: list[str]) -> list[tuple[Event, Call]]:
    """Each event that is a call, with the call it makes, in issue order."""
    pairs: list[tuple[Event, Call]] = []
    skipped: dict[str, int] = {}
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
                raise fail(source, None, f"{where(event)}: no {key!r} (a {PARAM_COMMS} event "
                           "carries it)")
        pg = group_of(event, groups, info, source)
        peer = None
        traits = trace_op(op)
        if traits.p2p:
            key = "Dst Rank" if traits.sends else "Src Rank"
            peer = to_global(groups[pg], int(args[key])) if key in args else None
        splits = None
        if traits.per_peer:
            split_in = int_list(args.get("In split size"))
            split_out = int_list(args.get("Out split size"))
            if split_in or split_out:
                splits = {"in": split_in or [], "out": split_out or []}
        pairs.append((event, Call(
            seq=len(pairs), pg=pg, op=op, dtype=dtype_of(args["dtype"], event, source),
            in_numel=int_arg(event, "In msg nelems", source),
            out_numel=int_arg(event, "Out msg nelems", source), splits=splits,
            peer=peer, is_async=bool(args.get("Is asynchronized op", False)),
            t_issue_ns=ns(event.ts_us))))
    rootless = [call.op for _, call in pairs if trace_op(call.op).rooted]
    if rootless:
        notes.append(f"{len(rootless)} {'/'.join(sorted(set(rootless)))} call(s): "
                     f"{PARAM_COMMS} does not record the root, which is left empty")
    for name, count in skipped.items():
        notes.append(f"{count} {PARAM_COMMS} event(s) of collective {name!r}, which commbench "
                     "does not replay, were left out")
    return pairs


def attach_kernels(pairs: list[tuple[Event, Call]], events: list[Event],
                   notes: list[str]) -> None:
    """NCCL kernels' durations onto their calls: by the External id Kineto gives a kernel
    (its launching record_param_comms event), else by the group and Seq it carries."""
    by_id: dict[object, Call] = {}
    by_seq: dict[tuple, Call] = {}
    for event, call in pairs:
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
        call.dur_ns = (call.dur_ns or 0) + ns(kernel.dur_us)
        call.t_end_ns = max(call.t_end_ns or 0, ns(kernel.end_us))
    if unmatched:
        notes.append(f"{unmatched} NCCL kernel(s) matched no {PARAM_COMMS} event (by External "
                     "id or group and Seq): their time is not counted")
    if pairs and not any(call.dur_ns is not None for _, call in pairs):
        notes.append("no NCCL kernel durations in the trace (profile with "
                     "ProfilerActivity.CUDA too): calls have no in-situ time")
