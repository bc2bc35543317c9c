"""One rank of a locate run: join, build every pair's group, then run the rounds it is handed.

The engine does not choose who meets whom nor judge the results: rank 0 calls the command's
``plan`` (host facts -> entities and rounds) and, after the main rounds, its ``follow_up``
(the pairs measured so far -> the next batch of retests, until it returns none or
``batches`` of them ran); every answer is sent to every rank. A
round's pairs all run at the same time (a barrier starts them), each a bidirectional exchange
through the p2p descriptor, timed call by call, then checked element by element; the ranks'
numbers are gathered once the round is over and rank 0 hands one record per meeting to its
sink (written at once: a run that fails later keeps its matrix).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from commbench.collectives.base import Collective, OpContext
from commbench.core.errors import Interrupted
from commbench.core.stats import median_ci
from commbench.engine import scaffold
from commbench.engine.failures import RankFailure, diagnosed
from commbench.engine.faults import Injector
from commbench.engine.session import Session
from commbench.engine.timers import HostTimer


@dataclass(frozen=True)
class LocateJob:
    """What every rank needs. ``plan(hosts)`` returns (entities as dicts, rank rounds);
    ``follow_up(records)`` the next batch of retests (none: done); ``verdict(found,
    records)`` the run's exit code (all three are called on rank 0, their answers shared)."""

    op: Collective  # the bidirectional exchange's descriptor
    pattern: str
    backend: str
    device: str
    small: int  # bytes: latency
    large: int  # bytes: bandwidth
    timeout: float
    plan: Callable
    follow_up: Callable
    # the fleet's entities -> batches of retests at most (follow_up is called until it says
    # none or this many ran): the command's rule (locate.retests.batches)
    batches: Callable[[int], int]
    verdict: Callable | None = None
    window: int = 8  # messages in flight each way at the large size
    # 100 calls at the large size: on the 2-core VM, 6 ranks, 256K, the attribution's pair
    # noise (its fastest decile) read 0.15 median over 7 clean runs with 100 and 0.40 with 30
    # (alternated), for 1.1-1.8 s a round instead of 0.8-1.0 s
    iters_large: int = 100
    iters_small: int = 300
    warmup: int = 3
    config: dict = field(default_factory=dict)  # the command's options, for run.json


@dataclass
class _PairRun:
    """This rank's share of one size of its pair: per-call seconds, wrong elements."""

    calls: np.ndarray
    wrong: int
    messages: int


def run_locate_rank(env, job: LocateJob, sink=None) -> int:
    """Run ``job`` as the rank ``env`` describes; rank 0 hands records to ``sink``. Returns,
    on every rank, rank 0's exit code (``verdict``): under torchrun each node's agent must
    exit alike, or those whose ranks exit 0 wait in torch's exit barrier (300 s) for the one
    whose rank 0 exits 1."""
    with scaffold.rank(env, job.timeout, (job.backend,), job.device == "cuda", sink) as this:
        session = this.session
        hosts = session.describe_hosts([job.device])
        found, rounds = _shared(session, lambda: job.plan(hosts))
        runner = _Runner(session, job, this.sink)
        started = time.perf_counter()
        runner.groups(rounds)
        this.begin((job.backend,), job.config, entities=found,
                   groups_s=round(time.perf_counter() - started, 3))
        runner.injector.install()  # after the control channel and the groups exist
        _planned(this.sink, rounds)
        for round_ in rounds:
            runner.run(round_)
        # Retests in batches until the candidates' pooled evidence settles (follow_up returns
        # nothing) or the cap: every batch is a round trip through rank 0's decision.
        for _ in range(job.batches(len(found))):
            more = _shared(session, lambda: job.follow_up(found, runner.records))
            if not more:
                break
            _planned(this.sink, more)
            runner.groups(more)
            for round_ in more:
                runner.run(round_)
        return int(_shared(session, lambda: job.verdict(found, runner.records))
                   if job.verdict is not None else 0)


def _planned(sink, rounds) -> None:
    """Tell rank 0's sink the rounds and meetings it is about to measure (a live bar)."""
    if sink is not None and rounds:
        sink.planned(len(rounds), sum(len(r.meetings) for r in rounds))


