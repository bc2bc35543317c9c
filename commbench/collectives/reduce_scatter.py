"""reduce-scatter: rank r ends with chunk r of the reduction of all ranks' inputs."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, ring_factor
from commbench.core import compat


class ReduceScatter(Collective):
    name = "reduce-scatter"
    summary = "Time reduce_scatter (single-tensor form); the size is the input."
    reduces = True
    splits = True
    has_in_place = True
    factor_text = "(n-1)/n"

    factor = staticmethod(ring_factor)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        # The input is the largest buffer; the output is one rank's chunk of it.
        return Layout(send=count, recv=0 if ctx.inplace else count // ctx.world)

    def views(self, ctx, send, recv, count):
        chunk = count // ctx.world
        inp = send[:count]
        if ctx.inplace:
            out = inp[ctx.rank * chunk : (ctx.rank + 1) * chunk]
            return Buffers(send=inp, recv=out, count=count)
        return Buffers(send=inp, recv=recv[:chunk], count=count)

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        if not ctx.inplace:
            bufs.recv.zero_()
        data.fill(bufs.send, self.input_values(ctx, bufs.count))

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        start = ctx.rank * bufs.recv.numel()
        return data.count_wrong(bufs.recv, self.pattern(ctx, bufs.count).result(), start)

    def checked(self, ctx: OpContext, count: int) -> dict[int, tuple[int, int]]:
        chunk = count // ctx.world
        return {rank: (rank * chunk, chunk) for rank in range(ctx.world)}

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        scatter = compat.reduce_scatter_single(dist)
        return functools.partial(scatter, bufs.recv, bufs.send, op=ctx.torch_op, group=ctx.group)


COLLECTIVE = ReduceScatter()
