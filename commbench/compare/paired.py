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
torch. Student's t lives in core/student.py.
"""

from __future__ import annotations

import math

from commbench.compare.runs import compare_rows, verdict
from commbench.core.student import paired_t
from commbench.results.launches import plain
from commbench.results.schema import KEY_COLUMNS


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
