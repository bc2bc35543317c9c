"""The measuring loop for one size: warm-up, calibration, then timed blocks until precise enough.

Every decision here (how many warm-up iterations, iterations per block, when to stop) must be
the same on all ranks or they deadlock, so each is taken from data all ranks share: block times
are all-gathered after every round, and every rank applies the same rule to the same numbers.

A sample is one timed block divided by its iteration count. What a rank keeps: each block's
time (the samples), the iteration count of each block (so its loop total is exact, as
nccl-tests' mean is), and where the timer can tell, every single call's time (the tail).
With ``--per-call`` (Budget.per_call) every timer times every call on its own (timers'
``stamp_calls``: a clock reading or a CUDA event between each two calls, so a block is cut from
its calls afterwards), every call is kept (no subsample), and so is when each rank started each
call, from which rank 0 tells who the others waited for (core.percall.lateness).

Interruptions cost more than they take: on the 2-core VM the calls after any barrier or all-
gather run slower for tens of milliseconds (8 B allreduce: the first 15 calls after a barrier
averaged 1.4x calls 30-60; 1.2x after a gap of Python work alone). So the ranks meet only to
share block times, once per round; the first round is MIN_SAMPLES blocks (the rule cannot stop
earlier), later ones ROUND; a round is one unbroken loop where single calls are timed, its
blocks cut from the call times; and the gather that ends a round keeps the ranks in step, with
no barrier. In one pair of processes, 40 alternations of 0.5 s at 8 B: this loop's mean over a
hand-written loop's (5 blocks, a barrier before each) went from 1.08-1.12x (barrier and gather
every 5 blocks, a gap between blocks) to 0.98x; at 1.5 s, 20 alternations, 1.01x.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from commbench.core.percall import lateness
from commbench.core.stats import (
    STOP_CONFIDENCE,
    ci_halfwidth_pct,
    effective_size,
    median_ci,
    rounds_interval,
)
from commbench.engine.timers import Call

# Below 20 samples the median's 95 % interval spans too much of the distribution ([x(6),
# x(15)] at 20, [x(2), x(9)] at 10) to trust on a noisy machine; pyperf also keeps 20 values.
MIN_SAMPLES = 20
ROUND = 10  # blocks between two all-gathers of block times, after a first round of MIN_SAMPLES
TARGET_SAMPLES = 50  # a block lasts about min_time / TARGET_SAMPLES
FIXED_SAMPLES = 20  # --iters N is split into this many blocks (fewer if N is smaller)
MAX_SAMPLES = 2000
MAX_CALLS = 20_000  # single-call times kept per rank (an even subsample beyond)
DEFAULT_MAX_WARMUP = 5
# Untimed calls before a group's first size. Right after start the ranks run slow for a few
# tenths of a second (on the 2-core VM the first 0.1 s block of 8 B allreduce took a median
# 1.6x the later ones; after 0.5 s of calls, 0.9x), which would land on the first size alone.
# nccl-tests likewise warms up before its sweep.
RUN_WARMUP_S = 0.5
ROUND_CAP_S = 10.0  # the longest round, from the shared per-call estimate
PRECISION_PCT = 5.0  # stop early once the median's 99 % interval is this narrow (± %)...
EARLY_FRACTION = 0.1  # ... and at least this share of the budget is spent

Combine = Callable[[np.ndarray], np.ndarray]  # ranks x samples -> samples


@dataclass(frozen=True)
class Budget:
    """How long to measure one size: ``iters`` fixes the count, else ``min_time`` adapts it."""

    min_time: float
    iters: int | None = None
    warmup: int | None = None
    per_call: bool = False  # --per-call: every call timed on its own and kept


@dataclass(frozen=True)
class Measurement:
    """One size, every rank: seconds per call of each block, and of single calls."""

    per_rank: np.ndarray  # ranks x samples
    counts: np.ndarray  # iterations in each block
    calls: np.ndarray | None = None  # ranks x calls (in the order timed), or None
    rounds: tuple[int, ...] = ()  # samples of each interleaved round (--rounds), in order
    # --per-call: seconds each rank started each call after the first rank (ranks x calls),
    # and the round each call was timed in; None without --per-call
    call_late: np.ndarray | None = None
    call_rounds: np.ndarray | None = None

    @property
    def iters(self) -> int:
        return int(self.counts.sum())

    def rank_means(self) -> np.ndarray:
        """Each rank's loop total / iterations: nccl-tests' per-rank time, free of block
        boundaries (a maximum over ranks per short block would count their jitter)."""
        return (self.per_rank * self.counts).sum(axis=1) / self.counts.sum()


class _Blocks:
    """What the loop has so far: block times of every rank, counts, this rank's call times."""

    def __init__(self, timer, keep_all: bool = False) -> None:
        self.timer = timer
        self.keep_all = keep_all  # --per-call: every call, and its start, on every timer
        self.per_call = keep_all or getattr(timer, "times_single_calls", False)
        self.chunks: list[np.ndarray] = []
        self.counts: list[int] = []
        self.calls: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []  # keep_all: seconds after the chunk's first stamp
        self.bases: list[int] = []  # keep_all: each chunk's first stamp (host: ns; CUDA: 0)
        self.round_of_call: list[np.ndarray] = []
        self.round_index = 0  # set by SizeRounds before each visit

    def run(self, call: Call, control, counts: list[int]) -> np.ndarray:
        """Time one round of blocks (one per count) and all-gather their times.

        Where single calls are timed, the round is one unbroken loop and its blocks are cut
        from the call times afterwards, so nothing runs between them.
        """
        if self.keep_all:
            stamps = self.timer.stamp_calls(call, sum(counts))
            base = stamps[0]
            relative = (stamps - base) * (1e-9 if stamps.dtype == np.int64 else 1.0)
            single = np.diff(relative)
            self.calls.append(single)
            self.starts.append(relative[:-1])
            self.bases.append(int(base) if stamps.dtype == np.int64 else 0)
            self.round_of_call.append(np.full(single.size, self.round_index, dtype=np.int64))
            parts = np.split(single, np.cumsum(counts)[:-1])
            times = [float(part.sum()) / count for part, count in zip(parts, counts, strict=True)]
        elif self.per_call:
            single = self.timer.block_calls(call, sum(counts))
            self.calls.append(single)
            parts = np.split(single, np.cumsum(counts)[:-1])
            times = [float(part.sum()) / count for part, count in zip(parts, counts, strict=True)]
        else:
            times = [self.timer.block(call, count) / count for count in counts]
        gathered = control.gather(times)
        self.chunks.append(gathered)
        self.counts += counts
        return gathered

    def per_rank(self) -> np.ndarray:
        return np.concatenate(self.chunks, axis=1)

    def finish(self, control, rounds: tuple[int, ...] = ()) -> Measurement:
        if self.keep_all and self.calls:
            return self._finish_all(control, rounds)
        calls = None
        if self.per_call and self.calls:
            mine = np.concatenate(self.calls)
            if mine.size > MAX_CALLS:  # the same even subsample on every rank
                mine = mine[np.linspace(0, mine.size - 1, MAX_CALLS).astype(np.int64)]
            calls = control.gather(mine.tolist())
        return Measurement(per_rank=self.per_rank(), counts=np.asarray(self.counts), calls=calls,
                           rounds=rounds)

    def _finish_all(self, control, rounds: tuple[int, ...]) -> Measurement:
        """--per-call: every rank's every call, and when it started, all-gathered (the same
        call count on every rank: the block counts are shared). A chunk's first stamp goes as
        two exact floats (high and low 32 bits of the ns), so host starts compare to the ns."""
        calls = control.gather(np.concatenate(self.calls).tolist())
        starts = control.gather(np.concatenate(self.starts).tolist())
        halves = [float(part) for base in self.bases for part in divmod(base, 1 << 32)]
        bases = control.gather(halves)
        bases = (bases[:, 0::2].astype(np.int64) << 32) + bases[:, 1::2].astype(np.int64)
        shared = bool(getattr(self.timer, "shared_clock", False))
        late = np.empty_like(calls)
        offset = 0
        for chunk, single in enumerate(self.calls):
            span = slice(offset, offset + single.size)
            relative_base = (bases[:, chunk] - bases[:, chunk].min()) * 1e-9
            begun = starts[:, span] + relative_base[:, None]
            late[:, span] = lateness(begun, begun + calls[:, span], shared)
            offset += single.size
        return Measurement(per_rank=self.per_rank(), counts=np.asarray(self.counts), calls=calls,
                           rounds=rounds, call_late=late,
                           call_rounds=np.concatenate(self.round_of_call))


