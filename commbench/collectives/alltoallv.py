"""alltoallv: all_to_all_single with uneven split sizes, as an MoE layer's token dispatch.

Who sends how much to whom is a routing (collectives/routing.py: uniform, zipf:S, hot:K:F or
file:PATH over --experts, --topk and --tokens, seeded by --routing-seed), drawn the same on
every rank; a size is the mean bytes a rank sends, and its split matrix is the routing's
weights apportioned to it. ``--combine`` measures the way back too (each rank returns what it
received: the transpose), as a second variant (rows with pattern ``combine``).

Validation is exact and tells every chunk apart: the chunk rank i sends rank j holds the
progression of the key (i, j) (data.plain_values), from its first element, so a chunk from the
wrong source, an element out of place, a chunk cut at the wrong split size, or one that never
arrived (outputs start at 0, which no progression holds) is counted.

busbw follows nccl-tests 2.19 (src/alltoallv.cu, AlltoAllvGetBw): bandwidth of the busiest
rank's bytes, max over ranks of max(sent, received), times (n-1)/n. Here algbw stays size /
time (the mean a rank sends, docs/commands/alltoallv.md#metrics), so busbw = algbw x imbalance x
(n-1)/n, the same number as nccl-tests' max_bytes / time x (n-1)/n.
"""

from __future__ import annotations

import functools
from typing import Any

from commbench.collectives import data
from commbench.collectives import routing as routes
from commbench.collectives.base import (
    Buffers,
    Collective,
    Layout,
    OpContext,
    OpOption,
    ring_factor,
)
from commbench.core.dtypes import ITEMSIZE
from commbench.core.errors import UsageError

UNIFORM = routes.Routing("uniform")
DISPATCH, COMBINE = "dispatch", "combine"
DEFAULT_EXPERTS = 64
DEFAULT_TOPK = 2
DEFAULT_TOKENS = 4096

OPTIONS = (
    OpOption("routing", ("--routing",), str, None,
             "Who sends how much to whom: uniform (default: the even split), zipf:S (expert "
             "popularity ~ 1/rank^S), hot:K:F (K hot experts take a share F of the gate), or "
             "file:PATH (a W x W matrix of bytes, CSV).", parse=routes.parse_routing),
    OpOption("experts", ("--experts",), int, DEFAULT_EXPERTS,
             "Experts over the group's ranks, contiguous blocks (expert e on rank e*W/E)."),
    OpOption("topk", ("--topk",), int, DEFAULT_TOPK,
             "Distinct experts each token goes to (top-k gating)."),
    OpOption("tokens", ("--tokens",), int, DEFAULT_TOKENS,
             "Tokens each rank's gate routes when the matrix is drawn; a size scales it."),
    OpOption("hidden", ("--hidden",), int, None,
             "Elements per token: every chunk is whole tokens, and every size a whole "
             "number of them (default: any whole element)."),
    OpOption("combine", ("--combine",), bool, False,
             "Also measure the way back (each rank returns what it received), as rows with "
             "pattern combine; needs --routing."),
    OpOption("routing_seed", ("--routing-seed",), int, 0,
             "Seed of the drawn routings: the same seed, the same matrix on every rank."),
)


def _settings(options: dict) -> tuple[routes.Routing, int, int, int, int]:
    """(routing, experts, topk, tokens, seed) from the op's options, defaults filled in."""
    return (options.get("routing") or UNIFORM,
            int(options.get("experts", DEFAULT_EXPERTS)),
            int(options.get("topk", DEFAULT_TOPK)),
            int(options.get("tokens", DEFAULT_TOKENS)),
            int(options.get("routing_seed", 0)))


def group_sizes(spec: Any, world: int) -> tuple[int, ...]:
    """The group sizes a run measures the op in: each --dim's, or the whole world."""
    mesh = dict(spec.mesh)
    return tuple(dict.fromkeys(mesh[dim] for dim in spec.dims)) if spec.dims else (world,)