def _shared(session: Session, make: Callable):
    """Rank 0's answer, on every rank."""
    return session.control.objects(make() if session.rank == 0 else None)[0]


class _Runner:
    def __init__(self, session: Session, job: LocateJob, sink) -> None:
        self.session, self.job, self.sink = session, job, sink
        self.injector = Injector.from_env(session.rank)
        self.timer = HostTimer(sync=torch.cuda.synchronize if job.device == "cuda" else None)
        self.pair_groups: dict[tuple[int, int], object] = {}
        self.records: list[dict] = []
        self._prepared: dict[tuple[int, int], tuple] = {}  # (place in pair, size) -> inputs
        self.position = "groups"

    def groups(self, rounds) -> None:
        """A group per rank pair, made by every rank in the same order before any timing
        (torch requires every rank to take part in making every group)."""
        timeout = timedelta(seconds=self.job.timeout)
        pairs = sorted({tuple(sorted(p)) for r in rounds for m in r.meetings
                        for p in m.rank_pairs} - set(self.pair_groups))
        with self._diagnosed():
            for pair in pairs:
                self.pair_groups[pair] = dist.new_group(list(pair), timeout=timeout,
                                                        backend=self.job.backend)
            self.session.binding.settle()  # the new groups' threads: spread again
            self.session.control.barrier()

    def run(self, round_) -> None:
        """Every pair of the round at once; then one record per meeting (rank 0)."""
        mine = next(((m, p) for m in round_.meetings for p in m.rank_pairs
                     if self.session.rank in p), None)
        self.position = f"locate round {round_.index} ({round_.phase})"
        if mine is not None:
            self.position += f", pair {mine[1][0]}-{mine[1][1]}"
        self.session.at(self.position)
        result = None
        started = time.perf_counter()
        # One position for every rank done with its pair: a timeout in the gather then names
        # the ranks still elsewhere, the pair that hung.
        waiting = f"locate round {round_.index} ({round_.phase}): waiting for the round"
        try:
            with self._diagnosed():
                self.session.control.barrier()
                if mine is not None:
                    result = self._measure(mine[1])
                self.position = waiting
                self.session.at(waiting)
                gathered = self.session.control.objects(result)
        except (RankFailure, Interrupted) as failure:
            if self.position != waiting:
                raise
            # Waiting for the round: whoever is elsewhere hung. The first rank to time out
            # closes its connections, so the others may see a lost peer (or the launcher's
            # SIGTERM) before their own timeout: every one of them names the same pair.
            late = self.session.watch.lagging(waiting)
            if self.sink is not None:
                self._hung(round_, {rank for rank, _ in late})
            if not late or not isinstance(failure, RankFailure):
                raise
            blame = "; ".join(f"rank {rank} was at {where}" for rank, where in late)
            raise RankFailure("timeout", f"timeout after {self.job.timeout:g}s in {waiting}: "
                              f"{blame}") from None
        # The round's wall time on rank 0, from the barrier that starts it to the gather that
        # ends it: what a round costs, for bench/locate.py's projection to large fleets.
        round_s = round(time.perf_counter() - started, 4)
        records = [{**self._record(round_, m, gathered), "round_s": round_s}
                   for m in round_.meetings]
        self.records += records
        if self.sink is not None:
            for record in records:
                self.sink.pair(record)

    def _hung(self, round_, late: set[int]) -> None:
        """Rank 0, when its round timed out: a 'hung' record for each meeting with a rank
        that never finished its pair (the partial matrix keeps them)."""
        for m in round_.meetings:
            if late & {r for p in m.rank_pairs for r in p}:
                self.sink.pair({"round": round_.index, "phase": m.phase or round_.phase,
                                "a": m.a, "b": m.b, "ranks": [list(p) for p in m.rank_pairs],
                                "size_large": self.job.large, "size_small": self.job.small,
                                "busbw_gbps": float("nan"), "lat_us_p50": float("nan"),
                                "lat_us_p99": float("nan"), "wrong": 0, "status": "hung"})

    def _measure(self, pair: tuple[int, int]) -> dict:
        job = self.job
        group = self.pair_groups[tuple(sorted(pair))]
        out = {"pair": pair}
        for name, size, window, iters in (("large", job.large, job.window, job.iters_large),
                                          ("small", job.small, 1, job.iters_small)):
            run = self._exchange(pair, group, size, window, iters)
            out[name] = run
        return out

    def _exchange(self, pair, group, size: int, window: int, iters: int) -> _PairRun:
        job, op = self.job, self.job.op
        ctx = OpContext(rank=pair.index(self.session.rank), world=2, group=group,
                        dtype="float32", reduce_op="sum", torch_op=None, pattern=job.pattern,
                        ranks=tuple(pair), pairs=((0, 1),), window=window, backend=job.backend)
        count = op.count_for(size, 4, 2)
        bufs = self._inputs(ctx, size, count)
        call = op.call(ctx, bufs)
        self.injector.at(op.name, size)
        for _ in range(job.warmup):
            call()
        calls = np.array([self.timer.block(call, 1) for _ in range(iters)])
        self._inputs(ctx, size, count)  # the check, outside the timed calls, on fresh inputs
        call()
        if job.device == "cuda":
            torch.cuda.synchronize()
        return _PairRun(calls, int(op.wrong(ctx, bufs)), op.messages_per_iteration(ctx, bufs))

    def _inputs(self, ctx: OpContext, size: int, count: int):
        """This size's buffers with the descriptor's exact inputs, allocated and filled once
        per size and place in the pair (filling 64M took 2.3 s, twice per pair and round),
        later restored by copying what the first fill left."""
        op, device = self.job.op, self.job.device
        key = (ctx.rank, size)
        if key not in self._prepared:
            layout = op.layout(ctx, count)
            send = torch.empty(layout.send, dtype=torch.float32, device=device)
            recv = torch.empty(layout.recv, dtype=torch.float32, device=device)
            bufs = op.views(ctx, send, recv, count)
            op.prepare(ctx, bufs)
            self._prepared = {k: v for k, v in self._prepared.items() if k[1] != size}
            self._prepared[key] = (bufs, bufs.send.clone(), bufs.recv.clone())
        bufs, send, recv = self._prepared[key]
        bufs.send.copy_(send)
        bufs.recv.copy_(recv)
        return bufs

    def _record(self, round_, meeting, gathered: list) -> dict:
        """A meeting's numbers: per rank pair, each call takes as long as its slower end; a
        meeting of several rank pairs (nodes, rails) is as fast as its slowest pair."""
        job = self.job
        factor = job.op.busbw_factor(2, job.pattern)
        busbw, best, lat0, lat50, lat99, lo, hi, wrong = [], [], [], [], [], [], [], 0
        for pair in meeting.rank_pairs:
            ends = [g for g in gathered if g is not None and tuple(g["pair"]) == tuple(pair)]
            large = np.max([e["large"].calls for e in ends], axis=0)
            small = np.max([e["small"].calls for e in ends], axis=0)
            messages = ends[0]["large"].messages
            wrong += sum(e["large"].wrong + e["small"].wrong for e in ends)
            per_message = np.sort(large) / messages
            ci_lo, ci_hi = median_ci(per_message)
            busbw.append(job.large / float(np.median(per_message)) * factor / 1e9)
            best.append(job.large / float(np.percentile(per_message, 10)) * factor / 1e9)
            lo.append(job.large / ci_hi * factor / 1e9)
            hi.append(job.large / ci_lo * factor / 1e9)
            lat0.append(float(np.min(small)) * 1e6)
            lat50.append(float(np.median(small)) * 1e6)
            lat99.append(float(np.percentile(small, 99)) * 1e6)
        slowest = int(np.argmin(busbw))
        return {"round": round_.index, "phase": meeting.phase or round_.phase,
                "a": meeting.a, "b": meeting.b,
                "ranks": [list(p) for p in meeting.rank_pairs], "size_large": job.large,
                "size_small": job.small, "busbw_gbps": round(min(busbw), 6),
                "busbw_p10_gbps": round(min(best), 6),
                "busbw_ci_lo": round(lo[slowest], 6), "busbw_ci_hi": round(hi[slowest], 6),
                "lat_us_min": round(max(lat0), 3), "lat_us_p50": round(max(lat50), 3),
                "lat_us_p99": round(max(lat99), 3),
                "wrong": wrong, "status": "wrong" if wrong else "ok"}

    def _diagnosed(self):
        return diagnosed(lambda: self.position, self.session.watch, self.job.timeout)
