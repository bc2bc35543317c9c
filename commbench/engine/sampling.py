"""The measuring loop for one size: warm-up, calibration, then timed blocks until precise enough.

Every decision here (how many warm-up iterations, iterations per block, when to stop) must be
the same on all ranks or they deadlock, so each is taken from data all ranks share: block times
are all-gathered after every round, and every rank applies the same rule to the same numbers.

A sample is one timed block divided by its iteration count; the time that counts is the
slowest rank's (a collective is done when the last rank is done, SPEC §4).

Ranks meet at a barrier once per round, not before every block: within a round the collectives
themselves keep the ranks in step, and a rank that sleeps in a barrier wakes late on a busy
machine, which put a tail on every block start (an A/B test of 6 alternations at 8 B: the mean
over a hand-written loop's fell from 1.49x to 1.07x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.engine.timers import Call
from commbench.stats import ci_halfwidth_pct, median_ci

# Below 20 samples the median's 95 % interval spans too much of the distribution ([x(6),
# x(15)] at 20, [x(2), x(9)] at 10) to trust on a noisy machine; pyperf also keeps 20 values.
MIN_SAMPLES = 20
ROUND = 5  # blocks between two all-gathers of block times
TARGET_SAMPLES = 50  # a block lasts about min_time / TARGET_SAMPLES
FIXED_SAMPLES = 20  # --iters N is split into this many blocks (fewer if N is smaller)
MAX_SAMPLES = 2000
DEFAULT_MAX_WARMUP = 5
PRECISION_PCT = 5.0  # stop early once the median's 95 % interval is this narrow (± %)...
EARLY_FRACTION = 0.1  # ... and at least this share of the budget is spent


@dataclass(frozen=True)
class Budget:
    """How long to measure one size: ``iters`` fixes the count, else ``min_time`` adapts it."""

    min_time: float
    iters: int | None = None
    warmup: int | None = None


@dataclass(frozen=True)
class Measurement:
    """Seconds per call, one row per rank, one column per sample."""

    per_rank: np.ndarray
    iters: int

    @property
    def samples(self) -> np.ndarray:
        """The slowest rank's time for each sample."""
        return self.per_rank.max(axis=0)


def measure(call: Call, timer, control, budget: Budget) -> Measurement:
    """Time ``call`` on every rank of ``control`` (a Control); see the module docstring."""
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

    if budget.iters is not None:
        return _fixed(call, timer, control, budget.iters)
    return _adaptive(call, timer, control, budget.min_time, estimate)


def _fixed(call: Call, timer, control, iters: int) -> Measurement:
    blocks = min(iters, FIXED_SAMPLES)
    base, extra = divmod(iters, blocks)
    counts = [base + 1] * extra + [base] * (blocks - extra)
    chunks = []
    for start in range(0, blocks, ROUND):
        control.barrier()
        times = [timer.block(call, count) / count for count in counts[start : start + ROUND]]
        chunks.append(control.gather(times))
    return Measurement(per_rank=np.concatenate(chunks, axis=1), iters=iters)


def _adaptive(call: Call, timer, control, min_time: float, estimate: float) -> Measurement:
    per_block = max(1, round(min_time / TARGET_SAMPLES / max(estimate, 1e-9)))
    chunks: list[np.ndarray] = []
    timed = 0.0
    while True:
        control.barrier()
        times = [timer.block(call, per_block) / per_block for _ in range(ROUND)]
        gathered = control.gather(times)
        chunks.append(gathered)
        timed += float(gathered.max(axis=0).sum()) * per_block
        per_rank = np.concatenate(chunks, axis=1)
        if _enough(per_rank.max(axis=0), timed, min_time):
            return Measurement(per_rank=per_rank, iters=per_rank.shape[1] * per_block)


def _enough(samples: np.ndarray, timed: float, min_time: float) -> bool:
    """The stopping rule: the budget is spent, or the median is already known to ±5 %.

    A size that spends its budget without that precision is flagged later (stats.instability);
    spending more time on a noisy machine buys little, as the interval narrows with sqrt(n).
    """
    count = samples.size
    if count < MIN_SAMPLES:
        return False
    if count >= MAX_SAMPLES or timed >= min_time:
        return True
    ordered = np.sort(samples)
    low, high = median_ci(ordered)
    width = ci_halfwidth_pct(float(np.median(ordered)), low, high)
    return width <= PRECISION_PCT and timed >= EARLY_FRACTION * min_time
