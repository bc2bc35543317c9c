"""broadcast: every rank ends with the root's buffer."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, OpContext


class Broadcast(Collective):
    name = "broadcast"
    summary = "Time broadcast from --root to every rank."
    rooted = True
    in_place_only = True
    gloo_cuda = True
    factor_text = "1"

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        # Only the root holds the data; the others start from 0, so a no-op cannot pass.
        bufs.recv.zero_()
        if ctx.rank == ctx.root:
            data.fill(bufs.recv, data.plain_values(ctx.root, ctx.dtype))

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        return data.count_wrong(bufs.recv, data.plain_values(ctx.root, ctx.dtype))

    def sources(self, ctx: OpContext) -> int:
        return 1

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        return functools.partial(dist.broadcast, bufs.recv, src=ctx.global_rank(ctx.root),
                                 group=ctx.group)


COLLECTIVE = Broadcast()
