"""allreduce: every rank ends with the reduction of all inputs (in place, torch's only form)."""

from __future__ import annotations

import functools

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, OpContext


class AllReduce(Collective):
    name = "allreduce"
    summary = "Time all_reduce: every rank gets the reduction of all ranks' buffers."
    reduces = True
    in_place_only = True
    gloo_cuda = True
    factor_text = "2(n-1)/n"

    # Ring allreduce = reduce-scatter + allgather: each rank moves 2(n-1)/n of the data.
    factor = staticmethod(lambda world: 2 * (world - 1) / world)

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        return data.count_wrong(bufs.recv, self.pattern(ctx, bufs.count).result())

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        return functools.partial(dist.all_reduce, bufs.recv, op=ctx.torch_op, group=ctx.group)


COLLECTIVE = AllReduce()
