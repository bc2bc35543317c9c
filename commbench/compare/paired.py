"""``ab``'s test: each row judged on its paired launch ratios.

``ab`` runs side A and side B in alternated launches (A B B A A B ...), so the machine's slow
spells and the level a fresh launch lands on (the 2-core VM has two, 1.3x apart) hit both
sides alike. Launch i of B over launch i of A is one ratio; the row's ratio is their geometric
mean, and its 95 % interval and p-value are Student's t on the log ratios (n - 1 degrees of
freedom), the paired test Chromium's Pinpoint and asv's ``continuous`` rest on. A pair holds
each side's launch median (which already averages that launch's rounds and blocks), so the
spread between pairs is the whole noise of a launch, within and between. A side's time in the
table is the geometric mean of its paired launch medians, so that new / baseline is the ratio
the pairs give.

Rows in, a comparison frame out (compare_rows' columns: verdicts, ratio and interval); no
torch. The t distribution is computed here (the regularised incomplete beta function), so the
analysis needs no SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from commbench.compare.runs import compare_rows, verdict
from commbench.results.launches import plain
from commbench.results.schema import KEY_COLUMNS

CONFIDENCE = 0.95


def paired_rows(a_rows: list[dict], b_rows: list[dict], threshold: float):
    """compare_rows of side A (base) and B (new), then every row's ratio, interval, p-value
    and verdict from its paired launch ratios. Returns (frame, apart, missing)."""
    frame, apart, missing = compare_rows(a_rows, b_rows, "lat_us_p50", threshold)
    a_launches, b_launches = _launch_medians(a_rows), _launch_medians(b_rows)
    ratios, lows, highs, p_rows, tests, verdicts = [], [], [], [], [], []
    bases, news = [], []
    for record in frame.to_dict("records"):
        key = tuple(plain(record.get(k)) for k in KEY_COLUMNS)
        a, b = a_launches.get(key, {}), b_launches.get(key, {})
        pairs = [i for i in sorted(set(a) & set(b)) if a[i] > 0 and b[i] > 0]
        logs = [math.log(b[i] / a[i]) for i in pairs]
        if len(logs) >= 2:  # each side's time: the geometric mean of its paired launches,
            # so that new / baseline is the ratio the pairs give
            bases.append(math.exp(sum(math.log(a[i]) for i in pairs) / len(pairs)))
            news.append(math.exp(sum(math.log(b[i]) for i in pairs) / len(pairs)))
        else:
            bases.append(record["baseline"])
            news.append(record["new"])
        if len(logs) < 2:  # one pair tells no spread: the bootstrap of the pooled launches
            ratios.append(record["ratio"])
            lows.append(record["ratio_lo"])
            highs.append(record["ratio_hi"])
            p_rows.append(float("nan"))
            tests.append(record["test"])
            verdicts.append(record["verdict"])
            continue
        centre, lo, hi, p_value = paired_t(logs)
        ratios.append(math.exp(centre))
        lows.append(math.exp(lo))
        highs.append(math.exp(hi))
        p_rows.append(p_value)
        tests.append(f"paired t over {len(logs)} launch ratios")
        verdicts.append(verdict(math.exp(centre), math.exp(lo), math.exp(hi), threshold))
    frame["baseline"], frame["new"] = bases, news
    frame["delta_us"] = [n - b for b, n in zip(bases, news, strict=True)]
    frame["ratio"], frame["ratio_lo"], frame["ratio_hi"] = ratios, lows, highs
    frame["p_row"], frame["test"], frame["verdict"] = p_rows, tests, verdicts
    frame["significant"] = [low > 1 or high < 1 for low, high in zip(lows, highs, strict=True)]
    return frame, apart, missing


def _launch_medians(rows: list[dict]) -> dict[tuple, dict[int, float]]:
    """Per measurement (KEY_COLUMNS), each launch's median time."""
    found: dict[tuple, dict[int, float]] = {}
    for row in rows:
        key = tuple(plain(row.get(k)) for k in KEY_COLUMNS)
        launch = plain(row.get("launch"))
        found.setdefault(key, {})[int(launch or 0)] = float(row["lat_us_p50"])
    return found


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
