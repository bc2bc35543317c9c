"""ps's descriptor: the ParameterServer workload (roles, layout, exact inputs and results,
counters and rows, the call). The steps on the wire are in synchronous.py and asynchronous.py,
its options in options.py, its formulas in formulas.py; the package's __init__ holds the one
instance the registry reads (``COLLECTIVE``).
"""

from __future__ import annotations

from typing import Any

from commbench.collectives import data
from commbench.collectives.allreduce import COLLECTIVE as ALLREDUCE
from commbench.collectives.base import (
    Buffers,
    Layout,
    OpContext,
    backend_of,
)
from commbench.collectives.p2p import _open_communicator
from commbench.collectives.ps import asynchronous as ps_async
from commbench.collectives.ps import options as ps_options
from commbench.collectives.ps import synchronous as ps_sync
from commbench.collectives.ps.formulas import async_reduced_gbps, reduced_gbps, roles
from commbench.collectives.ps.options import modes_of
from commbench.collectives.ps.synchronous import Counted, shard_bounds
from commbench.collectives.workload import Workload
from commbench.core.dtypes import ITEMSIZE

BASELINE = "allreduce"  # the variant that measures allreduce over the workers


def partition_elements(ctx: OpContext) -> int:
    """Elements of one partition (``--partition`` bytes, parsed by the CLI)."""
    return max(1, int(ctx.option("partition", 4 << 20)) // ITEMSIZE[ctx.dtype])


class ParameterServer(Workload):
    name = "ps"
    summary = ("Time a sharded parameter server's gradient exchange (W workers, then --servers "
               "S servers), beside allreduce over the W workers.")
    min_world = 2
    factor_text = "max(1, W/S), W workers, S servers"
    in_runs = False
    contended = False  # workers and servers are roles of their own: no --overlap/--background
    options = ps_options.OPTIONS
    # The step ends when the slowest worker has its sum: the max over workers (the servers
    # are left out: see active).
    option_defaults = (("rank_time", "max"),)

    def __init__(self) -> None:
        self._counted = Counted()  # this rank's traffic as a worker ...
        self._served = Counted()  # ... and as a server (both, when colocated)
        self._count = 0  # the size the last bound call runs at
        # async, per size: a server's versions, a worker's clock and stats (ps_async)
        self._books: dict[int, ps_async.VersionBook] = {}
        self._stats: dict[int, ps_async.WorkerStats] = {}

    # ---- roles and options ------------------------------------------------------------------
    def _roles(self, ctx: OpContext) -> tuple[int, int]:
        if self._colocated(ctx):
            return ctx.world, ctx.world
        return roles(ctx.world, int(ctx.option("servers", 1)))

    def _colocated(self, ctx: OpContext) -> bool:
        return bool(ctx.option("colocate", False))

    def _is_baseline(self, ctx: OpContext) -> bool:
        return ctx.pattern == BASELINE

    def _book(self, ctx: OpContext, count: int) -> ps_async.VersionBook:
        if count not in self._books:
            staleness = ctx.option("staleness")
            self._books[count] = ps_async.VersionBook(
                self._roles(ctx)[0], float("inf") if staleness is None else staleness)
        return self._books[count]

    def _worker_stats(self, count: int) -> ps_async.WorkerStats:
        return self._stats.setdefault(count, ps_async.WorkerStats())

    def variants(self, patterns, options=()) -> tuple[str, ...]:
        chosen = dict(options)
        modes = modes_of(chosen.get("mode"))
        return (*modes, BASELINE) if chosen.get("baseline", True) else modes

    def refuse(self, spec: Any, world: int) -> None:
        ps_options.refuse(spec, world)

    def roles_text(self, spec: Any, world: int) -> str:
        servers = int(dict(spec.op_options).get("servers", 1))
        return (f" ({world - servers} worker(s) then {servers} server(s): with nccl every "
                "server rank needs a GPU too)")

    # ---- layout ------------------------------------------------------------------------------
    def _shard(self, ctx: OpContext, count: int) -> tuple[int, int]:
        workers, servers = self._roles(ctx)
        own = ctx.rank if self._colocated(ctx) else ctx.rank - workers
        return shard_bounds(count, servers)[own]

    def layout(self, ctx: OpContext, count: int) -> Layout:
        workers, _ = self._roles(ctx)
        if self._colocated(ctx) and not self._is_baseline(ctx):
            start, stop = self._shard(ctx, count)  # gradient + the sum, result + W-1 slots
            return Layout(send=count + stop - start, recv=count + (workers - 1) * (stop - start))
        if ctx.rank < workers:
            return Layout(send=0, recv=count) if self._is_baseline(ctx) else Layout(count, count)
        if self._is_baseline(ctx):
            return Layout(send=0, recv=0)
        start, stop = self._shard(ctx, count)
        if ctx.pattern == "async":  # the shard's parameters, one push arriving
            return Layout(send=stop - start, recv=stop - start)
        return Layout(send=stop - start, recv=workers * (stop - start))  # sum, W slots

    def views(self, ctx: OpContext, send, recv, count: int) -> Buffers:
        layout = self.layout(ctx, count)
        recv_view = recv[: layout.recv]
        send_view = send[: layout.send] if layout.send else recv_view
        return Buffers(send=send_view, recv=recv_view, count=count)

    def active(self, ctx: OpContext) -> bool:
        """Workers only: a server's loop is not a step of training, and idles in the
        baseline."""
        return ctx.rank < self._roles(ctx)[0]

    def busbw_factor_in(self, ctx: OpContext) -> float:
        workers, servers = self._roles(ctx)
        if self._is_baseline(ctx) or self._colocated(ctx):  # colocated: as RS + AG move
            return ALLREDUCE.busbw_factor(workers)
        return max(1.0, workers / servers)

    # ---- exact inputs and results -----------------------------------------------------------
    def _baseline_ctx(self, ctx: OpContext, group: Any = None) -> OpContext:
        workers, _ = self._roles(ctx)
        return OpContext(rank=ctx.rank, world=workers, group=group, dtype=ctx.dtype,
                         reduce_op="sum", torch_op=ctx.torch_op, backend=backend_of(ctx))

    def _pattern(self, ctx: OpContext, count: int) -> data.ReducePattern:
        workers, _ = self._roles(ctx)
        chunk = min(partition_elements(ctx), max(1, count // max(1, workers)))
        return data.reduce_pattern("sum", ctx.dtype, workers, chunk)

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        self._counted.reset()
        self._served.reset()
        workers, _ = self._roles(ctx)
        if self._is_baseline(ctx):
            if ctx.rank < workers:
                ALLREDUCE.prepare(self._baseline_ctx(ctx), bufs)
            return
        bufs.recv.zero_()
        if self._colocated(ctx):
            bufs.send.zero_()
            data.fill(bufs.send[:bufs.count], self._pattern(ctx, bufs.count).values(ctx.rank))
        elif ctx.rank < workers:
            data.fill(bufs.send, self._pattern(ctx, bufs.count).values(ctx.rank))
            self._worker_stats(bufs.count).clock = 0
        else:
            bufs.send.zero_()
            self._book(ctx, bufs.count).reset()

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        workers, _ = self._roles(ctx)
        if self._is_baseline(ctx):
            return ALLREDUCE.wrong(self._baseline_ctx(ctx), bufs) if ctx.rank < workers else 0
        pattern = self._pattern(ctx, bufs.count)
        if ctx.pattern == "async":
            return self._async_wrong(ctx, bufs, pattern)
        if self._colocated(ctx):
            return self._colocated_wrong(ctx, bufs, pattern)
        if ctx.rank < workers:
            return data.count_wrong(bufs.recv, pattern.result())
        start, stop = self._shard(ctx, bufs.count)
        width = stop - start
        wrong = data.count_wrong(bufs.send, pattern.result(), start)  # the sum it sent back
        for worker in range(workers):  # each worker's slot holds that worker's own input
            slot = bufs.recv[worker * width:(worker + 1) * width]
            wrong += data.count_wrong(slot, pattern.values(worker), start)
        return wrong

    def _colocated_wrong(self, ctx: OpContext, bufs: Buffers,
                         pattern: data.ReducePattern) -> int:
        """The full sum on every rank, its own shard's sum, and the other workers' slots."""
        count = bufs.count
        start, stop = self._shard(ctx, count)
        width = stop - start
        wrong = data.count_wrong(bufs.recv[:count], pattern.result())
        wrong += data.count_wrong(bufs.send[count:], pattern.result(), start)
        others = [w for w in range(ctx.world) if w != ctx.rank]
        for index, worker in enumerate(others):
            slot = bufs.recv[count + index * width:count + (index + 1) * width]
            wrong += data.count_wrong(slot, pattern.values(worker), start)
        return wrong

    def _async_wrong(self, ctx: OpContext, bufs: Buffers, pattern: data.ReducePattern) -> int:
        """A server's shard is the sum of every push of the check's step (all version 0,
        all applied); a worker's pull from server j, the sum of the pushes j had applied."""
        workers, servers = self._roles(ctx)
        if ctx.rank >= workers:
            start, _ = self._shard(ctx, bufs.count)
            return data.count_wrong(bufs.send, pattern.result(), start)
        masks = self._worker_stats(bufs.count).masks
        wrong = 0
        for shard, (start, stop) in enumerate(shard_bounds(bufs.count, servers)):
            mask = masks[shard] if shard < len(masks) else 0
            rows = [w for w in range(workers) if mask >> w & 1]
            expected = pattern.table[rows].sum(axis=0) if rows else 0 * pattern.expected
            subset = data.ReducePattern(pattern.table, expected, pattern.holders, pattern.status)
            wrong += data.count_wrong(bufs.recv[start:stop], subset.result(), start)
        return wrong

    def validation(self, ctx: OpContext, count: int) -> str:
        if self._is_baseline(ctx):
            return ALLREDUCE.validation(self._baseline_ctx(ctx), count)
        return self._pattern(ctx, count).status

    # ---- counters and rows ------------------------------------------------------------------
    def counters(self, ctx: OpContext) -> list[float]:
        """Bytes of the last step; async also this size's steps, step and pull-wait seconds
        (workers), the largest lag and the rejected pushes (servers)."""
        counted = [float(self._counted.tx), float(self._counted.rx), float(self._served.tx),
                   float(self._served.rx)]
        if ctx.pattern != "async":
            return counted
        stats = self._stats.get(self._count, ps_async.WorkerStats())
        book = self._books.get(self._count)
        return [*counted, stats.steps, stats.step_s, stats.wait_s,
                book.max_lag if book else 0, book.rejected if book else 0]

    def row_fields(self, ctx: OpContext, per_rank: Any, time_us: float = 0.0,
                   ) -> dict[str, Any]:
        workers, servers = self._roles(ctx)
        size_bytes = self._count * ITEMSIZE[ctx.dtype]
        fields: dict[str, Any] = {"workers": workers, "servers": servers,
                                  "reduced_gbps": reduced_gbps(size_bytes, workers, time_us)}
        if self._is_baseline(ctx):
            return {**fields, "op": "allreduce", "pattern": "", "reduce_op": "sum",
                    "inplace": True, "group_size": workers}
        worker_rows, server_rows = per_rank[:workers], per_rank[workers:]
        if ctx.option("baseline", True):
            fields["beside"] = BASELINE  # shown beside the allreduce rows (output/baselines)
        fields["partition_bytes"] = int(ctx.option("partition", 0))
        if ctx.pattern == "async":
            bound = ctx.option("staleness")
            fields["staleness_bound"] = -1 if bound is None else int(bound)
            steps, step_s, wait_s = (worker_rows[:, i] for i in (4, 5, 6))
            rates = steps / step_s.clip(min=1e-12)
            fields.update(
                reduced_gbps=async_reduced_gbps(size_bytes, servers, rates,
                                                float(steps.sum()),
                                                float(server_rows[:, 8].sum())),
                steps_per_s=float(rates.mean()),
                pull_wait_us=float((wait_s / steps.clip(min=1)).mean() * 1e6),
                max_staleness=int(server_rows[:, 7].max()),
                rejected_pushes=int(server_rows[:, 8].sum()))
        # The busiest rank of each role (shards differ by an element where n/S is uneven).
        most = per_rank.max(axis=0)
        return {**fields, "worker_tx_bytes": int(most[0]), "worker_rx_bytes": int(most[1]),
                "server_tx_bytes": int(most[2]), "server_rx_bytes": int(most[3])}

    # ---- the call -----------------------------------------------------------------------------
    def subgroups(self, world: int, options=()) -> tuple[tuple[int, ...], ...]:
        """The W workers' group of the allreduce baseline (none with --no-baseline): made by
        the sweep with the run's other groups, before anything is timed."""
        chosen = dict(options)
        if not chosen.get("baseline", True):
            return ()
        workers = world if chosen.get("colocate") else world - int(chosen.get("servers", 1))
        return (tuple(range(workers)),) if workers >= 1 else ()

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        workers, servers = self._roles(ctx)
        self._count = bufs.count  # the size row_fields and counters() report
        if self._is_baseline(ctx):
            group = ctx.subgroup(tuple(range(workers)))
            if ctx.rank >= workers:
                return _idle
            return ALLREDUCE.call(self._baseline_ctx(ctx, group), bufs)
        per_partition = partition_elements(ctx)
        counted, served, group = self._counted, self._served, ctx.group
        if backend_of(ctx) == "nccl":
            _open_communicator(dist, bufs.recv, group)
        if self._colocated(ctx):
            start, stop = self._shard(ctx, bufs.count)
            width, count = stop - start, bufs.count
            others = [w for w in range(ctx.world) if w != ctx.rank]
            slots = {w: bufs.recv[count + i * width:count + (i + 1) * width]
                     for i, w in enumerate(others)}
            return ps_sync.colocated(dist, counted, served, bufs.send[:count],
                                     bufs.recv[:count], bufs.send[count:], slots, ctx.rank,
                                     [ctx.global_rank(r) for r in range(ctx.world)],
                                     per_partition, group)
        if ctx.rank < workers:
            servers_at = [ctx.global_rank(workers + shard) for shard in range(servers)]
            if ctx.pattern == "async":
                return ps_async.worker(dist, counted, self._worker_stats(bufs.count),
                                       bufs.send, bufs.recv, servers_at, per_partition, group)
            return ps_sync.worker(dist, counted, bufs.send, bufs.recv, servers_at,
                                  per_partition, group)
        peers = [ctx.global_rank(w) for w in range(workers)]
        if ctx.pattern == "async":
            return ps_async.server(dist, served, self._book(ctx, bufs.count), bufs.send,
                                   bufs.recv, peers, per_partition, group)
        width = bufs.send.numel()
        slots = [bufs.recv[w * width:(w + 1) * width] for w in range(workers)]
        return ps_sync.server(dist, served, bufs.send, slots, peers, per_partition, group)


def _idle() -> None:
    return None
