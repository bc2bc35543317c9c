"""Fault injection, for the tests that prove commbench's checks by breaking what they check.

``COMMBENCH_FAULT`` holds faults separated by ``;``, each ``ACTION[:RANKS[:OP[:SIZE]]]``
(RANKS: ``1`` or ``0,2``; ``*`` or nothing = any):

- ``raise``: the rank raises before measuring that size (a failing rank);
- ``corrupt``: one result element is changed before the check compares (a wrong result);
- ``noop``: the torch.distributed call does nothing at all;
- ``shift``: the call's result is moved by one element;
- ``neighbour``: the result holds the neighbouring rank's chunk (reduce-scatter reduces the
  next chunk; the other ops' results are rotated by one chunk);
- ``splits``: an all_to_all_single with split sizes moves one element from chunk (0, 1) to
  (0, 0) and one from (1, 0) to (1, 1) (sender, receiver): every row and column keeps its
  total, so the call goes through, and each rank shifts only the sizes it passes itself (the
  ranks agree without talking), but ranks 0 and 1 cut their chunks at the wrong sizes;
- ``delay=SECONDS``: the call sleeps first (a slow rank, link or node);
- ``slow=FACTOR``: FACTOR - 1 more of the same call on average, on scratch copies, so each
  call costs FACTOR times its own time (a proportional regression, for compare's power);
- ``linkdelay=SECONDS``: a p2p batch sleeps first, only on a rank of RANKS whose peer is in
  RANKS too (a slow link between two ranks that are fast with everybody else);
- ``hang=SECONDS``: the same, for a long time (a pair that hangs; default an hour);
- ``flaky=SECONDS[,EVERY]``: ``delay`` on some visits only (a visit: the sweep at a size in
  one round, a locate pair at a size): every EVERY-th visit from the first (an integer, default
  2), or each visit with probability EVERY (below 1), seeded by the rank and the visit so a
  rerun slows the same visits (a rank that is slow in some rounds and fine in others).
- ``busy=SECONDS[,VISITS]``: ``delay`` on the first VISITS visits only (default 4), then
  none: a rank busy with something else for a while (another job that then ended), which a
  retest after it finds normal (a ``flaky`` rank slow on every other visit is slow on
  retests too);
- ``late=SECONDS[,EVERY]``: after every EVERY-th call (default 4; counted on this rank from the
  first wrapped call), the rank sleeps before returning, so it starts its next call SECONDS
  late, as a rank busy between two calls: the others wait for it in that call
  (``--per-call`` names it as that call's straggler). A ``delay`` inside a call cannot be
  told apart that way: every rank waits in the call for as long.

All but the first two wrap the functions of ``torch.distributed`` themselves, inside the
ranks, so the product's own validation and timing see a broken or slow collective. The control
channel binds the real functions before the wrappers are installed and keeps working.
"""

from __future__ import annotations

import functools
import os
import random
import time
from dataclasses import dataclass

FAULT_ENV = "COMMBENCH_FAULT"
WRAPPING = ("noop", "shift", "neighbour", "splits", "delay", "slow", "flaky", "busy", "late")
VISITED = ("flaky", "busy")  # slow on some visits only (Injector.at counts them)
PAIR_ACTIONS = ("linkdelay", "hang")  # p2p batches between two ranks of RANKS
HANG_S = 3600.0


@dataclass(frozen=True)
class Fault:
    action: str
    ranks: frozenset[int] | None = None  # None: every rank
    op: str = ""  # '' = every op
    size: int | None = None  # None: every size
    seconds: float = 0.0  # delay: the seconds; slow: the factor
    every: float = 0.0  # flaky: every K-th visit (K >= 1), or each with probability p < 1
    # late: every K-th call

    def applies(self, rank: int, op: str, size: int | None) -> bool:
        return ((self.ranks is None or rank in self.ranks) and (not self.op or self.op == op)
                and (self.size is None or size is None or self.size == size))

    def on_visit(self, rank: int, visit: int) -> bool:
        """flaky, busy: whether the ``visit``-th visit (from 0) is a slow one."""
        if self.action == "busy":
            return visit < self.every
        if self.every >= 1:
            return visit % int(self.every) == 0
        return random.Random(rank * 1_000_003 + visit).random() < self.every


def parse(text: str) -> list[Fault]:
    faults = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        head, *rest = item.split(":")
        ranks, op, size = ([*rest, "", "", ""][:3])
        ranks, op, size = (value if value != "*" else "" for value in (ranks, op, size))
        action, _, seconds = head.partition("=")
        seconds, _, every = seconds.partition(",")
        if action not in ("raise", "corrupt", *WRAPPING, *PAIR_ACTIONS):
            raise ValueError(f"{FAULT_ENV}: unknown action {action!r}")
        default = HANG_S if action == "hang" else 0
        every = (float(every or 2) if action == "flaky" else float(every or 4)
                 if action in ("late", "busy") else 0.0)
        if action in ("late", "busy") and not (every >= 1 and every == int(every)):
            what = "EVERY is a whole number of calls" if action == "late" else (
                "VISITS is a whole number of visits")
            raise ValueError(f"{FAULT_ENV}: {action}'s {what}, not {every:g}")
        if action == "flaky" and not (every >= 1 and every == int(every) or 0 < every < 1):
            raise ValueError(f"{FAULT_ENV}: flaky's EVERY is a whole number of visits or a "
                             f"probability below 1, not {every:g}")
        faults.append(Fault(action, frozenset(int(r) for r in ranks.split(",")) if ranks else None,
                            op, int(size) if size else None, float(seconds or default), every))
    return faults


