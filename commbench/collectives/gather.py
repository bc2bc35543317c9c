"""gather: the root ends with every rank's chunk, in rank order."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, ring_factor


class Gather(Collective):
    name = "gather"
    summary = "Time gather to --root; the size is the root's gathered buffer."
    rooted = True
    splits = True
    factor_text = "(n-1)/n"

    factor = staticmethod(ring_factor)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=count // ctx.world, recv=count if ctx.rank == ctx.root else 1)

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        if ctx.rank != ctx.root:
            return 0
        chunk = bufs.send.numel()
        return sum(
            data.count_wrong(bufs.recv[src * chunk : (src + 1) * chunk],
                             data.plain_values(src, ctx.dtype))
            for src in range(ctx.world)
        )

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        slots = list(bufs.recv.chunk(ctx.world)) if ctx.rank == ctx.root else None
        return functools.partial(dist.gather, bufs.send, slots, dst=ctx.global_rank(ctx.root),
                                 group=ctx.group)


COLLECTIVE = Gather()
