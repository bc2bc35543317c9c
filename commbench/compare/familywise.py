"""The gate judged per run: a run fails only when its ``slower`` rows survive Holm's correction
for the number of rows compared, at a family-wise ``--alpha`` (1 % by default).

Why: a 95 % interval per row is a 5 % false alarm per row, and a run compares many rows (the
recipe's 1M-1G sweep alone is 11), so a per-row gate fails a run of nothing far more often
than any row does. Holm's step-down rule keeps the chance that *any* row of an unchanged run
is called slower at or below ``alpha`` (whatever the rows' dependence), and loses less power
than Bonferroni. A row keeps its per-row verdict in the table; the family-wise one sits beside
it, and only that one fails ``--fail-on-regression``.

Each row's p-value comes with its interval: the method that made the interval fills
``p_row`` (the paired launch test of ``ab`` its Student t p-value); where it did not, the
p-value is read off the 95 % interval on the log scale (centre / (half-width / 1.96)), which
the bootstrap's own tail count cannot give below 1 / 2000. Data in, data out; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from commbench.core.errors import UsageError

DEFAULT_ALPHA = 0.01
RULE = "Holm"
Z95 = 1.959963984540054  # the 95 % interval's normal quantile
HELD = ("slower", "faster")  # the verdicts a family-wise test can uphold
NOT_HELD = "n.s."  # a per-row slower/faster that the correction does not uphold


@dataclass(frozen=True)
class Gate:
    """What the gate judged: the rule, its level, the rows in the family, and how many
    slower (faster) rows held."""

    alpha: float
    rows: int
    slower: int
    faster: int
    rule: str = RULE

    def line(self) -> str:
        """The summary's words: the rule and the level, then what held."""
        return (f"gate: {self.rule} over {self.rows} row(s) at family-wise alpha "
                f"{_percent(self.alpha)}: {self.slower} slower row(s) hold")


def _percent(value: float) -> str:
    return f"{value * 100:g}%"


def parse_alpha(value: float | str) -> float:
    """``--alpha``: 0.01 or 1%; refused outside (0, 0.5) (a level of 0.5 or more would call
    a coin toss significant)."""
    text = str(value).strip()
    try:
        alpha = float(text.rstrip("%"))
    except ValueError:
        raise UsageError(f"bad --alpha {value!r}: use e.g. 0.01 or 1%") from None
    if text.endswith("%"):
        alpha /= 100
    if not (0 < alpha < 0.5):
        raise UsageError(f"bad --alpha {value!r}: it must lie between 0 and 0.5 (e.g. 0.01)")
    return alpha


def interval_p_value(lo: float, hi: float) -> float:
    """Two-sided p-value of 'the ratio is 1' from a 95 % interval (lo, hi) of a ratio, read
    on the log scale as a normal one. NaN where there is no interval."""
    if not (lo > 0 and hi > 0) or not (math.isfinite(lo) and math.isfinite(hi)):
        return float("nan")
    centre = (math.log(lo) + math.log(hi)) / 2
    spread = (math.log(hi) - math.log(lo)) / (2 * Z95)
    if spread <= 0:
        return 0.0 if centre != 0 else 1.0
    return math.erfc(abs(centre) / spread / math.sqrt(2))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the given order: a row holds at level alpha when its
    adjusted p-value is at most alpha. A missing p-value (NaN) counts as 1: the row is in
    the family but can never hold."""
    values = [1.0 if p != p else float(p) for p in p_values]
    order = sorted(range(len(values)), key=values.__getitem__)
    adjusted = [1.0] * len(values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(values) - rank) * values[index]))
        adjusted[index] = running
    return adjusted


def judge(frame, alpha: float = DEFAULT_ALPHA) -> Gate:
    """Add ``p_row`` (where the interval's method left none), ``p_holm`` and ``familywise``
    to a comparison frame (in place), and return the gate's verdict over it."""
    if "p_row" not in frame:
        frame["p_row"] = float("nan")
    p_row = [p if p == p else interval_p_value(lo, hi) for p, lo, hi in
             zip(frame["p_row"], frame["ratio_lo"], frame["ratio_hi"], strict=True)]
    frame["p_row"] = p_row
    frame["p_holm"] = holm(p_row)
    frame["familywise"] = [
        (said if p <= alpha else NOT_HELD) if said in HELD else "-"
        for said, p in zip(frame["verdict"], frame["p_holm"], strict=True)]
    held = list(frame["familywise"])
    return Gate(alpha, len(held), held.count("slower"), held.count("faster"))
