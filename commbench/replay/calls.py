"""A recorded call made real: its buffers, its groups, the torch.distributed call that issues it.

A collective goes through its descriptor (commbench.collectives), as the sweep's do: the
descriptor lays out the buffers for the call's size (commbench's convention, the largest
buffer of the group) and binds the call; the replay only adds ``async_op=True`` where the
recording saw an asynchronous call, and, where the recording has an all-to-all's split sizes
(MoE dispatch and combine), buffers of the recorded rows and those split sizes, exactly.
send and recv are single messages, which p2p's descriptor (patterns of pairs) does not make:
they are bound here, with the trace's peer.

Buffers are allocated once per distinct (op, sizes, dtype, group) and filled with zeros (no
reduction of zeros grows, overflows or turns denormal over repeated in-place calls). Calls
that are in flight at the same time never share a buffer: the binder hands each of them its
own ``slot``. Every bound call knows the bytes of the tensors it hands torch, which the
replay checks against the trace before anything is timed, and an all-to-all knows the bytes
it hands torch to send to and receive from each member of its group (``peers``: read off the
tensors and split sizes it hands torch), which the replay checks against the recorded split
sizes.

Faults, for tests only, on every rank alike; the checks must catch them:
``COMMBENCH_REPLAY_FAULT=halve[:OP]`` allocates half the elements for the calls of OP (every
op when absent); ``COMMBENCH_REPLAY_FAULT=even`` replays an all-to-all with recorded split
sizes as an even one of its largest buffer (the bytes per call are the trace's, the bytes per
peer are not).
"""

from __future__ import annotations

import functools
import math
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
    # an all-to-all's bytes to ("in") and from ("out") each member of the group, as handed
    # to torch; None for other ops
    peers: dict[str, list[int]] | None = None

    @property
    def sent(self) -> int | None:
        return sum(self.peers["in"]) if self.peers is not None else None

    @property
    def received(self) -> int | None:
        return sum(self.peers["out"]) if self.peers is not None else None

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


def handed_peers(issue: Callable, group_size: int) -> dict[str, list[int]] | None:
    """What a bound ``all_to_all_single(output, input, ...)`` hands torch to receive from
    (``out``) and send to (``in``) each member of its group, in bytes: the split sizes it
    passes (rows of dim 0) times the bytes of a row of its tensors, or, without them, the
    even split torch makes. Read off the call as torch will see it, not off the trace."""
    args, keywords = list(getattr(issue, "args", ())), getattr(issue, "keywords", {})
    names = ("output", "input", "output_split_sizes", "input_split_sizes")
    given = dict(zip(names, args, strict=False))
    given.update({k: v for k, v in keywords.items() if k in names})
    found = {}
    for side, tensor, sizes in (("out", given.get("output"), given.get("output_split_sizes")),
                                ("in", given.get("input"), given.get("input_split_sizes"))):
        if not isinstance(tensor, torch.Tensor):
            return None
        row = math.prod(tensor.shape[1:]) * tensor.element_size()
        found[side] = ([int(rows) * row for rows in sizes] if sizes else
                       [tensor.numel() * tensor.element_size() // group_size] * group_size)
    return {"in": found["in"], "out": found["out"]}


class Binder:
    """Binds a rank's calls: ``groups`` maps a trace group name to (torch group, its global
    ranks in group order)."""

    def __init__(self, rank: int, groups: dict[str, tuple[Any, tuple[int, ...]]], backend: str,
                 device: str) -> None:
        self.rank, self.groups, self.backend, self.device = rank, groups, backend, device
        self.buffers: dict[tuple, tuple[torch.Tensor, torch.Tensor, Any]] = {}
        fault = os.environ.get(REPLAY_FAULT_ENV, "")
        self.halve = _halving(fault)
        self.even = fault.strip() == "even"

    def bind(self, call: Call, slot: int = 0) -> Bound:
        issue = self._p2p(call, slot) if call.op in P2P else self._collective(call, slot)
        peers = (handed_peers(issue, len(self.groups[call.pg][1])) if call.is_alltoall
                 else None)
        return Bound(call, issue, handed_bytes(issue), peers)

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
        if _has_splits(call.splits) and not self.even:
            issue = self._with_splits(issue, call, slot)
        if call.is_async:
            issue = functools.partial(issue.func, *issue.args, **issue.keywords, async_op=True)
        return issue

    def _with_splits(self, issue: functools.partial, call: Call,
                     slot: int) -> functools.partial:
        """An all-to-all the recording has split sizes of (uneven, or even by a caller that
        passed them): buffers of the recorded rows (the splits count rows of dim 0, of
        ``row_numel`` elements) and torch's split keywords, as recorded. The descriptor's own
        call splits its largest buffer evenly, which is another call."""
        row = call.row_numel
        key = ("splits", call.dtype, call.in_numel, call.out_numel, row, call.pg, slot)
        if key not in self.buffers:
            self.buffers[key] = tuple(
                self._tensor(self._elements(call, numel), call.dtype).view(-1, row)
                if self._elements(call, numel) % row == 0 else
                self._tensor(self._elements(call, numel), call.dtype)
                for numel in (call.in_numel, call.out_numel)) + (None,)
        inp, out, _ = self.buffers[key]
        return functools.partial(issue.func, out, inp,
                                 output_split_sizes=list(call.splits.get("out") or []) or None,
                                 input_split_sizes=list(call.splits.get("in") or []) or None,
                                 **issue.keywords)


def _count(op, call: Call, world: int) -> int:
    """Elements of the group's largest buffer (docs/reference/metrics-and-formulas.md#sizes), from
    what this rank handed in and got back: a rank outside a gather's or scatter's root holds only
    its chunk, so the group's largest buffer is that chunk times the group."""
    largest = max(call.in_numel, call.out_numel)
    if op.splits and min(call.in_numel, call.out_numel) == 0:
        return largest * world
    return largest


def _has_splits(splits: dict | None) -> bool:
    """Whether the recording has an all-to-all's split sizes, on either side. Even splits
    on both sides could use the even call, but a rank that sends 3 rows to each peer and
    receives 2 from each is even on both sides and no even call of one buffer: the recorded
    split sizes are always used."""
    return bool(splits) and any(splits.get(side) for side in ("in", "out"))


def _halving(text: str) -> str | None:
    """The op whose buffers a test halves ('' = every op), or None."""
    action, _, op = text.strip().partition(":")
    return op if action == "halve" else None
