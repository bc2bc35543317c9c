"""Student's t wherever the launch is the unit: ``ab``'s paired launch ratios, ``compare``'s
two ``--repeat`` runs (Welch's test on their launch medians), and the overlap slowdowns of a
``--repeat`` run pooled over its launches (results.launches).

Why the t distribution and not the normal: a gate judges five or ten launches a side, and at
a family-wise 1 % the normal quantile (2.58) is far below t's with 4-8 degrees of freedom
(3.4-4.6); p-values read as normal from so few launches call a run of nothing slower several
times as often as the level says. Computed here (the regularised incomplete beta function), so
the analysis needs no SciPy; the tests check it against SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95


def paired_t(logs: Sequence[float], confidence: float = CONFIDENCE
             ) -> tuple[float, float, float, float]:
    """(mean, lo, hi, two-sided p) of the mean of ``logs`` (two or more) under Student's t."""
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
    if sd == 0:
        return mean, mean, mean, (1.0 if mean == 0 else 0.0)
    se = sd / math.sqrt(n)
    quantile = t_quantile((1 + confidence) / 2, n - 1)
    return mean, mean - quantile * se, mean + quantile * se, t_two_sided_p(mean / se, n - 1)


def welch_t(base: Sequence[float], new: Sequence[float], confidence: float = CONFIDENCE
            ) -> tuple[float, float, float, float]:
    """(difference, lo, hi, two-sided p) of mean(new) - mean(base), two or more values a
    side, under Welch's t (unequal variances, Welch-Satterthwaite degrees of freedom)."""
    n, m = len(base), len(new)
    mean_b, mean_n = sum(base) / n, sum(new) / m
    var_b = sum((v - mean_b) ** 2 for v in base) / (n - 1) / n
    var_n = sum((v - mean_n) ** 2 for v in new) / (m - 1) / m
    difference = mean_n - mean_b
    if var_b + var_n == 0:
        return difference, difference, difference, (1.0 if difference == 0 else 0.0)
    se = math.sqrt(var_b + var_n)
    df = (var_b + var_n) ** 2 / (var_b ** 2 / (n - 1) + var_n ** 2 / (m - 1))
    quantile = t_quantile((1 + confidence) / 2, df)
    return (difference, difference - quantile * se, difference + quantile * se,
            t_two_sided_p(difference / se, df))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (q > 0.5) of Student's t, by bisection on the two-sided p."""
    target = 2 * (1 - q)
    low, high = 0.0, 1e6
    for _ in range(200):
        middle = (low + high) / 2
        if t_two_sided_p(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (Numerical Recipes 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1 - front * _continued_fraction(b, a, 1 - x) / b


def _continued_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 3e-15:
            break
    return result
