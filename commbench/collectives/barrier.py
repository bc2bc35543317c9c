"""barrier: no data, only the latency of every rank arriving."""

from __future__ import annotations

import functools

from commbench.collectives.base import Buffers, Collective, OpContext


class Barrier(Collective):
    name = "barrier"
    summary = "Time barrier latency (no sizes)."
    sized = False
    gloo_cuda = True
    # torch's barrier synchronises the host: it cannot be captured in a CUDA graph.
    graph_capturable = False
    factor_text = "0 (no data)"

    factor = staticmethod(lambda world: 0.0)

    def count_for(self, size_bytes: int, itemsize: int, world: int) -> int:
        return 0

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        pass

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        return 0

    def validation(self, ctx: OpContext, count: int) -> str:
        return "off: a barrier moves no data"

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        return functools.partial(dist.barrier, group=ctx.group)


COLLECTIVE = Barrier()
