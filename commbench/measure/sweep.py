"""The per-rank sweep: every (backend, op, variant, size) of a MeasureSpec, measured, checked and
turned into rows that rank 0 hands to the sink it was given.

With ``--rounds N`` an op's sizes are visited in N interleaved rounds (measure.sampling.
SizeRounds holds a size's state between visits) and its rows are handed over after the last
round, with the check; with one round each size is measured, checked and handed over in turn.
Every decision that ends a loop is taken from gathered data, the same on every rank.

With ``--per-call`` rank 0 also hands its sink each size's calls (``sink.calls``: every call of
every rank, results.calls), after the size's row.
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from commbench import collectives
from commbench.collectives import workload
from commbench.collectives.base import Collective, OpContext
from commbench.core.dtypes import ITEMSIZE
from commbench.core.sizes import format_size
from commbench.core.stats import combine_ranks
from commbench.engine.failures import RankFailure, diagnosed
from commbench.engine.faults import Injector
from commbench.engine.session import Groups, Session
from commbench.engine.sinks import RowSink
from commbench.engine.timers import CudaEventTimer, CudaGraphTimer, HostTimer
from commbench.measure import contention
from commbench.measure.progress import Visits
from commbench.measure.rows import RowContext, build_row, call_batch
from commbench.measure.sampling import (
    Budget,
    Measurement,
    SizeRounds,
    measure,
    round_order,
    rounds_done,
    visits_per_size,
    warm_up,
)
from commbench.results.schema import CUT_SHORT
from commbench.specs.measure import MeasureSpec

REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}


def plan(spec: MeasureSpec) -> list[tuple[str, str, Collective, str, bool]]:
    """(backend, mesh dim, op, variant, in place) in the order they run; dim '' is the whole
    world. --both-places runs an op that has both forms out of place, then in place."""
    return [
        (backend, dim, op, variant, inplace)
        for backend in spec.backends
        for dim in (spec.dims or ("",))
        for op in (collectives.get(name) for name in spec.ops)
        for variant in op.variants(spec.patterns, spec.op_options)
        for inplace in places(spec, op)
    ]


def places(spec: MeasureSpec, op: Collective) -> tuple[bool, ...]:
    if spec.both_places and op.has_in_place:
        return (False, True)
    return (spec.inplace,)


def dim_size(spec: MeasureSpec, dim: str, world: int) -> int:
    return dict(spec.mesh)[dim] if dim else world


def mesh_text(mesh: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{name}={size}" for name, size in mesh)


def span_of(members: tuple[tuple[int, ...], ...], nodes: list[tuple]) -> str:
    """intra-node when every group's ranks share a node, inter-node when every group spans
    nodes, mixed otherwise."""
    within = [len({nodes[r] for r in ranks}) == 1 for ranks in members]
    if all(within):
        return "intra-node"
    return "inter-node" if not any(within) else "mixed"


def counts_for(op: Collective, spec: MeasureSpec, world: int) -> list[int]:
    """Element counts of the sweep (sizes rounded to whole elements); [0] for unsized ops."""
    if not op.sized:
        return [0]
    itemsize = ITEMSIZE[spec.dtype]
    return sorted({op.count_for(size, itemsize, world) for size in spec.sizes})


def peers_text(pairs: tuple[tuple[int, int], ...]) -> str:
    return ",".join(f"{a}:{b}" for a, b in pairs)


@dataclass
class _Size:
    """One size of an op while it is measured: its views, its measurement, its wall time."""

    count: int
    size_bytes: int
    bufs: object = None
    measurement: Measurement | None = None
    wall_s: float = 0.0  # warm-up, calibration, timing and check, over all its visits
    extras: dict = field(default_factory=dict)  # contention columns (measure.contention)


class Sweep:
    def __init__(self, session: Session, spec: MeasureSpec, sink: RowSink | None,
                 injector: Injector | None = None) -> None:
        self.session = session
        self.spec = spec
        self.sink = sink  # rank 0 only; None elsewhere
        self.injector = injector or Injector(session.rank, [])
        self.position = "rendezvous"
        self._noted: set[str] = set()
        self._warm: set[tuple[str, str]] = set()  # (backend, dim) groups warmed up
        self._backend, self._dim = "", ""  # what _measure_op is measuring now
        self._inplace = spec.inplace
        self.visits = Visits(sink, 0)
        self.background: contention.Background | None = None

    def planned_visits(self) -> int:
        """Sizes x rounds over the plan: what the progress bar counts (engine.progress)."""
        return sum(self._visits(op, dim) for _, dim, op, _, _ in plan(self.spec))

    def _visits(self, op: Collective, dim: str) -> int:
        spec = self.spec
        sizes = len(counts_for(op, spec, dim_size(spec, dim, self.session.world)))
        return sizes * visits_per_size(spec.rounds, spec.iters)

    def planned_rows(self) -> int:
        spec, world = self.spec, self.session.world
        total = 0
        for _, dim, op, _, _ in plan(spec):
            size = dim_size(spec, dim, world)
            rows = 1 + (world // size if spec.per_group and dim else 0)
            total += len(counts_for(op, spec, size)) * rows
        return total

    def prepare(self) -> float:
        """Make every process group the run needs, before anything is timed (and before a
        test's fault injection wraps torch.distributed); returns the seconds it took."""
        started = time.perf_counter()
        for backend in self.spec.backends:
            for dim in self.spec.dims or ("",):
                self.session.groups_for(backend, self.spec.device_for(backend), self.spec.mesh,
                                        dim)
        for backend, _, op, _, _ in plan(self.spec):  # the ops' own groups (ps: its workers)
            for ranks in workload.subgroups(op, self.session.world, self.spec.op_options):
                self.session.subgroup_for(backend, ranks)
        self.background = contention.prepare_background(self.session, self.spec)
        self.session.control.barrier()
        return time.perf_counter() - started

    def run(self) -> None:
        """Measure everything, in plan order."""
        self.visits = Visits(self.sink, self.planned_visits())
        self.visits.start()
        with contention.running(self.background):
            for backend, dim, op, variant, inplace in plan(self.spec):
                self.visits.op(self._visits(op, dim))
                self._measure_op(backend, dim, op, variant, inplace)
                self.visits.op_done()

    def _note(self, text: str) -> None:
        if self.sink is not None and text not in self._noted:
            self._noted.add(text)
            self.sink.note(text)

    def _context(self, groups: Groups, pattern: str) -> OpContext:
        spec = self.spec
        return OpContext(
            rank=groups.ranks.index(self.session.rank),
            world=groups.size,
            group=groups.group,
            ranks=groups.ranks if groups.dim else (),
            dtype=spec.dtype,
            reduce_op=spec.reduce_op,
            torch_op=REDUCE_OPS[spec.reduce_op],
            root=spec.root,
            inplace=self._inplace,
            pattern=pattern,
            pairs=spec.peers,
            window=spec.window,
            backend=self._backend,
            options=spec.op_options,
            subgroups=self.session.subgroups_of(self._backend),
        )

    def _measure_op(self, backend: str, dim: str, op: Collective, pattern: str,
                    inplace: bool = False) -> None:
        spec, session = self.spec, self.session
        self._backend, self._dim, self._inplace = backend, dim, inplace
        device = spec.device_for(backend)
        groups = session.groups_for(backend, device, spec.mesh, dim)
        ctx = self._context(groups, pattern)
        itemsize = ITEMSIZE[spec.dtype]
        counts = self._fitting(op, ctx, device, counts_for(op, spec, groups.size))
        largest = op.layout(ctx, counts[-1]) if counts else None
        dtype = getattr(torch, spec.dtype)
        # Allocated once for the largest size; every size is a view
        # (docs/reference/metrics-and-formulas.md#memory).
        send = torch.empty(largest.send if largest else 0, dtype=dtype, device=device)
        recv = torch.empty(largest.recv if largest else 0, dtype=dtype, device=device)
        timer = self._timer(device, op)
        budget = Budget(min_time=spec.min_time, iters=spec.iters, warmup=spec.warmup,
                        per_call=spec.per_call)
        # Which ranks take part: idle ones stay out of the row's time (and of the stop rule).
        active = session.control.gather([1.0 if op.active(ctx) else 0.0])[:, 0] > 0
        combine = functools.partial(_combine_active, active=active, mode=spec.rank_time)
        where = RowContext(backend=backend, device=device, nnodes=session.nnodes,
                           dtype=spec.dtype, itemsize=itemsize, root=spec.root,
                           rank_time=spec.rank_time, timer=timer.name,
                           mesh=mesh_text(spec.mesh) if dim else "", dim=dim,
                           groups=len(groups.members),
                           span=span_of(groups.members, session.nodes()),
                           peers=peers_text(spec.peers) if "peers" in op.extra_options else "")
        sizes = [_Size(count, count * itemsize) for count in counts]
        if spec.overlap:
            self._overlapped(op, ctx, groups, where, sizes, send, recv, timer, budget,
                             combine, active, pattern)
            return
        if spec.rounds > 1:
            self._interleaved(op, ctx, groups, where, sizes, send, recv, timer, budget,
                              combine, active, pattern)
            return
        for size in sizes:
            call = self._visit(op, ctx, size, send, recv, pattern)
            started = time.perf_counter()
            mark = contention.mark(self.background)
            with self._diagnosed():
                size.measurement = measure(call, timer, session.control, budget, combine)
            size.extras.update(contention.background_fields(self.background, mark))
            size.wall_s += time.perf_counter() - started
            self.visits.visited()
            self._emit(op, ctx, groups, where, size, active, timer, call)

    def _overlapped(self, op, ctx, groups, where, sizes, send, recv, timer, budget, combine,
                    active, pattern) -> None:
        """--overlap: each size alone and beside the compute, alternated within each of its
        rounds (measure.contention), then checked and emitted as every size is."""
        spec = self.spec
        with contention.compute_load(spec, spec.device_for(self._backend)) as load:
            for size in sizes:
                call = self._visit(op, ctx, size, send, recv, pattern)
                started = time.perf_counter()
                mark = contention.mark(self.background)
                with self._diagnosed():
                    samples = contention.measure_overlap(call, timer, self.session.control,
                                                         budget, load, spec.rounds)
                size.measurement = samples.beside_measurement()
                if self.sink is not None:
                    size.extras.update(contention.overlap_fields(
                        spec.overlap, samples, combine,
                        op.messages_per_iteration(ctx, size.bufs)))
                size.extras.update(contention.background_fields(self.background, mark))
                size.wall_s += time.perf_counter() - started
                for _ in range(visits_per_size(spec.rounds, spec.iters)):
                    self.visits.visited()
                self._emit(op, ctx, groups, where, size, active, timer, call)

    def _interleaved(self, op, ctx, groups, where, sizes, send, recv, timer, budget, combine,
                     active, pattern) -> None:
        """--rounds N: round r visits every size once, in the order --order gives
        (sampling.round_order: alternating, or shuffled with --seed; the same on every
        rank), each visit a 1/N share of the size's budget; rows are emitted when the op's
        last round is done."""
        control = self.session.control
        states: dict[int, SizeRounds] = {}
        mark = contention.mark(self.background)
        try:
            for index in range(self.spec.rounds):
                order = round_order(len(sizes), index, self.spec.order, self.spec.seed)
                for size in (sizes[i] for i in order):
                    # Inputs are filled at a size's first visit only: refilling 64 MiB with
                    # the check's pattern at every visit cost 20 s of wall for 2.5 s timed
                    # (5 visits); the values do not change what a call costs.
                    call = self._visit(op, ctx, size, send, recv, pattern,
                                       prepare=size.count not in states)
                    started = time.perf_counter()
                    with self._diagnosed():
                        if size.count not in states:
                            states[size.count] = SizeRounds(call, timer, control, budget,
                                                            self.spec.rounds)
                        states[size.count].visit(call)
                    size.wall_s += time.perf_counter() - started
                    self.visits.visited()
                with self._diagnosed():
                    if rounds_done(list(states.values()), control, combine, budget):
                        break
        except BaseException:  # a failure, a timeout, Ctrl-C or SIGTERM: keep what was measured
            self._emit_unchecked(op, ctx, where, sizes, states, active)
            raise
        load = contention.background_fields(self.background, mark)  # over the op's rounds
        for size in sizes:
            call = self._visit(op, ctx, size, send, recv, pattern, prepare=False)
            size.measurement = states[size.count].finish()
            size.extras.update(load)
            self._emit(op, ctx, groups, where, size, active, timer, call)

    def _emit_unchecked(self, op, ctx, where, sizes, states: dict, active) -> None:
        """The run is ending inside an op's rounds: rank 0 writes a row for every size that
        finished at least one round, from the block times it already holds (no collective:
        a peer may be gone), unchecked and saying so, so every measured size is kept on disk
        (docs/reference/exit-codes.md#when-something-goes-wrong-in-a-run). Its ``rounds`` column
        tells how many of the planned it had."""
        if self.sink is None:
            return
        for size in sizes:
            state = states.get(size.count)
            measurement = state.so_far() if state is not None else None
            if measurement is None or size.bufs is None:
                continue
            with contextlib.suppress(Exception):  # the original failure is what to report
                row = build_row(op, ctx, where, size.count, measurement,
                                op.messages_per_iteration(ctx, size.bufs), 0, active=active,
                                validation=CUT_SHORT)
                row.wall_s = round(size.wall_s, 4)
                self.sink.row(row.to_dict())

    def _visit(self, op: Collective, ctx: OpContext, size: _Size, send, recv, pattern: str,
               prepare: bool = True):
        """Go to a size: say where the run is, apply a fault planted there, bind the call to
        this size's views (inputs freshly filled), warm the group up before its first size."""
        spec, session = self.spec, self.session
        started = time.perf_counter()
        label = f"{op.name}/{pattern}" if pattern else op.name
        where = f"{self._backend}, dim {self._dim}" if self._dim else self._backend
        self.position = (f"{label} at {format_size(size.size_bytes) if size.count else '-'} "
                         f"({where})")
        session.at(self.position)
        if self.sink is not None:
            self.sink.position(self.position)
        # A thread made since the last visit (torch starts some lazily, from this bound
        # thread, so on its core) goes back to every CPU (engine.binding).
        session.binding.settle()
        self.injector.at(op.name, size.size_bytes)
        if self.injector.action("raise"):
            raise RankFailure("error", f"injected fault in {self.position}")
        with self._diagnosed():
            size.bufs = op.views(ctx, send, recv, size.count)
            if prepare:
                op.prepare(ctx, size.bufs)
            call = op.call(ctx, size.bufs)
            device = spec.device_for(self._backend)
            if prepare and (self._backend, self._dim) not in self._warm:
                self._warm.add((self._backend, self._dim))
                warm_up(call, session.control, Budget(spec.min_time, spec.iters, spec.warmup),
                        torch.cuda.synchronize if device == "cuda" else None)
        size.wall_s += time.perf_counter() - started
        return call

    def _diagnosed(self):
        """A failure inside torch.distributed becomes a RankFailure naming op, size, rank."""
        return diagnosed(lambda: self.position, self.session.watch, self.spec.timeout)

    def _emit(self, op, ctx, groups, where, size: _Size, active, timer, call) -> None:
        """Check a measured size outside the timed loop, then hand its row(s) to the sink."""
        spec, session = self.spec, self.session
        started = time.perf_counter()
        with self._diagnosed():
            wrong_per_rank = (self._check(op, ctx, size.bufs, timer, call) if spec.check
                              else np.zeros(session.world))
            counted = workload.counters(op, ctx)  # what the op counted (ps: bytes), from every rank
            counted = session.control.gather(counted) if counted else None
        wrong = int(wrong_per_rank.sum())
        size.wall_s += time.perf_counter() - started
        if self.sink is None:
            return
        count, measurement = size.count, size.measurement
        validation = op.validation(ctx, count) if spec.check else "off: --no-check"
        messages = op.messages_per_iteration(ctx, size.bufs)
        row = build_row(op, ctx, where, count, measurement, messages, wrong,
                        active=active, validation=validation)
        row.wall_s = round(size.wall_s, 4)
        for name, value in workload.row_fields(op, ctx, counted, row.lat_us_p50).items():
            setattr(row, name, value)
        for name, value in size.extras.items():  # --overlap, --background
            setattr(row, name, value)
        self.sink.row(row.to_dict())
        batch = call_batch(op, ctx, where, count, measurement) if spec.per_call else None
        if batch is not None:  # --per-call: every call of every rank, to the calls file
            self.sink.calls(batch)
        if spec.per_group and where.dim:
            self._group_rows(op, ctx, where, count, measurement, messages, active,
                             validation, groups, wrong_per_rank)

    def _group_rows(self, op, ctx, where, count, measurement, messages, active, validation,
                    groups: Groups, wrong_per_rank: np.ndarray) -> None:
        """--per-group: one row per group of the dimension, from the same measurement (the
        groups ran at once), with the wrong elements its own ranks found."""
        hosts = [h["host"] for h in self.session.hosts]
        for index, members in enumerate(groups.members):
            mine = np.zeros(self.session.world, dtype=bool)
            mine[list(members)] = True
            wrong = int(wrong_per_rank[mine].sum())
            row = build_row(op, ctx, where, count, measurement, messages, wrong,
                            active=active & mine, validation=validation)
            row.group = index
            row.group_ranks = ",".join(map(str, members))
            row.group_hosts = ",".join(dict.fromkeys(hosts[r] for r in members))
            self.sink.row(row.to_dict())

    def _fitting(self, op: Collective, ctx: OpContext, device: str,
                 counts: list[int]) -> list[int]:
        """On GPUs, cap the sweep by free device memory (nccl-tests caps maxBytes likewise).

        Every rank says which sizes fit its own buffers (a root of gather or scatter needs
        world x more than the others) and a size runs only if it fits on every rank: a rank
        that dropped a size alone would leave the others waiting in it until the timeout.
        """
        if device != "cuda" or not counts:
            return counts
        torch.cuda.empty_cache()  # the previous op's buffers are free, but still cached
        free = torch.cuda.mem_get_info()[0]
        itemsize = ITEMSIZE[self.spec.dtype]
        fits = [1.0 if fits_in(op.bytes_needed(ctx, c, itemsize), free) else 0.0 for c in counts]
        everywhere = self.session.control.gather(fits).min(axis=0) > 0
        fitting = [c for c, ok in zip(counts, everywhere, strict=True) if ok]
        if len(fitting) < len(counts):
            skipped = ", ".join(format_size(c * itemsize)
                                for c, ok in zip(counts, everywhere, strict=True) if not ok)
            self._note(f"skipping {op.name} sizes that do not fit in GPU memory on every "
                       f"rank: {skipped}")
        return fitting

    def _timer(self, device: str, op: Collective):
        if device != "cuda":
            return HostTimer()
        if self.spec.host_timer:
            return HostTimer(sync=torch.cuda.synchronize)
        if self.spec.cuda_graph:
            if op.graph_capturable:
                return CudaGraphTimer(barrier=self.session.control.barrier)
            self._note(f"{op.name} cannot be captured in a CUDA graph: it is timed eagerly "
                       "with CUDA events (its rows say timer cuda-event)")
        return CudaEventTimer(blocking=self.spec.blocking)

    def _check(self, op: Collective, ctx: OpContext, bufs, timer, call) -> np.ndarray:
        """Outside the timed loop: fresh inputs, one call, every element compared; returns
        each rank's count of wrong elements.

        Under --cuda-graph the call is a replay of a captured one-call graph of the same bound
        call, so what is checked is what was timed.
        """
        op.prepare(ctx, bufs)
        self.session.control.barrier()
        if isinstance(timer, CudaGraphTimer):
            timer.graph_for(call, 1).replay()
        else:
            call()
        if bufs.recv.is_cuda:
            torch.cuda.synchronize()
        if self.injector.action("corrupt") and bufs.recv.numel():
            bufs.recv.view(-1)[0] += 1
        return self.session.control.gather([op.wrong(ctx, bufs)])[:, 0]


def fits_in(needed: int, free: int) -> bool:
    """Whether buffers of ``needed`` bytes fit in ``free`` bytes of GPU memory, keeping 10 %
    and 256 MiB for NCCL's own buffers and the check's chunks."""
    return needed <= 0.9 * free - (256 << 20)


def _combine_active(per_rank: np.ndarray, active: np.ndarray, mode: str) -> np.ndarray:
    return combine_ranks(per_rank[active], mode)
