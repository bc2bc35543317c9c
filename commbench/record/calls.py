"""What a c10d op seen at the dispatcher says about the call: commbench's op name, the tensors
in and out, the group, the root or peer, the reduction.

The c10d ops' schemas name their arguments (``tensors``, ``process_group``, ``root_rank``,
``dst``...), and the names moved between releases (``dstRank`` became ``dst``), so arguments
are read by name with the old names as fall-backs, never by position. Each op is one entry
of ``DESCRIPTORS``: adding one touches one line. ``_c10d_functional`` ops (DTensor, compiled
code, FSDP2 on some releases) return a tensor that a later ``wait_tensor`` completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Descriptor:
    """How to read one dispatcher op: its commbench name, which arguments hold what a rank
    hands in and gets back, where the root or peer is, and whether it is functional (no Work:
    completion comes from ``wait_tensor``)."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    root: tuple[str, ...] = ()
    peer: tuple[str, ...] = ()
    functional: bool = False
    gather_factor: str = ""  # functional allgather: out = in x group_size
    scatter_factor: str = ""  # functional reduce-scatter: out = in / group_size


_SAME = ()  # outputs == inputs (in-place ops)
ROOT = ("root_rank", "root", "src")
DESCRIPTORS: dict[str, Descriptor] = {
    "c10d::allreduce_": Descriptor("allreduce", ("tensors",)),
    "c10d::allreduce_coalesced_": Descriptor("allreduce", ("tensors",)),
    "c10d::_allgather_base_": Descriptor("allgather", ("input_tensor",), ("output_tensor",)),
    "c10d::allgather_": Descriptor("allgather", ("input_tensors",), ("output_tensors",)),
    "c10d::allgather_coalesced_": Descriptor("allgather", ("input_list",), ("output_lists",)),
    "c10d::allgather_into_tensor_coalesced_": Descriptor("allgather", ("inputs",),
                                                         ("outputs",)),
    "c10d::_reduce_scatter_base_": Descriptor("reduce_scatter", ("input_tensor",),
                                              ("output_tensor",)),
    "c10d::reduce_scatter_": Descriptor("reduce_scatter", ("input_tensors",),
                                        ("output_tensors",)),
    "c10d::reduce_scatter_tensor_coalesced_": Descriptor("reduce_scatter", ("inputs",),
                                                         ("outputs",)),
    "c10d::broadcast_": Descriptor("broadcast", ("tensors",), root=ROOT),
    "c10d::reduce_": Descriptor("reduce", ("tensors",), root=ROOT),
    "c10d::gather_": Descriptor("gather", ("input_tensors",), ("output_tensors",), root=ROOT),
    "c10d::scatter_": Descriptor("scatter", ("input_tensors",), ("output_tensors",),
                                 root=ROOT),
    "c10d::alltoall_base_": Descriptor("alltoall", ("input",), ("output",)),
    "c10d::alltoall_": Descriptor("alltoall", ("input_tensors",), ("output_tensors",)),
    "c10d::barrier": Descriptor("barrier", ()),
    "c10d::monitored_barrier_": Descriptor("barrier", ()),
    "c10d::send": Descriptor("send", ("tensors",), peer=("dst", "dstRank", "dst_rank")),
    "c10d::recv_": Descriptor("recv", ("tensors",), peer=("src", "srcRank", "src_rank")),
    "c10d::recv_any_source_": Descriptor("recv", ("tensors",)),
    "_c10d_functional::all_reduce": Descriptor("allreduce", ("input",), functional=True),
    "_c10d_functional::all_reduce_": Descriptor("allreduce", ("input",), functional=True),
    "_c10d_functional::all_reduce_coalesced": Descriptor("allreduce", ("inputs",),
                                                         functional=True),
    "_c10d_functional::all_reduce_coalesced_": Descriptor("allreduce", ("inputs",),
                                                          functional=True),
    "_c10d_functional::all_gather_into_tensor": Descriptor(
        "allgather", ("input",), functional=True, gather_factor="group_size"),
    "_c10d_functional::all_gather_into_tensor_out": Descriptor(
        "allgather", ("input",), functional=True, gather_factor="group_size"),
    "_c10d_functional::all_gather_into_tensor_coalesced": Descriptor(
        "allgather", ("inputs",), functional=True, gather_factor="group_size"),
    "_c10d_functional::reduce_scatter_tensor": Descriptor(
        "reduce_scatter", ("input",), functional=True, scatter_factor="group_size"),
    "_c10d_functional::reduce_scatter_tensor_out": Descriptor(
        "reduce_scatter", ("input",), functional=True, scatter_factor="group_size"),
    "_c10d_functional::reduce_scatter_tensor_coalesced": Descriptor(
        "reduce_scatter", ("inputs",), functional=True, scatter_factor="group_size"),
    "_c10d_functional::all_to_all_single": Descriptor("alltoall", ("input",), functional=True),
    "_c10d_functional::broadcast": Descriptor("broadcast", ("input",), root=("src",),
                                              functional=True),
    "_c10d_functional::broadcast_": Descriptor("broadcast", ("input",), root=("src",),
                                               functional=True),
}
GROUP_ARGS = ("process_group", "group_name", "group", "tag")


def bind(schema: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The op's arguments by name, defaults filled in, as its schema declares them."""
    bound: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):
        if index < len(args):
            bound[argument.name] = args[index]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
        elif getattr(argument, "has_default_value", lambda: False)():
            bound[argument.name] = argument.default_value
    return bound


def first(bound: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((bound[name] for name in names if name in bound), None)


def tensors_in(value: Any) -> list:
    """Every tensor in an argument (a tensor, a list, a list of lists)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [tensor for item in value for tensor in tensors_in(item)]
    return [value] if hasattr(value, "numel") else []


def numel(value: Any) -> int:
    return sum(int(tensor.numel()) for tensor in tensors_in(value))


def dtype_name(value: Any) -> str:
    tensors = tensors_in(value)
    return str(tensors[0].dtype).removeprefix("torch.") if tensors else "float32"
