"""--overlap on the rank side: a compute kernel beside the collective, and one size measured
alternately alone and beside it (what the numbers mean: measure.overlap_stats).

The compute runs on a thread of its own in every rank, the same thread for both of its sides:
on CPU torch's matmul beside gloo's threads; on a GPU the thread launches the matmuls on a
CUDA stream of its own, beside the stream NCCL runs on, and waits for each (not yet run on a
GPU: docs/guides/overlap-and-contention.md).

One size, every round (the phases alternate: forwards in even rounds, backwards in odd ones,
so neither side always follows the other):

- comm alone: BLOCKS blocks of K calls, the compute thread idle;
- beside: BLOCKS times, the compute thread loops matmuls while the rank times a block of K
  calls; the kernels that started and ended inside the block are compute beside;
- compute alone: BLOCKS blocks of M matmuls on the compute thread, no collective.

K and M are the same on every rank (from gathered calibration times); a beside block lasts at
least MIN_KERNELS_BESIDE kernels, so kernels do end inside it. Every block of every side starts
after a barrier: the compute alone is not a collective, and without one a rank that finished
its kernels first waited for the other inside its next comm-alone call, which counted that
wait as communication (64K allreduce beside matmul:128: 'alone' read 3.7x 'beside'). A barrier
slows the calls right after it (measure.sampling), before both comm sides alike. The ranks
share their samples once per round (one all-gather). Validation is untouched: the sweep
checks the size after this loop, as for every row.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from commbench.engine.timers import Call
from commbench.measure.sampling import Budget, Measurement

BLOCKS = 3  # blocks per side per round
MIN_KERNELS_BESIDE = 4  # a beside block lasts at least this many kernels alone
MIN_ROUNDS = 3  # the paired bootstrap over rounds needs a few


class MatmulLoad:
    """Square ``side`` x ``side`` matrices of ``dtype`` on ``device``, multiplied by a thread
    of its own. ``side`` 0: no compute (the thread idles; a control run)."""

    def __init__(self, side: int, dtype: str, device: str) -> None:
        import torch

        self.side = side
        self._torch = torch
        kind = getattr(torch, dtype)
        shape = (side, side)
        if kind.is_floating_point:
            self.a = torch.rand(shape, dtype=kind, device=device)
        else:  # small integers: products and sums stay in range; the values do not matter
            self.a = torch.randint(0, 2, shape, dtype=kind, device=device)
        self.b = self.a.clone()
        self.out = torch.empty_like(self.a)
        self.stream = torch.cuda.Stream(device=device) if device == "cuda" else None
        self._jobs: list = []
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._result: object = None
        self._thread = threading.Thread(target=self._serve, name="commbench-overlap",
                                        daemon=True)
        self._thread.start()

    def kernel(self) -> None:
        """One matmul, finished when this returns (on a GPU: launched on the load's own
        stream, then waited for)."""
        if not self.side:
            return
        if self.stream is None:
            self._torch.matmul(self.a, self.b, out=self.out)
            return
        with self._torch.cuda.stream(self.stream):
            self._torch.matmul(self.a, self.b, out=self.out)
        self.stream.synchronize()

    # ---- the thread's jobs ---------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            with self._wake:
                while not self._jobs:
                    self._wake.wait()
                job = self._jobs.pop(0)
            if job is None:
                return
            self._result = job()
            self._done.set()

    def _submit(self, job) -> None:
        self._done.clear()
        with self._wake:
            self._jobs.append(job)
            self._wake.notify()

    def _wait(self):
        self._done.wait()
        return self._result

    def timed(self, count: int) -> float:
        """Seconds per kernel of ``count`` kernels back to back on the load's thread."""
        if not self.side:
            return 0.0

        def job() -> float:
            clock = time.perf_counter_ns
            start = clock()
            for _ in range(count):
                self.kernel()
            return (clock() - start) * 1e-9 / count

        self._submit(job)
        return float(self._wait())

    def start_loop(self) -> None:
        """Kernels back to back on the load's thread until ``stop_loop``; returns once the
        first has been started, so a block timed after this runs beside the compute."""
        self._stop.clear()
        started = threading.Event()

        def job() -> list[tuple[int, int]]:
            spans: list[tuple[int, int]] = []
            clock = time.perf_counter_ns
            started.set()
            if not self.side:
                self._stop.wait()
                return spans
            while not self._stop.is_set():
                begin = clock()
                self.kernel()
                spans.append((begin, clock()))
            return spans

        self._submit(job)
        started.wait()

    def stop_loop(self) -> list[tuple[int, int]]:
        """Stop the loop; the (start, end) perf_counter_ns of every kernel it ran."""
        self._stop.set()
        return self._wait()

    def close(self) -> None:
        with self._wake:
            self._jobs.append(None)
            self._wake.notify()
        self._thread.join(timeout=30)