def warm_up(call: Call, control, budget: Budget, sync: Call | None = None) -> None:
    """The run's warm-up, before a group's first size: ``--warmup`` calls when it was given
    (nccl-tests runs its -w calls only before its sweep; commbench runs them there and per
    size), else calls for at least RUN_WARMUP_S.

    A first untimed call pays one-time set-up (an NCCL communicator made lazily, connections)
    outside the count. Then counts double (1, 2, 4, ...) and the ranks share each chunk's
    time, so all of them stop after the same chunk (between 0.5 and about 1 s); ``sync`` waits
    for asynchronous (CUDA) work at the end of a chunk.
    """

    def calls(count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            call()
        if sync is not None:
            sync()
        return time.perf_counter() - started

    calls(1)
    control.barrier()
    if budget.warmup is not None:
        calls(max(0, budget.warmup - 1))
        control.barrier()
        return
    spent, count = 0.0, 1
    while spent < RUN_WARMUP_S:
        spent += float(control.gather([calls(count)]).max())
        count *= 2


def measure(call: Call, timer, control, budget: Budget, combine: Combine) -> Measurement:
    """Time ``call`` on every rank of ``control`` (a Control); see the module docstring.

    ``combine`` turns per-rank block times into the samples the stopping rule looks at (the
    row's --rank-time mode over the ranks that take part).
    """
    call()  # untimed: lazy connection set-up and first-touch page faults
    control.barrier()
    first = float(control.gather([timer.block(call, 1)]).max())

    warmup = budget.warmup
    if warmup is None:
        warmup = int(min(DEFAULT_MAX_WARMUP, max(1, 0.05 * budget.min_time / max(first, 1e-9))))
    estimate = first
    if warmup:
        control.barrier()
        estimate = float(control.gather([timer.block(call, warmup) / warmup]).max())

    blocks = _Blocks(timer, budget.per_call)
    if budget.iters is not None:
        _fixed(call, blocks, control, budget.iters, estimate)
    else:
        _adaptive(call, blocks, control, budget.min_time, estimate, combine)
    return blocks.finish(control)


def _round(counts: list[int], estimate: float) -> int:
    """How many of ``counts``' blocks the next round takes: all of them, unless that would
    outlast ROUND_CAP_S (a rank with nothing to do, an idle p2p rank or a faster mesh group,
    waits in the round's gather for that long, under the control group's --timeout)."""
    taken, seconds = 0, 0.0
    for count in counts:
        seconds += count * estimate
        if taken and seconds > ROUND_CAP_S:
            break
        taken += 1
    return taken


def _fixed(call: Call, blocks: _Blocks, control, iters: int, estimate: float) -> None:
    count = min(iters, FIXED_SAMPLES)
    base, extra = divmod(iters, count)
    counts = [base + 1] * extra + [base] * (count - extra)
    while counts:  # nothing to decide until the end: rounds only as long as ROUND_CAP_S allows
        taken = _round(counts, estimate)
        blocks.run(call, control, counts[:taken])
        counts = counts[taken:]


def _adaptive(call: Call, blocks: _Blocks, control, min_time: float, estimate: float,
              combine: Combine) -> None:
    per_block = max(1, round(min_time / TARGET_SAMPLES / max(estimate, 1e-9)))
    timed, blocks_now = 0.0, MIN_SAMPLES  # the rule cannot stop before MIN_SAMPLES
    while True:
        round_counts = [per_block] * blocks_now
        gathered = blocks.run(call, control, round_counts[:_round(round_counts, estimate)])
        blocks_now = ROUND
        timed += float(gathered.max(axis=0).sum()) * per_block
        if _enough(combine(blocks.per_rank()), timed, min_time):
            return


def _enough(samples: np.ndarray, timed: float, min_time: float) -> bool:
    """The stopping rule: the budget is spent, or the median is already known to ±5 %.

    Known means: the 99 % interval (not the 95 % one the row reports, since the rule looks
    once per round and would otherwise stop on a lucky narrow interval) over the effective
    sample size (neighbouring blocks are correlated). A size that spends its budget without
    that precision is flagged later (stats.instability); more time buys little on a noisy
    machine, as the interval narrows with sqrt(n).
    """
    count = samples.size
    if count < MIN_SAMPLES:
        return False
    if count >= MAX_SAMPLES or timed >= min_time:
        return True
    if timed < EARLY_FRACTION * min_time:
        return False
    ordered = np.sort(samples)
    low, high = median_ci(ordered, STOP_CONFIDENCE, effective_size(samples))
    width = ci_halfwidth_pct(float(np.median(ordered)), low, high)
    return width <= PRECISION_PCT


# ---- interleaved rounds (--rounds N) ------------------------------------------------------------
# The sweep visits every size of an op once per round (measure.sweep); each visit times a share
# of the size's budget. A slow spell of the machine then lands on every size alike, and the
# spread between a size's rounds is what its interval (and the stop rule) is made of.
MIN_ROUNDS = 3  # the stop rule needs this many rounds for a between-round interval


def visits_per_size(rounds: int, iters: int | None) -> int:
    """How many rounds measure a size: --rounds, or fewer where --iters has fewer blocks
    than rounds to share out (SizeRounds' plan); what the progress bar counts per size."""
    if rounds <= 1 or iters is None:
        return max(1, rounds)
    return min(rounds, iters, FIXED_SAMPLES)


def round_order(sizes: int, index: int, order: str = "alternate", seed: int = 0) -> list[int]:
    """Which sizes (indices, ascending) round ``index`` visits, in order.

    ``alternate``: ascending in even rounds, descending in odd ones, so no size always
    follows the same neighbour and the ends of the sweep are not always first or last.
    ``shuffle``: a fresh permutation every round, drawn from ``seed`` and the round alone
    (random.Random seeded with a string is hashed with SHA-512, never with the process's
    salted hash()), so every rank, and a rerun with the same --seed, visits the same order.
    """
    visits = list(range(sizes))
    if order == "shuffle":
        random.Random(f"commbench-rounds:{seed}:{index}").shuffle(visits)
        return visits
    return visits if index % 2 == 0 else visits[::-1]


class SizeRounds:
    """One size's measurement across the rounds of its op: calibrated at its first visit,
    then a share of its budget at every visit."""

    def __init__(self, call: Call, timer, control, budget: Budget, rounds: int) -> None:
        self.call, self.control, self.rounds = call, control, rounds
        self.blocks = _Blocks(timer, budget.per_call)
        self.round_counts: list[int] = []
        self.timed = 0.0
        call()  # untimed: lazy connection set-up and first-touch page faults
        control.barrier()
        first = float(control.gather([timer.block(call, 1)]).max())
        share = budget.min_time / rounds
        warmup = budget.warmup
        if warmup is None:
            warmup = int(min(DEFAULT_MAX_WARMUP, max(1, 0.05 * share / max(first, 1e-9))))
        self.warmup = warmup
        self.estimate = first
        if warmup:
            control.barrier()
            self.estimate = float(control.gather([timer.block(call, warmup) / warmup]).max())
        if budget.iters is not None:
            count = min(budget.iters, FIXED_SAMPLES)
            base, extra = divmod(budget.iters, count)
            counts = [base + 1] * extra + [base] * (count - extra)
            self.plan = [list(part) for part in np.array_split(counts, min(rounds, count))]
        else:
            # 50/N blocks a visit, fewer (at least 2) where a call outlasts a tenth of the
            # visit's share: 10 one-call blocks of 64M (60 ms a call) at each of 5 visits
            # took 3 s against a 1.5 s budget.
            calls = max(1, int(share / max(self.estimate, 1e-9)))
            self.per_round = max(2, min(round(TARGET_SAMPLES / rounds), calls))
            self.per_block = max(1, round(share / self.per_round / max(self.estimate, 1e-9)))
            self.plan = None
        self.share = share

    def visit(self, call: Call) -> None:
        """Time this size's share of one round: untimed calls first at every visit but the
        first (the calibration warmed it then; another size ran since), then blocks, all-
        gathered once per round (or per ROUND_CAP_S)."""
        index = len(self.round_counts)
        if self.plan is not None and index >= len(self.plan):
            return
        self.call = call  # the same views, bound again at this visit
        if index:
            for _ in range(self.warmup):
                self.call()
        counts = self.plan[index] if self.plan is not None else [self.per_block] * self.per_round
        self.blocks.round_index = index
        taken = 0
        while taken < len(counts):
            step = _round(counts[taken:], self.estimate)
            gathered = self.blocks.run(self.call, self.control, counts[taken:taken + step])
            self.timed += float((gathered.max(axis=0) * counts[taken:taken + step]).sum())
            taken += step
        self.round_counts.append(len(counts))
        if self.plan is None and index == 0:  # the share of later rounds, from what it took
            per_call = self.timed / sum(counts)
            self.per_block = max(1, round(self.share / self.per_round / max(per_call, 1e-9)))

    def done(self) -> bool:
        return len(self.round_counts) >= (len(self.plan) if self.plan is not None
                                          else self.rounds)

    def tight(self, combine: Combine, min_time: float) -> bool:
        """This size's median known to +-PRECISION_PCT at 99 % from the spread between its
        rounds, after at least MIN_ROUNDS rounds and EARLY_FRACTION of its budget."""
        if len(self.round_counts) < MIN_ROUNDS or self.timed < EARLY_FRACTION * min_time:
            return False
        samples = combine(self.blocks.per_rank())
        low, high = rounds_interval(samples, self.round_counts, STOP_CONFIDENCE)
        return ci_halfwidth_pct(float(np.median(samples)), low, high) <= PRECISION_PCT

    def finish(self) -> Measurement:
        return self.blocks.finish(self.control, tuple(self.round_counts))

    def so_far(self) -> Measurement | None:
        """The rounds finished so far, from block times every rank already shares (no
        collective, no single-call tails); None before the first round ends."""
        if not self.round_counts:
            return None
        samples = sum(self.round_counts)
        return Measurement(per_rank=self.blocks.per_rank()[:, :samples],
                           counts=np.asarray(self.blocks.counts[:samples]),
                           rounds=tuple(self.round_counts))


def rounds_done(sizes: list[SizeRounds], control, combine: Combine, budget: Budget) -> bool:
    """After a round: stop when every size has had its rounds, or (adaptive) when every
    size's interval is tight. Each rank judges the same gathered samples; the verdicts are
    gathered as well and all must agree, so no rank can leave the loop alone."""
    if all(size.done() for size in sizes):
        return True
    if budget.iters is not None:
        return False
    tight = all(size.tight(combine, budget.min_time) for size in sizes)
    return bool(control.gather([1.0 if tight else 0.0]).min() > 0)
