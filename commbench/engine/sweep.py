"""The per-rank sweep: every (backend, op, variant, size) of a MeasureSpec, measured, checked and
turned into rows that rank 0 hands to the sink it was given.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from commbench import collectives
from commbench.collectives.base import Collective, OpContext
from commbench.config import ITEMSIZE, MeasureSpec
from commbench.engine.failures import RankFailure, diagnose, injected_fault
from commbench.engine.rows import RowContext, build_row
from commbench.engine.sampling import Budget, measure
from commbench.engine.session import Session
from commbench.engine.timers import CudaEventTimer, CudaGraphTimer, HostTimer
from commbench.sizes import format_size

REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}


def plan(spec: MeasureSpec) -> list[tuple[str, Collective, str]]:
    """(backend, op, variant) in the order they run."""
    return [
        (backend, collectives.get(name), variant)
        for backend in spec.backends
        for name in spec.ops
        for variant in collectives.get(name).variants(spec.patterns)
    ]


def counts_for(op: Collective, spec: MeasureSpec, world: int) -> list[int]:
    """Element counts of the sweep (sizes rounded to whole elements); [0] for unsized ops."""
    if not op.sized:
        return [0]
    itemsize = ITEMSIZE[spec.dtype]
    return sorted({op.count_for(size, itemsize, world) for size in spec.sizes})


class Sweep:
    def __init__(self, session: Session, spec: MeasureSpec, sink) -> None:
        self.session = session
        self.spec = spec
        self.sink = sink  # rank 0 only; None elsewhere
        self.position = "rendezvous"
        self.wrong_total = 0

    def planned_rows(self) -> int:
        return sum(len(counts_for(op, self.spec, self.session.world))
                   for _, op, _ in plan(self.spec))

    def run(self) -> int:
        """Measure everything; returns the number of wrong elements over all rows."""
        for backend, op, variant in plan(self.spec):
            self._measure_op(backend, op, variant)
        return self.wrong_total

    def _measure_op(self, backend: str, op: Collective, pattern: str) -> None:
        spec, session = self.spec, self.session
        device = spec.device_for(backend)
        ctx = OpContext(
            rank=session.rank,
            world=session.world,
            group=session.group_for(backend),
            dtype=spec.dtype,
            reduce_op=spec.reduce_op,
            torch_op=REDUCE_OPS[spec.reduce_op],
            root=spec.root,
            inplace=spec.inplace,
            pattern=pattern,
        )
        itemsize = ITEMSIZE[spec.dtype]
        counts = self._fitting(op, ctx, device, counts_for(op, spec, session.world))
        largest = op.layout(ctx, counts[-1]) if counts else None
        dtype = getattr(torch, spec.dtype)
        # Allocated once for the largest size; every size is a view (SPEC §4).
        send = torch.empty(largest.send if largest else 0, dtype=dtype, device=device)
        recv = torch.empty(largest.recv if largest else 0, dtype=dtype, device=device)
        timer = self._timer(device)
        budget = Budget(min_time=spec.min_time, iters=spec.iters, warmup=spec.warmup)
        where = RowContext(backend=backend, device=device, nnodes=session.nnodes,
                           dtype=spec.dtype, itemsize=itemsize, root=spec.root)
        for count in counts:
            size_bytes = count * itemsize
            label = f"{op.name}/{pattern}" if pattern else op.name
            self.position = f"{label} at {format_size(size_bytes) if count else '-'} ({backend})"
            session.at(self.position)
            if self.sink is not None:
                self.sink.position(self.position)
            started = time.perf_counter()
            fault = injected_fault(session.rank, op.name, size_bytes)
            if fault == "raise":
                raise RankFailure("error", f"injected fault in {self.position}")
            try:
                bufs = op.views(ctx, send, recv, count)
                op.prepare(ctx, bufs)
                measurement = measure(op.call(ctx, bufs), timer, session.control, budget)
                corrupt = fault == "corrupt"
                wrong = self._check(op, ctx, bufs, corrupt) if spec.check else 0
            except RankFailure:
                raise
            except Exception as error:
                raise diagnose(error, self.position, session.watch, spec.timeout) from None
            self.wrong_total += wrong
            if self.sink is not None:
                messages = op.messages_per_iteration(ctx, bufs)
                row = build_row(op, ctx, where, count, measurement, messages, wrong)
                row.wall_s = round(time.perf_counter() - started, 4)
                self.sink.row(row.to_dict())

    def _fitting(self, op: Collective, ctx: OpContext, device: str,
                 counts: list[int]) -> list[int]:
        """On GPUs, cap the sweep by free device memory (nccl-tests caps maxBytes likewise)."""
        if device != "cuda" or not counts:
            return counts
        torch.cuda.empty_cache()  # the previous op's buffers are free, but still cached
        free = float(self.session.control.gather([torch.cuda.mem_get_info()[0]]).min())
        itemsize = ITEMSIZE[self.spec.dtype]
        fitting = [c for c in counts
                   if op.bytes_needed(ctx, c, itemsize) <= 0.9 * free - (256 << 20)]
        if len(fitting) < len(counts) and self.sink is not None:
            skipped = ", ".join(format_size(c * itemsize) for c in counts[len(fitting) :])
            self.sink.note(f"skipping {op.name} sizes that do not fit in GPU memory: {skipped}")
        return fitting

    def _timer(self, device: str):
        if device != "cuda":
            return HostTimer()
        if self.spec.host_timer:
            return HostTimer(sync=torch.cuda.synchronize)
        if self.spec.cuda_graph:
            return CudaGraphTimer()
        return CudaEventTimer(blocking=self.spec.blocking)

    def _check(self, op: Collective, ctx: OpContext, bufs, corrupt: bool = False) -> int:
        """Outside the timed loop: fresh inputs, one call, every element compared."""
        op.prepare(ctx, bufs)
        self.session.control.barrier()
        op.call(ctx, bufs)()
        if bufs.recv.is_cuda:
            torch.cuda.synchronize()
        if corrupt:
            bufs.recv.view(-1)[0] += 1
        return self.session.control.total(op.wrong(ctx, bufs))
