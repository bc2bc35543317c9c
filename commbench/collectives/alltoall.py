"""alltoall: chunk j of rank i's send buffer lands in chunk i of rank j's receive buffer."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, ring_factor


class AllToAll(Collective):
    name = "alltoall"
    summary = "Time all_to_all_single; the size is the send buffer."
    splits = True
    factor_text = "(n-1)/n"

    factor = staticmethod(ring_factor)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=count, recv=count)

    @staticmethod
    def _key(sender: int, receiver: int, world: int) -> int:
        """Each (sender, receiver) chunk has its own progression, so a chunk delivered to the
        wrong rank or from the wrong rank is caught."""
        return sender * world + receiver

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        bufs.recv.zero_()
        chunk = bufs.send.numel() // ctx.world
        for dst in range(ctx.world):
            values = data.plain_values(self._key(ctx.rank, dst, ctx.world), ctx.dtype)
            data.fill(bufs.send[dst * chunk : (dst + 1) * chunk], values)

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        chunk = bufs.recv.numel() // ctx.world
        return sum(
            data.count_wrong(bufs.recv[src * chunk : (src + 1) * chunk],
                             data.plain_values(self._key(src, ctx.rank, ctx.world), ctx.dtype))
            for src in range(ctx.world)
        )

    def sources(self, ctx: OpContext) -> int:
        return ctx.world * ctx.world

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        return functools.partial(dist.all_to_all_single, bufs.recv, bufs.send, group=ctx.group)


COLLECTIVE = AllToAll()