class AllToAllV(Collective):
    name = "alltoallv"
    summary = ("Time all_to_all_single with uneven splits, as an MoE layer's dispatch routes "
               "tokens (--routing); the size is the mean send buffer.")
    splits = True  # a uniform routing at a count divisible by n is alltoall's even split
    factor_text = "(n-1)/n x imbalance (nccl-tests 2.19 alltoallv)"
    factor = staticmethod(ring_factor)  # without a routing: model and importers use this
    options = OPTIONS
    in_runs = False  # its routing options are its own command's: `run` does not offer them
    # A call ends when its busiest rank has everything: nccl-tests 2.19 advises -a 3 (the max
    # over ranks) for alltoallv, as the average hides the ranks that wait on the hot one.
    option_defaults = (("rank_time", "max"),)

    # ---- the routing ------------------------------------------------------------------------
    def weights(self, ctx: OpContext) -> routes.Matrix:
        """The routing's W x W weights for this group (token copies, or a file's bytes)."""
        routing, experts, topk, tokens, seed = _settings(dict(ctx.options))
        return routes.routing_weights(routing, experts, topk, tokens, ctx.world, seed)

    def splits_at(self, ctx: OpContext, count: int) -> routes.Matrix:
        """Elements rank i sends rank j at this size, in this variant (combine: transposed)."""
        unit = int(ctx.option("hidden") or 1)
        matrix = routes.split_matrix(self.weights(ctx), count, unit)
        return routes.transpose(matrix) if ctx.pattern == COMBINE else matrix

    def variants(self, patterns: tuple[str, ...], options=()) -> tuple[str, ...]:
        return (DISPATCH, COMBINE) if dict(options).get("combine") else (DISPATCH,)

    def refuse(self, spec: Any, world: int) -> None:
        options = dict(spec.op_options)
        if options.get("combine") and options.get("routing") is None:
            raise UsageError("--combine measures the way back of a routing: give --routing "
                             "too (uniform's way back is its dispatch)")
        routing, experts, topk, tokens, _ = _settings(options)
        for group in group_sizes(spec, world):
            routes.refuse(routing, experts, topk, tokens, group)
        hidden = options.get("hidden")
        if hidden is None:
            return
        if hidden < 1:
            raise UsageError(f"bad --hidden {hidden}: a token has at least 1 element")
        itemsize = ITEMSIZE[spec.dtype]
        for size in spec.sizes:
            for group in group_sizes(spec, world):
                if self.count_for(size, itemsize, group) % hidden:
                    token = hidden * itemsize
                    raise UsageError(f"--hidden {hidden}: a token is {token} B of {spec.dtype}, "
                                     f"and size {size} B is not whole tokens; use multiples "
                                     f"of {token * group} B (tokens for each of {group} ranks)")

    def run_files(self, spec: Any, world: int) -> dict[str, str]:
        """splits-<id>.csv: the weights of every group size's routing, with how they were
        drawn; ``--routing file:`` reads one back (the same weights, the same id)."""
        routing, experts, topk, tokens, seed = _settings(dict(spec.op_options))
        files = {}
        for group in group_sizes(spec, world):
            weights = routes.routing_weights(routing, experts, topk, tokens, group, seed)
            drawn = ("" if routing.kind in ("uniform", "file") else
                     f", {experts} experts, top-{topk}, {tokens} tokens per rank, "
                     f"--routing-seed {seed}")
            files[f"splits-{routes.matrix_id(weights)}.csv"] = (
                f"# alltoallv split weights {routes.matrix_id(weights)}: --routing "
                f"{routing.text}{drawn}, {group} ranks\n"
                "# row i, column j: what rank i sends rank j (dispatch; combine sends the "
                "transpose); each size apportions its elements in proportion\n"
                + routes.matrix_text(weights))
        return files

    # ---- buffers ------------------------------------------------------------------------------
    def layout(self, ctx: OpContext, count: int) -> Layout:
        """What this rank sends and receives at ``count``, plus 2·W tokens: a smaller size's
        apportioned chunks are within two units of their share at the largest size, so
        buffers allocated at the largest size hold every smaller one."""
        matrix = self.splits_at(ctx, count)
        slack = 2 * ctx.world * int(ctx.option("hidden") or 1)
        return Layout(send=sum(matrix[ctx.rank]) + slack,
                      recv=sum(row[ctx.rank] for row in matrix) + slack)

    def views(self, ctx: OpContext, send, recv, count: int) -> Buffers:
        matrix = self.splits_at(ctx, count)
        sent, received = sum(matrix[ctx.rank]), sum(row[ctx.rank] for row in matrix)
        return Buffers(send=send[:sent], recv=recv[:received], count=count)

    # ---- rows ---------------------------------------------------------------------------------
    def busbw_factor_at(self, ctx: OpContext, count: int) -> float:
        return ring_factor(ctx.world) * routes.imbalance(self.splits_at(ctx, count))

    def row_extras(self, ctx: OpContext, count: int) -> dict[str, Any]:
        matrix = self.splits_at(ctx, count)
        return {"max_rank_bytes": routes.busiest(matrix) * ITEMSIZE[ctx.dtype],
                "imbalance": round(routes.imbalance(matrix), 6),
                "split_id": routes.matrix_id(self.weights(ctx))}

    # ---- exact inputs and results -----------------------------------------------------------
    @staticmethod
    def _key(sender: int, receiver: int, world: int) -> int:
        return sender * world + receiver

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        bufs.recv.zero_()
        offset = 0
        for dst, elements in enumerate(self.splits_at(ctx, bufs.count)[ctx.rank]):
            values = data.plain_values(self._key(ctx.rank, dst, ctx.world), ctx.dtype)
            data.fill(bufs.send[offset:offset + elements], values)
            offset += elements

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        wrong, offset = 0, 0
        for src, row in enumerate(self.splits_at(ctx, bufs.count)):
            elements = row[ctx.rank]
            values = data.plain_values(self._key(src, ctx.rank, ctx.world), ctx.dtype)
            wrong += data.count_wrong(bufs.recv[offset:offset + elements], values)
            offset += elements
        return wrong

    def sources(self, ctx: OpContext) -> int:
        return ctx.world * ctx.world

    def validation(self, ctx: OpContext, count: int) -> str:
        chunks = [v for row in self.splits_at(ctx, count) for v in row if v]
        return data.plain_status(self.sources(ctx), min(chunks, default=1), ctx.dtype)

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        matrix = self.splits_at(ctx, bufs.count)
        return functools.partial(
            dist.all_to_all_single, bufs.recv, bufs.send,
            output_split_sizes=[row[ctx.rank] for row in matrix],
            input_split_sizes=list(matrix[ctx.rank]), group=ctx.group)


COLLECTIVE = AllToAllV()
