"""From one size's measurement to one results row: statistics, bandwidths, slowest rank, skew.

Pure: numbers in, a Row out, so every formula here is tested without starting a process.

Per-rank times combine as ``--rank-time`` says (nccl-tests ``-a``), over the ranks that take
part (a rank left out of every p2p pair is not waiting for anything and would pull an average
down or a minimum to zero):

- the mean from each rank's loop total / iterations, then combined, as nccl-tests does;
- the median and its interval from blocks, each block's per-rank times combined;
- min, p10, p90, p99, max and std from single calls, each call's per-rank times combined,
  where the timer times single calls (``tail = call``), else from blocks (``tail = block``);
- measured in interleaved rounds (--rounds), the median's interval is the bootstrap over
  rounds (stats.rounds_interval): the spread between rounds, not only within one window;
- with --per-call, p95, CV, spikes and stragglers over every call (core.percall), and the
  calls themselves as a results.calls.CallBatch for rank 0's sink (``call_batch``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from commbench import collectives
from commbench.collectives.base import Collective, OpContext
from commbench.core.percall import call_stats
from commbench.core.stats import (
    UNSTABLE_TAIL_SHARE,
    combine_ranks,
    instability,
    rounds_interval,
    summarize,
)
from commbench.measure.sampling import Measurement
from commbench.results.calls import CallBatch
from commbench.results.schema import Row


@dataclass(frozen=True)
class RowContext:
    """What a row says about the run around the measurement."""

    backend: str
    device: str
    nnodes: int
    dtype: str
    itemsize: int
    root: int
    rank_time: str = "avg"
    timer: str = "host"
    mesh: str = ""
    dim: str = ""
    groups: int = 1
    span: str = ""
    peers: str = ""


def build_row(op: Collective, ctx: OpContext, where: RowContext, count: int,
              measurement: Measurement, messages: int, wrong: int, *,
              active: np.ndarray | None = None, validation: str = "") -> Row:
    """``messages``: transfers per iteration (a pingpong round trip is 2; a row reports the
    time of one). ``active``: which ranks (rows of the measurement) take part; default all."""
    total = measurement.per_rank.shape[0]
    active = np.ones(total, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    mode = where.rank_time
    scale = 1e6 / messages
    samples_us = combine_ranks(measurement.per_rank[active] * scale, mode)
    means_us = measurement.rank_means()[active] * scale
    tail_us = None
    if measurement.calls is not None:
        tail_us = combine_ranks(measurement.calls[active] * scale, mode)
    stats = summarize(samples_us, tail_us, float(combine_ranks(means_us, mode)))
    rounds = measurement.rounds if len(measurement.rounds) >= 2 else ()
    if rounds:
        low, high = rounds_interval(samples_us, rounds)
        stats = replace(stats, ci_lo=min(low, stats.p50), ci_hi=max(high, stats.p50))
    size_bytes = count * where.itemsize
    algbw = size_bytes / (stats.p50 * 1e-6) / 1e9 if stats.p50 > 0 else 0.0
    slowest = int(np.argmax(means_us))
    top = float(means_us[slowest])
    skew = (top - float(means_us.min())) / top * 100 if top > 0 else 0.0
    row = Row(
        op=collectives.row_name(op.name),
        backend=where.backend,
        device=where.device,
        world_size=total,
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
        busbw_gbps=algbw * op.busbw_factor_at(ctx, count),
        wrong=wrong,
        slowest_rank=int(np.flatnonzero(active)[slowest]),
        skew_pct=skew,
        rank_time=mode,
        validation=validation,
        mesh=where.mesh,
        dim=where.dim,
        group_size=ctx.world,
        groups=where.groups,
        span=where.span,
        pattern=ctx.pattern,
        root=where.root if op.rooted else None,
        # Judged on blocks: single calls of a busy machine always have a long tail.
        unstable=instability(stats.p50,
                             float(np.percentile(samples_us, UNSTABLE_TAIL_SHARE)),
                             stats.ci_lo, stats.ci_hi),
        tail="call" if tail_us is not None else "block",
        peers=where.peers,
        timer=where.timer,
        msg_rate=(op.concurrent_messages(ctx) / (stats.p50 * 1e-6) if stats.p50 > 0 else 0.0),
        samples_us=[round(float(s), 4) for s in samples_us],
        rounds=max(1, len(rounds)),
        round_samples=list(rounds),
        round_p50_us=[round(float(np.median(part)), 4)
                      for part in np.split(samples_us, np.cumsum(rounds)[:-1])] if rounds else [],
    )
    if measurement.call_late is not None and tail_us is not None:
        stats = call_stats(tail_us, measurement.call_late[active] * scale,
                           ranks=np.flatnonzero(active))
        row = replace(row, **stats.as_columns())
    return replace(row, **op.row_extras(ctx, count))  # the op's own columns (alltoallv's)


def call_batch(op: Collective, ctx: OpContext, where: RowContext, count: int,
               measurement: Measurement) -> CallBatch | None:
    """--per-call: every call of every rank, as timed (a pingpong call is its round trip),
    for the calls file; None when the measurement kept no calls."""
    if measurement.call_late is None or measurement.calls is None:
        return None
    return CallBatch(op=collectives.row_name(op.name), pattern=ctx.pattern,
                     backend=where.backend, dim=where.dim, inplace=op.is_in_place(ctx),
                     size_bytes=count * where.itemsize, rounds=measurement.call_rounds,
                     time_us=measurement.calls * 1e6, late_us=measurement.call_late * 1e6)
