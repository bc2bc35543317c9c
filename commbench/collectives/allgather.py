"""allgather: every rank ends with all ranks' chunks, concatenated in rank order."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, ring_factor
from commbench.core import compat


class AllGather(Collective):
    name = "allgather"
    summary = "Time all_gather (single-tensor form); the size is the gathered output."
    splits = True
    has_in_place = True
    factor_text = "(n-1)/n"

    factor = staticmethod(ring_factor)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=0 if ctx.inplace else count // ctx.world, recv=count)

    def views(self, ctx, send, recv, count):
        if not ctx.inplace:
            return super().views(ctx, send, recv, count)
        # nccl-tests' in-place form: the input is this rank's slot of the output.
        chunk = count // ctx.world
        out = recv[:count]
        return Buffers(send=out[ctx.rank * chunk : (ctx.rank + 1) * chunk], recv=out, count=count)

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        chunk = bufs.recv.numel() // ctx.world
        return sum(
            data.count_wrong(bufs.recv[src * chunk : (src + 1) * chunk],
                             data.plain_values(src, ctx.dtype))
            for src in range(ctx.world)
        )

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        gather = compat.all_gather_single(dist)
        return functools.partial(gather, bufs.recv, bufs.send, group=ctx.group)


COLLECTIVE = AllGather()
