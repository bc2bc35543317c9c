"""From one size's measurement to one results row: statistics, bandwidths, slowest rank, skew.

Pure: numbers in, a Row out, so every formula here is tested without starting a process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench import collectives
from commbench.collectives.base import Collective, OpContext
from commbench.engine.sampling import Measurement
from commbench.results.schema import Row
from commbench.stats import instability, summarize


@dataclass(frozen=True)
class RowContext:
    """What a row says about the run around the measurement."""

    backend: str
    device: str
    nnodes: int
    dtype: str
    itemsize: int
    root: int
    timer: str = "host"


def build_row(op: Collective, ctx: OpContext, where: RowContext, count: int,
              measurement: Measurement, messages: int, wrong: int) -> Row:
    """``messages``: transfers per iteration (a pingpong round trip is 2); a row reports the
    time of one."""
    per_rank_us = measurement.per_rank / messages * 1e6
    samples_us = per_rank_us.max(axis=0)
    stats = summarize(samples_us)
    size_bytes = count * where.itemsize
    algbw = size_bytes / (stats.p50 * 1e-6) / 1e9 if stats.p50 > 0 else 0.0
    rank_medians = np.median(per_rank_us, axis=1)
    slowest = int(np.argmax(rank_medians))
    top = float(rank_medians[slowest])
    skew = (top - float(rank_medians.min())) / top * 100 if top > 0 else 0.0
    return Row(
        op=collectives.row_name(op.name),
        backend=where.backend,
        device=where.device,
        world_size=ctx.world,
        nnodes=where.nnodes,
        dtype=where.dtype,
        reduce_op=ctx.reduce_op if op.reduces else "",
        inplace=op.is_in_place(ctx),
        size_bytes=size_bytes,
        count=count,
        iters=measurement.iters,
        samples=int(samples_us.size),
        **stats.as_columns(),
        algbw_gbps=algbw,
        busbw_gbps=algbw * op.busbw_factor(ctx.world, ctx.pattern),
        wrong=wrong,
        slowest_rank=slowest,
        skew_pct=skew,
        group_size=ctx.world,
        groups=1,
        span="intra-node" if where.nnodes == 1 else "inter-node",
        pattern=ctx.pattern,
        root=where.root if op.rooted else None,
        unstable=instability(stats.p50, stats.p99, stats.ci_lo, stats.ci_hi),
        timer=where.timer,
        samples_us=[round(float(s), 4) for s in samples_us],
    )