class Injector:
    """The faults of this rank; the sweep says which op and size it is at."""

    def __init__(self, rank: int, faults: list[Fault]) -> None:
        self.rank = rank
        self.faults = faults
        self.op = ""
        self.size: int | None = None
        self.visits: dict[int, int] = {}  # flaky/busy fault's index -> its visits so far
        self._slow_now: set[int] = set()  # flaky/busy faults whose current visit is slow
        self.calls = 0  # wrapped calls so far (late)

    @classmethod
    def from_env(cls, rank: int) -> Injector:
        return cls(rank, parse(os.environ.get(FAULT_ENV, "")))

    def at(self, op: str, size: int) -> None:
        """A new visit: flaky and busy faults count it and decide whether it is slow."""
        self.op, self.size = op, size
        self._slow_now = set()
        for index, fault in enumerate(self.faults):
            if fault.action in VISITED and fault.applies(self.rank, op, size):
                visit = self.visits.get(index, 0)
                self.visits[index] = visit + 1
                if fault.on_visit(self.rank, visit):
                    self._slow_now.add(index)

    def action(self, *names: str) -> Fault | None:
        """The first fault with one of these actions that applies here and now."""
        for index, fault in enumerate(self.faults):
            if (fault.action in names and fault.applies(self.rank, self.op, self.size)
                    and (fault.action not in VISITED or index in self._slow_now)):
                return fault
        return None

    def late_now(self, fault: Fault) -> bool:
        """late: count this call; whether it is one the rank leaves late (every K-th)."""
        self.calls += 1
        return self.calls % int(fault.every) == 0

    def pair_action(self, peers: set[int]) -> Fault | None:
        """A linkdelay or hang between this rank and one of ``peers`` (global ranks)."""
        for fault in self.faults:
            if (fault.action in PAIR_ACTIONS and fault.applies(self.rank, self.op, self.size)
                    and (fault.ranks is None or peers & fault.ranks)):
                return fault
        return None

    def install(self) -> None:
        """Wrap torch.distributed's collectives when a wrapping fault is asked for."""
        if any(f.action in (*WRAPPING, *PAIR_ACTIONS) for f in self.faults):
            _wrap_distributed(self)


# ---- the wrappers -----------------------------------------------------------------------------

class _Done:
    """What a skipped asynchronous call returns."""

    def wait(self, *args, **kwargs) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _group_size(dist, group) -> int:
    return dist.get_world_size(group) if group is not None else dist.get_world_size()


