"""Noise from a history: each ratio's interval at least as wide as the run-to-run spread of
its series' past runs says it must be.

Why: one run's interval sees only what happened inside that run (its launches, rounds and
blocks). A runner that has a slow hour, or lands a whole run on a slow level, moves every row
of the run together, which no within-run interval can see; the series' own past medians can
(Otava/Hunter draw the noise from the series in the same way). ``spread`` is a robust SD of
the log median across the series' complete past runs (1.4826 x MAD); the log ratio of two runs
drawn from that series then spreads by sqrt(2) x spread, so its 95 % half-width is at least
1.96 x sqrt(2) x spread. The interval kept is the wider of that and the within-run one, about
the within-run one's centre: a steady series leaves the interval as it was, a noisy one widens
it. The spread already holds each past run's within-run noise, so adding the two would count
it twice.

With fewer than ``MIN_RUNS`` past runs (or no store) the spread is not used and the output
says the verdict rests on within-run noise only. Data in, data out; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from commbench.compare.familywise import Z95, interval_p_value

MIN_RUNS = 5
MAD_TO_SD = 1.4826  # a normal's SD from its median absolute deviation
WITHIN_ONLY = "within-run noise only"


@dataclass(frozen=True)
class RunSpread:
    """One row's series in the store: how many complete past runs it has, and their spread
    (SD of the log median, robust). ``spread`` is None below MIN_RUNS."""

    runs: int
    spread: float | None

    @property
    def used(self) -> bool:
        return self.spread is not None


def robust_log_spread(medians: Sequence[float]) -> RunSpread:
    """The spread of a series' past run medians, or none where there are too few."""
    logs = sorted(math.log(v) for v in medians if v and v > 0 and math.isfinite(v))
    if len(logs) < MIN_RUNS:
        return RunSpread(len(logs), None)
    centre = _median(logs)
    return RunSpread(len(logs), MAD_TO_SD * _median([abs(v - centre) for v in logs]))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def widened(lo: float, hi: float, spread: float) -> tuple[float, float]:
    """A time ratio's 95 % interval (lo, hi), at least as wide as two runs of a series with
    run-to-run ``spread`` make it, about the same centre on the log scale."""
    if not (lo > 0 and hi > 0):
        return lo, hi
    centre = (math.log(lo) + math.log(hi)) / 2
    half = max((math.log(hi) - math.log(lo)) / 2, Z95 * math.sqrt(2) * spread)
    return math.exp(centre - half), math.exp(centre + half)


def apply_run_spread(frame, spreads: Sequence[RunSpread | None], threshold: float,
                     metric: str, source: str) -> None:
    """Widen every row whose series has a usable spread, recompute its verdict, and name
    per row the noise it rests on (``noise``, ``run_spread``, ``history_runs``), in place."""
    from commbench.compare.runs import verdict

    noise, spread_used, runs_seen = [], [], []
    lows, highs, verdicts, p_rows = [], [], [], []
    for record, found in zip(frame.to_dict("records"), spreads, strict=True):
        lo, hi = record["ratio_lo"], record["ratio_hi"]
        ratio = record["ratio"]
        p_row = record.get("p_row", float("nan"))
        said = record["verdict"]
        runs_seen.append(found.runs if found else 0)
        if found is None or not found.used:
            noise.append("within-run" + (f" ({found.runs} past runs < {MIN_RUNS})"
                                          if found is not None else ""))
            spread_used.append(None)
        else:
            bandwidth = metric == "busbw_gbps"
            time_lo, time_hi = (1 / hi, 1 / lo) if bandwidth and lo and hi else (lo, hi)
            time_ratio = 1 / ratio if bandwidth and ratio else ratio
            new_lo, new_hi = widened(time_lo, time_hi, found.spread)
            if (new_lo, new_hi) != (time_lo, time_hi):
                said = verdict(time_ratio, new_lo, new_hi, threshold)
                p_row = interval_p_value(new_lo, new_hi)
                lo, hi = (1 / new_hi, 1 / new_lo) if bandwidth else (new_lo, new_hi)
            noise.append(f"within-run and run-to-run ({found.runs} runs in {source})")
            spread_used.append(found.spread)
        lows.append(lo)
        highs.append(hi)
        verdicts.append(said)
        p_rows.append(p_row)
    frame["ratio_lo"], frame["ratio_hi"], frame["verdict"] = lows, highs, verdicts
    frame["significant"] = [low > 1 or high < 1 for low, high in zip(lows, highs, strict=True)]
    frame["p_row"] = p_rows
    frame["noise"], frame["run_spread"], frame["history_runs"] = noise, spread_used, runs_seen


def holds_from(frame, alpha: float, threshold: float) -> float | None:
    """The smallest slowdown (a time ratio) at which any row judged with a history could hold
    under Holm's correction at ``alpha``; None where no row used one.

    Why: a history makes the gate quiet by widening intervals, and the price (the slowdowns
    it can no longer see) should be on the page, not found out. Holm's first step asks the
    most significant of the ``len(frame)`` rows for p <= alpha / rows; a row's interval is at
    least +-Z95 x sqrt(2) x spread on the log scale, read as a normal (SE sqrt(2) x spread),
    so its ratio must reach exp(z x sqrt(2) x spread), z the normal quantile of
    1 - alpha / (2 x rows), and beyond ``threshold``. The least noisy row sets the figure; a
    row's within-run interval can only make it larger."""
    if "run_spread" not in frame or not len(frame):
        return None
    spreads = [v for v in frame["run_spread"] if v is not None and v == v]
    if not spreads:
        return None
    z = NormalDist().inv_cdf(1 - alpha / (2 * len(frame)))
    return max(1 + threshold, math.exp(z * math.sqrt(2) * min(spreads)))


def noise_line(frame, source: str | None, floor: float | None = None) -> str:
    """The summary's words on what noise the verdicts rest on (``floor``: holds_from's
    figure, said where a history was used)."""
    if source is None or "run_spread" not in frame:
        return f"noise: {WITHIN_ONLY} (no --noise-from store)"
    used = sum(value is not None and value == value for value in frame["run_spread"])
    blind = (f"; at that spread no row can hold below {floor:.2f}x" if floor is not None
             else "")
    if used == len(frame):
        return f"noise: within-run and run-to-run from {source}{blind}"
    if used == 0:
        return (f"noise: {WITHIN_ONLY} ({source} holds fewer than {MIN_RUNS} past runs of "
                "every row's series)")
    return (f"noise: run-to-run from {source} on {used} of {len(frame)} rows; the rest "
            f"{WITHIN_ONLY} (fewer than {MIN_RUNS} past runs){blind}")
