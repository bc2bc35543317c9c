"""Change points in one series of run values: a pure function, no store, no I/O.

Why these pieces:

- **ruptures** (its C-backed ``KernelCPD`` with the linear kernel, i.e. PELT on the least
  squares cost) proposes where the mean of the log values moves. It is a maintained library with
  the textbook exact search (PELT, Killick et al. 2012), it is fast enough for thousands of
  series (C, not Python loops), and it leaves the decision of what counts to us. Its penalty is
  set from the series' own noise: sigma is the robust spread of run-to-run differences (MAD of
  first differences / sqrt 2, which a step moves by one term only), and the penalty is
  ``PENALTY * sigma**2 * log(n)`` (a BIC-style term in the units of the cost).
- A **permutation test** then keeps only what noise cannot explain: for each proposed change,
  the window between its neighbours is shuffled ``PERMUTATIONS`` times and the largest
  standardised difference of means over every split of the window is compared with the
  observed one (the max over splits pays for having searched). It assumes nothing about the
  noise's shape beyond exchangeability, so a bimodal runner or a heavy tail widens the null
  instead of producing false alarms. The least significant change is dropped and the rest
  retested until all pass ``ALPHA`` divided by the number of changes still proposed
  (Bonferroni: k proposals are k chances for noise) -- E-Divisive's pruning, with ruptures'
  search.
- Values are compared as logs: a 1.25x step is the same size at 8 bytes and at 1 GiB, and a
  slow run costs as much as a fast one gains.

A change needs ``MIN_SIZE`` runs on each side: one odd night is an outlier, three in a row a
change, so a step is flagged on the third run after it. A permutation test cannot be surer than
the arrangements of its window allow: three runs at the end of n are as extreme as chance makes
them in 2 of C(n, 3) shuffles, so a 3-run step needs about 12 complete runs in the series
(2/220 < 1 %) before it can count; a longer step, fewer. The constants are calibrated by
``bench/history.py`` (``make bench``, section history): flat series at the spread measured on
real nightly runs here and at 3 % must show at most 1 false change per 100 series of 30 runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SIZE = 3  # runs on each side of a change
PENALTY = 3.0  # x sigma^2 log(n): ruptures' penalty per change
ALPHA = 0.01  # the permutation test's level, per change
PERMUTATIONS = 199  # p-values down to 1/200
NOISE_FLOOR = 1e-3  # log units: a series steadier than 0.1 % is taken as 0.1 % noisy
SEED = 20261201  # the same series always gets the same answer


@dataclass(frozen=True)
class ChangePoint:
    """A change before run ``index`` (the first run after it, 0-based in the series)."""

    index: int
    before: float  # mean of the values from the previous change (or the start) to index
    after: float  # mean from index to the next change (or the end)
    p_value: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf


def noise_scale(logs: np.ndarray) -> float:
    """Robust run-to-run spread of log values: MAD of first differences / sqrt(2)."""
    if len(logs) < 3:
        return NOISE_FLOOR
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2), NOISE_FLOOR)


def _split_statistics(windows: np.ndarray, min_size: int) -> np.ndarray:
    """|mean(after) - mean(before)| / sqrt(1/k + 1/(m-k)) for every split k of each row,
    max over the splits with ``min_size`` values on each side."""
    m = windows.shape[1]
    cumulative = np.cumsum(windows, axis=1)
    total = cumulative[:, -1:]
    k = np.arange(min_size, m - min_size + 1)
    before = cumulative[:, k - 1] / k
    after = (total - cumulative[:, k - 1]) / (m - k)
    return (np.abs(after - before) / np.sqrt(1.0 / k + 1.0 / (m - k))).max(axis=1)


def permutation_p(window: np.ndarray, min_size: int = MIN_SIZE,
                  permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """P-value of 'this window holds a change in mean' against shuffles of the same values."""
    if len(window) < 2 * min_size:
        return 1.0
    observed = _split_statistics(window[None, :], min_size)[0]
    if observed <= 0:
        return 1.0
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.broadcast_to(window, (permutations, len(window))), axis=1)
    exceed = int(np.count_nonzero(_split_statistics(shuffled, min_size) >= observed * (1 - 1e-12)))
    return (1 + exceed) / (1 + permutations)


def _candidates(logs: np.ndarray, min_size: int, penalty: float) -> list[int]:
    import ruptures

    sigma = noise_scale(logs)
    search = ruptures.KernelCPD(kernel="linear", min_size=min_size, jump=1).fit(
        logs.reshape(-1, 1))
    ends = search.predict(pen=penalty * sigma * sigma * math.log(len(logs)))
    return [int(end) for end in ends[:-1]]  # the last "end" is the series' end


def find_change_points(values: Sequence[float], *, min_size: int = MIN_SIZE,
                       alpha: float = ALPHA, penalty: float = PENALTY) -> list[ChangePoint]:
    """Significant changes in the mean of ``values`` (positive numbers, in time order)."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2 * min_size or not np.all(np.isfinite(data)) or np.any(data <= 0):
        return []
    logs = np.log(data)
    if float(np.ptp(logs)) == 0.0:
        return []
    cuts = _candidates(logs, min_size, penalty)
    p_values: list[float] = []
    while cuts:
        bounds = [0, *cuts, len(logs)]
        p_values = [permutation_p(logs[bounds[i]:bounds[i + 2]], min_size)
                    for i in range(len(cuts))]
        weakest = int(np.argmax(p_values))
        if p_values[weakest] <= alpha / len(cuts):  # Bonferroni over the candidates
            break
        del cuts[weakest]
    bounds = [0, *cuts, len(data)]
    return [ChangePoint(index=cut, before=float(data[bounds[i]:cut].mean()),
                        after=float(data[cut:bounds[i + 2]].mean()), p_value=p_values[i])
            for i, cut in enumerate(cuts)]


def verdict(change: ChangePoint, threshold: float, higher_is_worse: bool = True) -> str:
    """regression / improvement beyond ``threshold`` (0.05 = 5 %); '' within it."""
    if abs(change.ratio - 1.0) <= threshold:
        return ""
    worse = change.ratio > 1.0 if higher_is_worse else change.ratio < 1.0
    return "regression" if worse else "improvement"