def _disturb(tensors: list, action: str, parts: int) -> None:
    """Move the result by one element, or by one of ``parts`` chunks, across ``tensors``."""
    import torch

    tensors = [t for t in tensors if t is not None and t.numel()]
    if not tensors:
        return
    whole = torch.cat([t.reshape(-1) for t in tensors])
    step = 1 if action == "shift" else max(1, whole.numel() // max(parts, 1))
    moved = whole.roll(step)
    offset = 0
    for tensor in tensors:
        tensor.reshape(-1).copy_(moved[offset : offset + tensor.numel()])
        offset += tensor.numel()


# function name -> the positional index of its result (None: it has none); the group is
# read from the call's ``group`` keyword
_OUTPUTS = {
    "all_reduce": 0,
    "reduce": 0,
    "broadcast": 0,
    "all_gather_single": 0,
    "all_gather_into_tensor": 0,
    "reduce_scatter_single": 0,
    "reduce_scatter_tensor": 0,
    "all_to_all_single": 0,
    "gather": 1,  # the gather list, at the root
    "scatter": 0,
    "recv": 0,
    "send": None,
}


def _wrap_distributed(injector: Injector) -> None:
    import torch.distributed as dist

    for name, result in _OUTPUTS.items():
        real = getattr(dist, name, None)
        if real is not None:
            setattr(dist, name, _wrapped(dist, injector, name, real, result))
    real_batch = dist.batch_isend_irecv
    real_irecv = dist.irecv

    @functools.wraps(real_batch)
    def batch(ops):
        pair = injector.pair_action({op.peer for op in ops})
        if pair is not None:
            time.sleep(pair.seconds)
        fault = injector.action(*WRAPPING)
        if fault is None:
            return real_batch(ops)
        if fault.action in ("slow", "splits"):  # not slowed (no scratch copies); no splits
            return real_batch(ops)
        if fault.action in ("delay", *VISITED):
            time.sleep(fault.seconds)
            return real_batch(ops)
        if fault.action == "late":
            works = real_batch(ops)
            for work in works:
                work.wait()
            if injector.late_now(fault):
                time.sleep(fault.seconds)
            return [_Done()]
        if fault.action == "noop":
            return [_Done()]
        for work in real_batch(ops):
            work.wait()
        received = [op.tensor for op in ops if op.op is real_irecv]
        _disturb(received[:1], fault.action, _group_size(dist, ops[0].group))
        return [_Done()]

    dist.batch_isend_irecv = batch


class _Slowdown:
    """slow=FACTOR: after a call, (FACTOR - 1) more of the same call on scratch copies of its
    tensors, on average (1.25: one more every 4th call), so every call costs FACTOR times its
    own time through the real transport, and the results are untouched. Every rank makes the
    same calls in the same order, so the extra ones pair up. Sleeping or spinning for
    (FACTOR - 1) x the call's duration does not work: a call's duration includes waiting for
    the peer's own delay, and on the 2-core VM slow=1.25 read 3-6x that way."""

    def __init__(self) -> None:
        self.credit = 0.0
        self.scratch: dict[tuple, tuple] = {}

    def after(self, factor: float, name: str, real, args, kwargs) -> None:
        self.credit += factor - 1
        while self.credit >= 1 - 1e-9:
            self.credit -= 1
            done = real(*self._copies(name, args), **kwargs)
            if done is not None and hasattr(done, "wait"):
                done.wait()

    def _copies(self, name: str, args) -> tuple:
        key = (name, *(tuple(a.shape) if hasattr(a, "shape") else type(a).__name__
                       for a in args))
        if key not in self.scratch:
            self.scratch.clear()  # a new size: the previous size's copies go
            self.scratch[key] = tuple(
                a.clone() if hasattr(a, "clone") else [t.clone() for t in a]
                if isinstance(a, list) else a for a in args)
        return self.scratch[key]


def _wrong_splits(dist, group, kwargs: dict) -> dict:
    """The ``splits`` fault: the split sizes of a matrix M' = M with M'00 = M00 + 1,
    M'01 = M01 - 1, M'10 = M10 - 1, M'11 = M11 + 1, each rank changing only its own row
    (input) and column (output), so senders and receivers agree; unchanged where M01 or M10
    is 0 (a size would go negative) or the call has no split sizes."""
    sent, received = kwargs.get("input_split_sizes"), kwargs.get("output_split_sizes")
    if not sent or not received or len(sent) < 2:
        return kwargs
    rank = dist.get_rank(group) if group is not None else dist.get_rank()
    if rank not in (0, 1):
        return kwargs
    sign = 1 if rank == 0 else -1  # rank 0 gains on its own chunk, rank 1 loses on chunk 0
    sent, received = list(sent), list(received)
    sent[0], sent[1] = sent[0] + sign, sent[1] - sign
    received[0], received[1] = received[0] + sign, received[1] - sign
    if min(sent + received) < 0:
        return kwargs  # M01 or M10 is 0: both ranks see it (each holds both), both keep M
    return {**kwargs, "input_split_sizes": sent, "output_split_sizes": received}


def _wrapped(dist, injector: Injector, name: str, real, result):
    slowdown = _Slowdown()

    @functools.wraps(real)
    def call(*args, **kwargs):
        fault = injector.action(*WRAPPING)
        if fault is None:
            return real(*args, **kwargs)
        if fault.action == "slow":
            done = real(*args, **kwargs)
            if done is not None and hasattr(done, "wait"):
                done.wait()
            slowdown.after(fault.seconds, name, real, args, kwargs)
            return done
        if fault.action in ("delay", *VISITED):
            time.sleep(fault.seconds)
            return real(*args, **kwargs)
        if fault.action == "late":
            done = real(*args, **kwargs)
            if done is not None and hasattr(done, "wait"):
                done.wait()
            if injector.late_now(fault):
                time.sleep(fault.seconds)
            return done
        if fault.action == "noop":
            return _Done() if kwargs.get("async_op") else None
        group = kwargs.get("group")
        if fault.action == "splits":
            return real(*args, **_wrong_splits(dist, group, kwargs))
        parts = _group_size(dist, group)
        if fault.action == "neighbour" and name.startswith("reduce_scatter"):
            # Reduce the next rank's chunk: rank r's output is chunk r+1 of the result.
            output, source = args[0], args[1]
            rolled = source.roll(-output.numel())
            return real(output, rolled, *args[2:], **kwargs)
        done = real(*args, **kwargs)
        if done is not None and hasattr(done, "wait"):
            done.wait()
        if result is not None and len(args) > result and args[result] is not None:
            target = args[result]
            _disturb(list(target) if isinstance(target, list) else [target], fault.action,
                     parts)
        return done

    return call
