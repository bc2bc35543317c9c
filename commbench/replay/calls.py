"""A recorded call made real: its buffers, its groups, the torch.distributed call that issues it.

A collective goes through its descriptor (commbench.collectives), as the sweep's do: the
descriptor lays out the buffers for the call's size (commbench's convention, the largest
buffer of the group) and binds the call; the replay only adds ``async_op=True`` where the
recording saw an asynchronous call, and torch's split sizes where an all-to-all was uneven.
send and recv are single messages, which p2p's descriptor (patterns of pairs) does not make:
they are bound here, with the trace's peer.

Buffers are allocated once per distinct (op, sizes, dtype, group) and filled with zeros (no
reduction of zeros grows, overflows or turns denormal over repeated in-place calls). Calls
that are in flight at the same time never share a buffer: the binder hands each of them its
own ``slot``. Every bound call knows the bytes of the tensors it hands torch, which the
replay checks against the trace before anything is timed.

``COMMBENCH_REPLAY_FAULT=halve[:OP]`` (tests only) allocates half the elements for the
calls of OP (every op when absent), on every rank alike: the check must catch it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from commbench import collectives
from commbench.collectives.base import OpContext
from commbench.results.trace import Call

REPLAY_FAULT_ENV = "COMMBENCH_REPLAY_FAULT"
# Looked up when a call is bound, not now: fault injection wraps torch.distributed's functions
# after this module is imported (engine.faults).
P2P = {"send": ("send", "isend"), "recv": ("recv", "irecv")}


@dataclass
class Bound:
    """One call ready to issue: ``issue()`` returns torch's Work (asynchronous) or None."""

    call: Call
    issue: Callable[[], Any]
    nbytes: int  # bytes of the largest tensor (or tensor list) handed to torch

    @property
    def is_async(self) -> bool:
        return self.call.is_async


# The trace format's dtype names where torch spells them otherwise.
DTYPE_ALIASES = {"float8_e4m3": "float8_e4m3fn"}


def torch_dtype(name: str):
    """torch's dtype for a trace's dtype name, or None where this torch has none."""
    found = getattr(torch, DTYPE_ALIASES.get(name, name), None)
    return found if isinstance(found, torch.dtype) else None


def torch_reduce_op(name: str | None, backend: str):
    """torch's ReduceOp for a trace's reduction; gloo has no average and a pre-multiplied sum
    is a sum to time, so both run as sums (the same traffic)."""
    if not name or (name == "avg" and backend == "gloo") or name == "premul_sum":
        return dist.ReduceOp.SUM
    return getattr(dist.ReduceOp, {"prod": "PRODUCT"}.get(name, name.upper()),
                   dist.ReduceOp.SUM)


def handed_bytes(issue: Callable) -> int:
    """The bytes of the largest tensor, or list of tensors, that a bound call hands torch."""
    values = [*getattr(issue, "args", ()), *getattr(issue, "keywords", {}).values()]
    sizes = [0]
    for value in values:
        if isinstance(value, torch.Tensor):
            sizes.append(value.numel() * value.element_size())
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
            sizes.append(sum(t.numel() * t.element_size() for t in value))
    return max(sizes)


class Binder:
    """Binds a rank's calls: ``groups`` maps a trace group name to (torch group, its global
    ranks in group order)."""

    def __init__(self, rank: int, groups: dict[str, tuple[Any, tuple[int, ...]]], backend: str,
                 device: str) -> None:
        self.rank, self.groups, self.backend, self.device = rank, groups, backend, device
        self.buffers: dict[tuple, tuple[torch.Tensor, torch.Tensor, Any]] = {}
        self.halve = _halving(os.environ.get(REPLAY_FAULT_ENV, ""))

    def bind(self, call: Call, slot: int = 0) -> Bound:
        issue = self._p2p(call, slot) if call.op in P2P else self._collective(call, slot)
        return Bound(call, issue, handed_bytes(issue))

    def _elements(self, call: Call, numel: int) -> int:
        return numel // 2 if self.halve is not None and self.halve in ("", call.op) else numel

    def _tensor(self, numel: int, dtype: str) -> torch.Tensor:
        return torch.zeros(max(0, numel), dtype=torch_dtype(dtype), device=self.device)

    def _p2p(self, call: Call, slot: int) -> Callable:
        key = (call.op, call.dtype, call.in_numel, call.pg, slot)
        if key not in self.buffers:
            self.buffers[key] = (self._tensor(self._elements(call, call.in_numel), call.dtype),
                                 None, None)
        tensor = self.buffers[key][0]
        group = self.groups[call.pg][0]
        name = P2P[call.op][1 if call.is_async else 0]
        return functools.partial(getattr(dist, name), tensor, call.peer, group=group)

    def _collective(self, call: Call, slot: int) -> Callable:
        op = collectives.get(call.op)
        group, ranks = self.groups[call.pg]
        world = len(ranks)
        root = ranks.index(call.root) if call.root in ranks else 0
        ctx = OpContext(rank=ranks.index(self.rank), world=world, group=group,
                        dtype=call.dtype, reduce_op=call.reduce_op or "sum",
                        torch_op=torch_reduce_op(call.reduce_op, self.backend), root=root,
                        ranks=ranks, backend=self.backend)
        count = self._elements(call, _count(op, call, world))
        key = (call.op, call.dtype, call.in_numel, call.out_numel, call.pg, call.root, slot)
        if key not in self.buffers:
            layout = op.layout(ctx, count)
            send = self._tensor(layout.send, call.dtype) if layout.send else None
            recv = self._tensor(layout.recv, call.dtype)
            bufs = op.views(ctx, send if send is not None else recv, recv, count)
            self.buffers[key] = (send, recv, bufs)
        bufs = self.buffers[key][2]
        issue = op.call(ctx, bufs)
        if call.splits and _uneven(call.splits):
            issue = self._uneven(issue, call, slot)
        if call.is_async:
            issue = functools.partial(issue.func, *issue.args, **issue.keywords, async_op=True)
        return issue

    def _uneven(self, issue: functools.partial, call: Call, slot: int) -> functools.partial:
        """An all-to-all with uneven splits: buffers of the trace's exact sizes, torch's split
        keywords (the descriptor's call splits evenly)."""
        key = ("splits", call.dtype, call.in_numel, call.out_numel, call.pg, slot)
        if key not in self.buffers:
            self.buffers[key] = (self._tensor(self._elements(call, call.in_numel), call.dtype),
                                 self._tensor(self._elements(call, call.out_numel), call.dtype),
                                 None)
        inp, out, _ = self.buffers[key]
        return functools.partial(issue.func, out, inp, output_split_sizes=call.splits["out"],
                                 input_split_sizes=call.splits["in"], **issue.keywords)


def _count(op, call: Call, world: int) -> int:
    """Elements of the group's largest buffer (SPEC §2), from what this rank handed in and got
    back: a rank outside a gather's or scatter's root holds only its chunk, so the group's
    largest buffer is that chunk times the group."""
    largest = max(call.in_numel, call.out_numel)
    if op.splits and min(call.in_numel, call.out_numel) == 0:
        return largest * world
    return largest


def _uneven(splits: dict) -> bool:
    sides = [list(splits.get(side) or []) for side in ("in", "out")]
    return any(len(set(side)) > 1 for side in sides)


def _halving(text: str) -> str | None:
    """The op whose buffers a test halves ('' = every op), or None."""
    action, _, op = text.strip().partition(":")
    return op if action == "halve" else None
