"""reduce: the root ends with the reduction of all ranks' buffers."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, OpContext


class Reduce(Collective):
    name = "reduce"
    summary = "Time reduce to --root."
    reduces = True
    rooted = True
    in_place_only = True
    factor_text = "1"

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        # Non-root buffers hold partial results whose content torch does not define.
        if ctx.rank != ctx.root:
            return 0
        return data.count_wrong(bufs.recv, self.pattern(ctx, bufs.count).result())

    def checked(self, ctx: OpContext, count: int) -> dict[int, tuple[int, int]]:
        return {ctx.root: (0, count)}

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        return functools.partial(dist.reduce, bufs.recv, dst=ctx.global_rank(ctx.root),
                                 op=ctx.torch_op, group=ctx.group)


COLLECTIVE = Reduce()
