"""Latency statistics over samples, with a distribution-free confidence interval of the median.

Communication timings are skewed (a long right tail from the OS, the network, the other ranks),
so the median is the headline and its interval comes from order statistics (the binomial
method), which assumes no distribution. Two corrections keep the interval honest:

- samples are taken one after the other and drift (a busy neighbour, a clock change), so
  neighbours are correlated and n samples carry less information than n independent ones; the
  interval uses the effective sample size n·(1-ρ)/(1+ρ), ρ the lag-1 autocorrelation;
- the adaptive loop looks at the interval after every round and stops at the first narrow one,
  which alone would make a narrow interval likelier than its level says; it stops on a 99 %
  interval (``STOP_CONFIDENCE``) and reports the 95 % one.

The mean is computed separately, from per-rank loop totals (see measure.rows), because that is
what a training step pays on average and what nccl-tests reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

CONFIDENCE = 0.95
STOP_CONFIDENCE = 0.99
MAX_AUTOCORRELATION = 0.9  # beyond this the effective size would be a handful: cap it
# A size is flagged unstable (like pyperf / hyperfine do) when its median is this uncertain...
UNSTABLE_CI_PCT = 10.0
# ... or a tenth of its blocks this slow. Not the p99: of 50 blocks the p99 is the slowest one or
# two, and on the 2-core VM one block in 50 always meets a scheduler stall (3-8x the median in
# 13 of 24 rows of a bound default sweep) that moves no median; the p99 column still shows it.
UNSTABLE_TAIL_SHARE = 90  # percentile of the blocks
UNSTABLE_TAIL_RATIO = 2.0


@dataclass(frozen=True)
class LatencyStats:
    """Per-size statistics, microseconds."""

    p50: float
    min: float
    mean: float
    p90: float
    p99: float
    max: float
    std: float
    ci_lo: float
    ci_hi: float
    p10: float

    def as_columns(self) -> dict[str, float]:
        """The ``lat_us_*`` columns of a results row."""
        return {f"lat_us_{name}": value for name, value in asdict(self).items()}


def combine_ranks(values: np.ndarray, mode: str) -> np.ndarray:
    """Per-rank values (ranks x ...) combined over ranks as ``--rank-time`` says. The rows are
    the ranks that take part, in rank order: ``rank0`` is the first of them (rank 0, a
    group's first rank, or the first rank of the first p2p pair)."""
    if mode == "avg":
        return values.mean(axis=0)
    if mode == "max":
        return values.max(axis=0)
    if mode == "min":
        return values.min(axis=0)
    if mode == "rank0":
        return values[0]
    raise ValueError(f"unknown rank-time mode {mode!r}")


def effective_size(samples: np.ndarray) -> float:
    """n·(1-ρ)/(1+ρ) for samples in the order they were taken (ρ: lag-1 autocorrelation,
    negative values read as 0, capped at MAX_AUTOCORRELATION)."""
    n = samples.size
    if n < 3 or float(np.std(samples)) == 0.0:
        return float(n)
    centred = samples - samples.mean()
    rho = float(np.dot(centred[:-1], centred[1:]) / np.dot(centred, centred))
    rho = min(max(rho, 0.0), MAX_AUTOCORRELATION)
    return n * (1 - rho) / (1 + rho)


def median_ci(ordered: np.ndarray, confidence: float = CONFIDENCE,
              effective: float | None = None) -> tuple[float, float]:
    """Order-statistic interval of the median of already sorted values.

    With m independent values, the number below the true median is Binomial(m, 1/2); the
    interval runs from the j-th to the (m-j+1)-th value with j its alpha/2 quantile. With
    correlated values m is the effective size and the ranks j/m are placed on the n values.
    Below 6 (effective) values no interval reaches 95 %, and min..max is the honest answer.
    """
    n = len(ordered)
    m = n if effective is None else max(1, min(n, int(effective)))
    alpha = 1 - confidence
    j = _binomial_half_quantile(alpha / 2, m)
    if j < 1:
        return float(ordered[0]), float(ordered[-1])
    low = max(0, round(j * n / m) - 1)
    return float(ordered[low]), float(ordered[n - 1 - low])


def _binomial_half_quantile(q: float, n: int) -> int:
    """Smallest k with P(Binomial(n, 1/2) <= k) >= q, summed exactly in integers."""
    share = Fraction(q).limit_denominator(10**6)
    total, k = 0, -1
    while total * share.denominator < share.numerator * 2**n:  # integers: no overflow
        k += 1
        total += math.comb(n, k)
    return k


def summarize(samples_us: Sequence[float], tail_us: Sequence[float] | None = None,
              mean_us: float | None = None) -> LatencyStats:
    """Statistics of one size.

    ``samples_us``: one value per block, in the order taken (the median and its interval);
    ``tail_us``: single-call latencies where they were timed (min, p10, p90, p99, max, std;
    else the blocks); ``mean_us``: the mean from loop totals (else the samples' mean).
    """
    taken = np.asarray(samples_us, dtype=np.float64)
    if taken.size == 0:
        raise ValueError("no samples")
    values = np.sort(taken)
    tail = values if tail_us is None or len(tail_us) == 0 else np.sort(
        np.asarray(tail_us, dtype=np.float64))
    p50 = float(np.percentile(values, 50))
    p10, p90, p99 = (float(v) for v in np.percentile(tail, [10, 90, 99]))
    ci_lo, ci_hi = median_ci(values, effective=effective_size(taken))
    return LatencyStats(
        p50=p50,
        min=float(tail[0]),
        mean=float(values.mean()) if mean_us is None else float(mean_us),
        p90=p90,
        p99=p99,
        max=float(tail[-1]),
        std=float(tail.std(ddof=1)) if tail.size > 1 else 0.0,
        ci_lo=min(ci_lo, p50),
        ci_hi=max(ci_hi, p50),
        p10=p10,
    )


def ci_halfwidth_pct(p50: float, ci_lo: float, ci_hi: float) -> float:
    """The wider side of the median's interval, as a percentage of the median."""
    if p50 <= 0:
        return 0.0
    return max(p50 - ci_lo, ci_hi - p50) / p50 * 100


def instability(p50: float, p90: float, ci_lo: float, ci_hi: float) -> str:
    """Why a size's numbers should not be trusted, or '' when they can be. ``p90``: of the
    block samples (a tenth of the blocks at 2x the median: the machine was busy with
    something else a tenth of the time)."""
    reasons = []
    width = ci_halfwidth_pct(p50, ci_lo, ci_hi)
    if width > UNSTABLE_CI_PCT:
        reasons.append(f"median uncertain by ±{width:.0f}%")
    if p50 > 0 and p90 > UNSTABLE_TAIL_RATIO * p50:
        reasons.append(f"a tenth of the blocks took {p90 / p50:.1f}x the median or more")
    return "; ".join(reasons)


def unstable_advice(config: dict | None = None) -> str:
    """What to rerun unstable rows with, for the run's ``config`` (run.json's): where
    -n/--iters fixed the iterations, --min-time changes nothing, so more iterations are what
    applies; otherwise a longer --min-time."""
    fixed = bool(config) and config.get("iters") is not None
    longer = "more -n/--iters" if fixed else "a larger --min-time"
    return (f"rows are unstable: rerun with {longer} or --rounds, or on an idle machine; "
            "compare's intervals are wide for them")


UNSTABLE_ADVICE = unstable_advice()  # a run timed by --min-time (the default)


# ---- the interval of a ratio of medians, for compare ------------------------------------------

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 17  # fixed: the same two runs always get the same verdicts

# A side of a comparison: launches, each a list of rounds, each the samples (blocks) it timed.
Nested = list[list[np.ndarray]]


def pseudo_rounds(samples: np.ndarray) -> list[np.ndarray]:
    """Contiguous batches of a size's samples for a row that kept no rounds: batches as long
    as the samples' correlation length n / n_eff (neighbouring blocks drift together), so the
    bootstrap resamples nearly independent pieces, as a block bootstrap does."""
    n = samples.size
    length = max(1, math.ceil(n / max(effective_size(samples), 1.0)))
    return [samples[i:i + length] for i in range(0, n, length)]


def resampled_medians(launches: Nested, rng: np.random.Generator,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """Medians of ``resamples`` hierarchical bootstrap copies of a side: launches with
    replacement, then rounds within each chosen launch, then samples within each chosen
    round; each copy keeps the original's shape (launch, round and sample slots).

    Resampling every level counts each level's spread (a slow launch, a slow round, a noisy
    round); the within-round level is counted a second time through the round medians, which
    errs towards wider intervals, the safe side for a gate.
    """
    rounds = [r for launch in launches for r in launch if r.size]
    per_launch = np.array([sum(1 for r in launch if r.size) for launch in launches])
    keep = per_launch > 0
    per_launch = per_launch[keep]
    values = np.concatenate(rounds)
    lengths = np.array([r.size for r in rounds])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    first_round = np.concatenate([[0], np.cumsum(per_launch)[:-1]])
    count = per_launch.size
    launch_of_slot = np.repeat(np.arange(count), per_launch)  # round slot -> launch slot
    chosen_launch = rng.integers(0, count, (resamples, count))[:, launch_of_slot]
    within = (rng.random(chosen_launch.shape) * per_launch[chosen_launch]).astype(np.int64)
    chosen_round = first_round[chosen_launch] + within  # resamples x round slots
    round_of_slot = np.repeat(np.arange(lengths.size), lengths)  # sample slot -> round slot
    picked = chosen_round[:, round_of_slot]  # resamples x sample slots
    index = starts[picked] + (rng.random(picked.shape) * lengths[picked]).astype(np.int64)
    return np.median(values[index], axis=1)


@dataclass(frozen=True)
class RatioInterval:
    """new / base of the medians, with the bootstrap's interval and two-sided p-value."""

    lo: float
    hi: float
    p_value: float


def ratio_interval(base: Nested, new: Nested, confidence: float = CONFIDENCE,
                   seed: int = BOOTSTRAP_SEED) -> RatioInterval:
    """Percentile bootstrap interval of median(new) / median(base), each side resampled on
    its own (the runs are independent). ``p_value``: twice the share of copies on the far
    side of 1, (k + 1) / (B + 1) so that it is never 0."""
    rng = np.random.default_rng(seed)
    ratios = resampled_medians(new, rng) / resampled_medians(base, rng)
    alpha = 1 - confidence
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    tail = min(np.count_nonzero(ratios <= 1), np.count_nonzero(ratios >= 1))
    p_value = min(1.0, 2 * (tail + 1) / (ratios.size + 1))
    return RatioInterval(float(lo), float(hi), p_value)


def rounds_interval(samples: np.ndarray, round_counts: Sequence[int],
                    confidence: float = CONFIDENCE, seed: int = BOOTSTRAP_SEED
                    ) -> tuple[float, float]:
    """Interval of the median of samples taken in interleaved rounds (``round_counts``: the
    samples of each round, in order): the bootstrap over rounds, then blocks within a round,
    so a slow spell that hit one round widens it. Deterministic (seeded): every rank that
    computes it from the same gathered samples gets the same answer."""
    values = np.asarray(samples, dtype=np.float64)
    rounds = np.split(values, np.cumsum(round_counts)[:-1])
    medians = resampled_medians([rounds], np.random.default_rng(seed))
    alpha = 1 - confidence
    lo, hi = np.quantile(medians, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)
