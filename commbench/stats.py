"""Latency statistics over samples, with a distribution-free confidence interval of the median.

Communication timings are skewed (a long right tail from the OS, the network, the other ranks),
so the median is the headline and its interval comes from order statistics (the binomial
method), which assumes no distribution. The mean is still reported because it is what a
training step pays on average and what a hand-written loop average measures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

CONFIDENCE = 0.95
# A size is flagged unstable (like pyperf / hyperfine do) when its median is this uncertain...
UNSTABLE_CI_PCT = 10.0
# ... or its tail this heavy.
UNSTABLE_TAIL_RATIO = 3.0


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


def median_ci(ordered: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Order-statistic interval of the median of already sorted values.

    With n values, the number below the true median is Binomial(n, 1/2); the interval runs from
    the j-th to the (n-j+1)-th value with j its alpha/2 quantile. Below 6 values no interval
    reaches 95 %, and min..max is the honest answer.
    """
    n = len(ordered)
    alpha = 1 - confidence
    j = _binomial_half_quantile(alpha / 2, n)
    if j < 1:
        return float(ordered[0]), float(ordered[-1])
    return float(ordered[j - 1]), float(ordered[n - j])


def _binomial_half_quantile(q: float, n: int) -> int:
    """Smallest k with P(Binomial(n, 1/2) <= k) >= q (scipy's binom.ppf)."""
    try:
        from scipy.stats import binom
    except ImportError:  # lean GPU images ship without scipy: the exact sum is just as good
        share = Fraction(q).limit_denominator(10**6)
        total, k = 0, -1
        while total * share.denominator < share.numerator * 2**n:  # integers: no overflow
            k += 1
            total += math.comb(n, k)
        return k
    return int(binom.ppf(q, n, 0.5))


def summarize(samples_us: Sequence[float]) -> LatencyStats:
    """Statistics of one size's samples (each already the slowest rank's time)."""
    values = np.sort(np.asarray(samples_us, dtype=np.float64))
    if values.size == 0:
        raise ValueError("no samples")
    p10, p50, p90, p99 = np.percentile(values, [10, 50, 90, 99])
    ci_lo, ci_hi = median_ci(values)
    return LatencyStats(
        p50=float(p50),
        min=float(values[0]),
        mean=float(values.mean()),
        p90=float(p90),
        p99=float(p99),
        max=float(values[-1]),
        std=float(values.std(ddof=1)) if values.size > 1 else 0.0,
        ci_lo=ci_lo,
        ci_hi=ci_hi,
        p10=float(p10),
    )


def ci_halfwidth_pct(p50: float, ci_lo: float, ci_hi: float) -> float:
    """The wider side of the median's interval, as a percentage of the median."""
    if p50 <= 0:
        return 0.0
    return max(p50 - ci_lo, ci_hi - p50) / p50 * 100


def instability(p50: float, p99: float, ci_lo: float, ci_hi: float) -> str:
    """Why a size's numbers should not be trusted, or '' when they can be."""
    reasons = []
    width = ci_halfwidth_pct(p50, ci_lo, ci_hi)
    if width > UNSTABLE_CI_PCT:
        reasons.append(f"median uncertain by ±{width:.0f}%")
    if p50 > 0 and p99 > UNSTABLE_TAIL_RATIO * p50:
        reasons.append(f"p99 is {p99 / p50:.1f}x p50")
    return "; ".join(reasons)


UNSTABLE_ADVICE = (
    "sizes are unstable: rerun with a larger --min-time, on an idle machine, "
    "or pin ranks to cores; compare them with care"
)
