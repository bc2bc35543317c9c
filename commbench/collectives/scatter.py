"""scatter: rank r ends with chunk r of the root's buffer."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, ring_factor


class Scatter(Collective):
    name = "scatter"
    summary = "Time scatter from --root; the size is the root's buffer to scatter."
    rooted = True
    splits = True
    factor_text = "(n-1)/n"

    factor = staticmethod(ring_factor)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=count if ctx.rank == ctx.root else 1, recv=count // ctx.world)

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        # Chunk r of the root's buffer is rank r's own progression.
        bufs.recv.zero_()
        if ctx.rank == ctx.root:
            chunk = bufs.recv.numel()
            for dst in range(ctx.world):
                data.fill(bufs.send[dst * chunk : (dst + 1) * chunk],
                          data.plain_values(dst, ctx.dtype))

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        return data.count_wrong(bufs.recv, data.plain_values(ctx.rank, ctx.dtype))

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        slots = list(bufs.send.chunk(ctx.world)) if ctx.rank == ctx.root else None
        return functools.partial(dist.scatter, bufs.recv, slots, src=ctx.global_rank(ctx.root),
                                 group=ctx.group)


COLLECTIVE = Scatter()
