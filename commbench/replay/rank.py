"""One rank of a replay: join, rebuild the trace's groups, bind its calls, replay its steps.

The command hands every rank the same trace and plan (replay.plan): the recorded steps
in replay order, the waits of ``--gaps recorded``, the distinct calls to time alone. Then:

1. groups: every rank makes every group of the trace, in one global order (by members, then
   name), before anything is timed; torch needs every rank in every new_group call.
2. binding: each step's calls get their buffers (replay.calls) and the bytes each hands
   torch are checked against the trace, and for an all-to-all the bytes it sends to and
   receives from each member of the group against the recorded split sizes; a difference
   fails the run before any timing.
3. warm-up: the first step of the plan, untimed.
4. the steps: ranks meet at a barrier (outside the timing), then each call is issued in the
   recorded order. Asynchronous calls (as recorded) are issued with ``async_op=True`` and
   waited for where the next synchronous call or the end of the step needs them: a simple,
   conservative rule (training code may wait later, never earlier). A call's time runs from
   its issue to its completion: the return of a synchronous call; for an asynchronous one its
   future's callback (gloo), else the moment it was waited for; on CUDA the host synchronises
   after each synchronous call and after each wait, so completion is seen by the host clock.
   A step's wall runs from its start to the completion of its last call.
5. the quick sweep (no --curves): after each replayed step, each distinct call alone, a few
   times back to back, the group's ranks together and everybody else waiting at a barrier;
   its median over the rounds is the model.

Rank 0 hands every rank's numbers to its sink once the ranks are done.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from commbench.core.errors import Interrupted
from commbench.core.sizes import format_size
from commbench.engine import scaffold
from commbench.engine.failures import RankFailure, diagnosed
from commbench.engine.faults import Injector
from commbench.engine.session import Session
from commbench.engine.sinks import ReplaySink
from commbench.replay.calls import Binder, Bound
from commbench.results.trace import Call, Trace

if TYPE_CHECKING:  # the command's plan (replay.plan), handed in as data
    from commbench.replay.plan import ReplayPlan

ALONE_PER_ROUND = 2  # timings of each distinct call after each replayed step
GAP_MATMUL = 128  # --gaps compute: square float32 matrices, about 0.1-1 ms a product on a CPU


class ComputeGaps:
    """``--gaps compute``: a recorded gap is spent multiplying GAP_MATMUL x GAP_MATMUL matrices
    (on the replay's device) instead of sleeping, so the calls meet the contention for cores,
    memory bandwidth (and on a GPU, SMs) the job's compute made. Products run while one more
    fits before the gap's end (the time of one, from the last); the rest of the gap, less than
    a product, is slept."""

    def __init__(self, device: str) -> None:
        self.a = torch.rand((GAP_MATMUL, GAP_MATMUL), device=device)
        self.out = torch.empty_like(self.a)
        self.sync = torch.cuda.synchronize if device == "cuda" else None
        self.per_kernel = self._kernel()  # the first pays allocation: a generous estimate

    def _kernel(self) -> float:
        started = time.perf_counter()
        torch.matmul(self.a, self.a, out=self.out)
        if self.sync is not None:
            self.sync()
        return time.perf_counter() - started

    def run(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() + self.per_kernel <= end:
            self.per_kernel = self._kernel()
        left = end - time.perf_counter()
        if left > 0:
            time.sleep(left)


@dataclass(frozen=True)
class ReplayJob:
    trace: Trace
    plan: ReplayPlan  # replay.plan: steps, gaps, the distinct calls to time alone
    backend: str
    device: str
    timeout: float
    warmup: int = 1
    config: dict = field(default_factory=dict)  # the command's options, for run.json


def run_replay_rank(env, job: ReplayJob, sink: ReplaySink | None = None) -> None:
    """Replay ``job`` as the rank ``env`` describes; rank 0 hands the results to ``sink``."""
    with scaffold.rank(env, job.timeout, (job.backend,), job.device == "cuda", sink) as this:
        session = this.session
        session.describe_hosts([job.device])
        replayer = _Replayer(session, job)
        started = time.perf_counter()
        replayer.make_groups()
        this.begin((job.backend,), job.config,
                   groups_s=round(time.perf_counter() - started, 3))
        replayer.injector.install()  # after the control channel and the groups exist
        replayer.bind()
        for _ in range(job.warmup):
            replayer.step(-1, job.plan.steps[0])
        steps, alone = [], {}
        for index, step in enumerate(job.plan.steps):
            steps.append(replayer.step(index, step))
            replayer.alone(alone, first=index == 0)
        isolated = {n: statistics.median(times) for n, times in alone.items()}
        result = {"rank": env.rank, "steps": steps, "isolated": isolated}  # a RankResult
        session.at("replay: handing the results to rank 0")
        gathered = session.control.objects(result)
        if this.sink is not None:
            this.sink.results(gathered)


class _Replayer:
    def __init__(self, session: Session, job: ReplayJob) -> None:
        self.session, self.job = session, job
        self.rank = session.rank
        self.injector = Injector.from_env(session.rank)
        trace = job.trace
        self.calls: list[Call] = trace.calls(self.rank) if self.rank in trace.ranks else []
        self.groups: dict[str, tuple] = {}
        self.bound: dict[int, list[Bound]] = {}  # recorded step -> its calls, bound
        self.by_seq: dict[int, Bound] = {}
        self.position = "replay: groups"
        self.current = ""  # the call being issued, for a failure's message
        self.cuda = job.device == "cuda"
        # --gaps compute: a gap is filled with matmuls instead of a sleep
        self.fill = ComputeGaps(job.device) if job.config.get("gaps") == "compute" else None

    def make_groups(self) -> None:
        timeout = timedelta(seconds=self.job.timeout)
        ordered = sorted(self.job.trace.groups.values(), key=lambda g: (g.ranks, g.name))
        with self._diagnosed():
            for group in ordered:
                made = dist.new_group(list(group.ranks), timeout=timeout,
                                      backend=self.job.backend)
                if self.rank in group.ranks:
                    self.groups[group.name] = (made, tuple(group.ranks))
            self.session.binding.settle()  # the new groups' threads: spread again
            self.session.control.barrier()

    def bind(self) -> None:
        """Each replayed step's calls, with their own buffers where they are in flight
        together; the bytes each hands torch must be the trace's."""
        binder = Binder(self.rank, self.groups, self.job.backend, self.job.device)
        self.position = "replay: binding the calls"
        with self._diagnosed():
            for step in sorted(set(self.job.plan.steps)):
                calls = [c for c in self.calls if c.step == step]
                self.bound[step] = [binder.bind(c, slot) for c, slot in _slots(calls)]
        for bound in (b for step in self.bound.values() for b in step):
            call = bound.call
            self.by_seq.setdefault(call.seq, bound)
            if bound.nbytes != call.size_bytes:
                raise RankFailure("error", f"replay of call {call.seq} "
                                  f"({call.op} {call.dtype} on group {call.pg}) hands torch "
                                  f"{bound.nbytes} bytes, the trace says {call.size_bytes}")
            recorded = call.peer_bytes(len(self.groups[call.pg][1]))
            if bound.peers != recorded:
                raise RankFailure("error", f"replay of call {call.seq} "
                                  f"({call.op} {call.dtype} on group {call.pg}) hands torch "
                                  f"{_peers(bound.peers)}, the trace says {_peers(recorded)}")

    def step(self, index: int, step: int) -> dict:
        """One recorded step replayed (index -1: the warm-up); its wall and calls."""
        bounds = self.bound[step]
        waits = self.job.plan.gaps.get(self.rank, {})
        total = len(self.job.plan.steps)
        self.position = (f"replay warm-up (recorded step {step})" if index < 0 else
                         f"replay step {index + 1}/{total} (recorded step {step})")
        self.session.at(self.position)
        clock = time.perf_counter_ns
        issued = [0] * len(bounds)
        ended = [0] * len(bounds)
        pending: list[tuple[int, object, object]] = []
        injector = self.injector
        with self._diagnosed():
            self.session.control.barrier()
            start = clock()
            for i, bound in enumerate(bounds):
                call = bound.call
                wait = waits.get(call.seq, 0.0)
                if wait > 0 and self.fill is not None:
                    self.fill.run(wait)
                elif wait > 0:
                    time.sleep(wait)
                if pending and not bound.is_async:
                    self._wait(pending, ended)
                self.current = f"call {call.seq} ({call.op} {format_size(call.size_bytes)}B " \
                               f"on group {call.pg})"
                injector.at(call.op, call.size_bytes)
                issued[i] = clock()
                work = bound.issue()
                ended[i] = clock()
                if bound.is_async and work is not None:
                    pending.append((i, work, _on_completion(work, ended, i, clock)))
                elif self.cuda:
                    torch.cuda.synchronize()
                    ended[i] = clock()
            self._wait(pending, ended)
            wall = clock() - start
        self.current = ""
        return {"index": index, "step": step, "wall_s": wall / 1e9,
                "calls": [[b.call.seq, (issued[i] - start) / 1e9, (ended[i] - start) / 1e9,
                           b.nbytes, b.sent, b.received] for i, b in enumerate(bounds)]}

    def _wait(self, pending: list, ended: list[int]) -> None:
        for i, work, stamped in pending:
            work.wait()
            if self.cuda:
                torch.cuda.synchronize()
            if stamped is not None and not self.cuda:
                stamped.wait()  # the callback has run: ended[i] holds the completion
            else:
                ended[i] = max(ended[i], time.perf_counter_ns())
        pending.clear()

    def alone(self, timings: dict[int, list[float]], first: bool) -> None:
        """One round of the quick sweep, after a replayed step: each distinct call of the
        plan timed alone ``ALONE_PER_ROUND`` times, its group's ranks together and the others
        waiting at a barrier. Rounds between the steps put the model's timings in the same
        spells of a busy machine as the replay's (on the 2-core VM, 1 MiB allreduces alone
        read 3.2 ms a call, then 0.5 ms a few seconds later)."""
        for n, item in enumerate(self.job.plan.isolated):
            seq = next((seq for rank, seq in item.calls if rank == self.rank), None)
            self.position = f"replay: timing {item.op} on group {item.group} alone"
            self.session.at(self.position)
            with self._diagnosed():
                self.session.control.barrier()
                if seq is not None:
                    bound = self.by_seq[seq]
                    timings.setdefault(n, []).extend(self._alone(bound, first))

    def _alone(self, bound: Bound, first: bool) -> list[float]:
        clock = time.perf_counter_ns
        self.injector.at(bound.call.op, bound.call.size_bytes)
        self.current = f"call {bound.call.seq} ({bound.call.op})"
        times = []
        for index in range(ALONE_PER_ROUND + first):  # the first round's first: a warm-up
            start = clock()
            work = bound.issue()
            if work is not None and bound.is_async:
                work.wait()
            if self.cuda:
                torch.cuda.synchronize()
            if index or not first:
                times.append((clock() - start) / 1e9)
        self.current = ""
        return times

    def _diagnosed(self):
        return diagnosed(lambda: self.position, self.session.watch, self.job.timeout,
                         detail=lambda: self.current, passing=(Interrupted,))


def _peers(peers: dict | None) -> str:
    if peers is None:
        return "no bytes per peer"
    return (f"bytes per peer {peers['in']} to send and {peers['out']} to receive")


def _slots(calls: list[Call]) -> list[tuple[Call, int]]:
    """Each call with the buffer slot it uses: asynchronous calls in flight together (until
    the next synchronous call or the step's end) get slots 0, 1, 2 ... of their buffer."""
    flying: dict[tuple, int] = {}
    out = []
    for call in calls:
        if not call.is_async:
            flying.clear()
        key = (call.op, call.dtype, call.in_numel, call.out_numel, call.pg, call.root)
        slot = flying.get(key, 0)
        out.append((call, slot))
        if call.is_async:
            flying[key] = slot + 1
    return out


def _on_completion(work, ended: list[int], index: int, clock):
    """Stamp ``ended[index]`` when the work completes (its future's callback, on the
    backend's thread); returns the future that completes once the stamp is made, or None
    where the work has no future (then its wait stamps it)."""
    try:
        future = work.get_future()
    except Exception:  # send/recv on some backends, fault injection's stand-ins
        return None

    def done(_future):
        ended[index] = max(ended[index], clock())

    try:
        return future.then(done)
    except Exception:
        return None