def kernels_inside(spans: list[tuple[int, int]], start: int, end: int) -> float:
    """Mean seconds of the kernels that started and ended within [start, end]; nan if none."""
    inside = [b - a for a, b in spans if a >= start and b <= end]
    return float(np.mean(inside)) * 1e-9 if inside else math.nan


@dataclass
class OverlapSamples:
    """One size's four sides, every rank, block by block, round by round (ranks x blocks),
    seconds per call or per kernel; round_counts: blocks of each side in each round."""

    comm_alone: list[np.ndarray] = field(default_factory=list)
    comm_beside: list[np.ndarray] = field(default_factory=list)
    compute_alone: list[np.ndarray] = field(default_factory=list)
    compute_beside: list[np.ndarray] = field(default_factory=list)
    calls_per_block: int = 0
    kernels_per_block: int = 0

    def beside_measurement(self) -> Measurement:
        """The collective beside the compute as a Measurement (the row's latency columns)."""
        per_rank = np.concatenate(self.comm_beside, axis=1)
        counts = np.full(per_rank.shape[1], self.calls_per_block)
        return Measurement(per_rank=per_rank, counts=counts,
                           rounds=tuple(part.shape[1] for part in self.comm_beside))


def combined(sides: list[np.ndarray], combine) -> list[np.ndarray]:
    """Each round's ranks x blocks, combined over ranks (--rank-time) into blocks."""
    return [np.asarray(combine(part), dtype=np.float64) for part in sides]


def combined_compute(sides: list[np.ndarray]) -> list[np.ndarray]:
    """Kernel times, each rank's own compute: the mean over ranks per block (a rank that saw
    no kernel end inside a block is left out of that block)."""
    result = []
    for part in sides:
        with warnings.catch_warnings():  # a block where no rank saw a kernel end: nan
            warnings.simplefilter("ignore", RuntimeWarning)
            means = np.nanmean(np.where(np.isfinite(part), part, np.nan), axis=0)
        result.append(means[np.isfinite(means)])
    return result


def measure_overlap(call: Call, timer, control, budget: Budget, load: MatmulLoad,
                    rounds: int) -> OverlapSamples:
    """Time one size alone and beside ``load``, in ``rounds`` alternated rounds (module
    docstring); every count is decided from gathered numbers, the same on every rank."""
    rounds = max(MIN_ROUNDS, rounds)
    call()  # untimed: lazy connection set-up and first-touch page faults
    control.barrier()
    per_call = float(control.gather([timer.block(call, 1)]).max())
    warm = max(1, min(5, int(0.05 * budget.min_time / max(per_call, 1e-9))))
    control.barrier()
    per_call = float(control.gather([timer.block(call, warm) / warm]).max())
    load.timed(1)  # untimed: the first kernel pays allocation and thread start
    per_kernel = float(control.gather([load.timed(1)]).max())
    share = budget.min_time / rounds / 3 / BLOCKS  # one block of one side
    if budget.iters is not None:
        calls = max(1, budget.iters // (rounds * 2 * BLOCKS))
    else:
        calls = max(1, round(share / max(per_call, 1e-9)))
    if per_kernel > 0:
        calls = max(calls, math.ceil(MIN_KERNELS_BESIDE * per_kernel / max(per_call, 1e-9)))
    kernels = max(1, round(share / per_kernel)) if per_kernel > 0 else 1
    samples = OverlapSamples(calls_per_block=calls, kernels_per_block=kernels)

    def comm_alone() -> list[float]:
        times = []
        for _ in range(BLOCKS):
            control.barrier()
            times.append(timer.block(call, calls) / calls)
        return times

    def compute_alone() -> list[float]:
        times = []
        for _ in range(BLOCKS):
            control.barrier()
            times.append(load.timed(kernels))
        return times

    def beside() -> tuple[list[float], list[float]]:
        comm, compute = [], []
        for _ in range(BLOCKS):
            control.barrier()
            load.start_loop()
            start = time.perf_counter_ns()
            comm.append(timer.block(call, calls) / calls)
            end = time.perf_counter_ns()
            spans = load.stop_loop()
            compute.append(kernels_inside(spans, start, end) if load.side else 0.0)
        return comm, compute

    for index in range(rounds):
        taken: dict[str, list[float]] = {}
        phases = ("comm_alone", "beside", "compute_alone")
        for phase in phases if index % 2 == 0 else phases[::-1]:
            if phase == "comm_alone":
                taken["comm_alone"] = comm_alone()
            elif phase == "compute_alone":
                taken["compute_alone"] = compute_alone()
            else:
                taken["comm_beside"], taken["compute_beside"] = beside()
        order = ("comm_alone", "comm_beside", "compute_alone", "compute_beside")
        gathered = control.gather([value for name in order for value in taken[name]])
        for position, name in enumerate(order):
            getattr(samples, name).append(gathered[:, position * BLOCKS:(position + 1) * BLOCKS])
    return samples
