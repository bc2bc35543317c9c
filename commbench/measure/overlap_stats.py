"""From the four sides of an overlap measurement to a row's overlap columns. Pure: numbers in,
numbers out, tested without a process.

The four sides, each timed in blocks, every round (docs/reference/metrics-and-formulas.md,
"Overlap and contention"):

- ``comm_alone``: seconds per call of the collective with nothing beside it;
- ``comm_beside``: the same calls while the compute runs beside them on every rank;
- ``compute_alone``: seconds per kernel (one matmul) with no collective running;
- ``compute_beside``: seconds per kernel while the collective runs (the kernels that started
  and ended inside a block of ``comm_beside``: both sides of that block ran together).

``comm_slowdown`` = median(comm_beside) / median(comm_alone), ``compute_slowdown`` likewise.
Their 95 % intervals are a paired bootstrap over rounds: a round holds all four sides, timed
one after the other, so a slow spell of the machine lands on both sides of a ratio; resampling
whole rounds keeps that pairing (stats.ratio_interval resamples two independent runs apart).

``overlap_efficiency`` is defined for a fixed pair of workloads: the K calls of a beside block
and the matmuls that ran beside them in the same window, ``t_both`` (the window). Alone, the
same work takes t_comm = t_both / comm_slowdown and t_compute = t_both / compute_slowdown, so

    efficiency = (t_comm + t_compute - t_both) / min(t_comm, t_compute)
               = (1/s_comm + 1/s_compute - 1) / min(1/s_comm, 1/s_compute)

1 = the shorter side fully hidden (neither slowed), 0 = serialised (each ran at the rate that
sharing the time equally gives), below 0 = worse than running them one after the other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from commbench.core.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE
from commbench.results.overlap import efficiency


@dataclass(frozen=True)
class OverlapColumns:
    """The overlap columns of a results row (results.schema.Row)."""

    overlap: str
    comm_slowdown: float
    comm_slowdown_lo: float
    comm_slowdown_hi: float
    compute_slowdown: float
    compute_slowdown_lo: float
    compute_slowdown_hi: float
    compute_gflops_alone: float
    compute_gflops_beside: float
    overlap_efficiency: float
    lat_us_p50_alone: float

    def as_columns(self) -> dict:
        return {name: (round(value, 6) if isinstance(value, float) else value)
                for name, value in asdict(self).items()}


def paired_ratio(base: list[np.ndarray], new: list[np.ndarray],
                 confidence: float = CONFIDENCE, seed: int = BOOTSTRAP_SEED,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float, float]:
    """median(new) / median(base), and its percentile-bootstrap interval, where ``base[r]``
    and ``new[r]`` are the samples of round r: rounds are drawn with replacement, the same
    rounds for both sides, then samples within each drawn round. Deterministic (seeded)."""
    rounds = [r for r in range(len(base)) if base[r].size and new[r].size]
    if not rounds:
        return math.nan, math.nan, math.nan
    ratio = float(np.median(np.concatenate([new[r] for r in rounds]))
                  / np.median(np.concatenate([base[r] for r in rounds])))
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    for index in range(resamples):
        drawn = rng.choice(rounds, size=len(rounds))
        sides = []
        for side in (base, new):
            picked = [side[r][rng.integers(0, side[r].size, side[r].size)] for r in drawn]
            sides.append(float(np.median(np.concatenate(picked))))
        ratios[index] = sides[1] / sides[0]
    alpha = 1 - confidence
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return ratio, min(float(low), ratio), max(float(high), ratio)


def matmul_gflops(side: int, seconds: float) -> float:
    """2·N³ floating-point operations (N² dot products of length N) per second, in 1e9."""
    return 2 * side**3 / seconds / 1e9 if seconds > 0 else 0.0


def columns(overlap: str, side: int, comm_alone: list[np.ndarray],
            comm_beside: list[np.ndarray], compute_alone: list[np.ndarray],
            compute_beside: list[np.ndarray], messages: int = 1) -> OverlapColumns:
    """A row's overlap columns from the four sides' samples, round by round (seconds per call
    and per kernel, already combined over ranks). With no compute (side 0) the compute side
    is 1 by definition, its interval [1, 1]: there is nothing to slow."""
    comm, comm_lo, comm_hi = paired_ratio(comm_alone, comm_beside)
    alone_s = float(np.median(np.concatenate(comm_alone))) if comm_alone else math.nan
    if side:
        compute, compute_lo, compute_hi = paired_ratio(compute_alone, compute_beside)
        kernel_alone = float(np.median(np.concatenate(compute_alone)))
        beside = np.concatenate(compute_beside)
        kernel_beside = float(np.median(beside)) if beside.size else math.nan
    else:
        compute = compute_lo = compute_hi = 1.0
        kernel_alone = kernel_beside = 0.0
    return OverlapColumns(
        overlap=overlap,
        comm_slowdown=comm,
        comm_slowdown_lo=comm_lo,
        comm_slowdown_hi=comm_hi,
        compute_slowdown=compute,
        compute_slowdown_lo=compute_lo,
        compute_slowdown_hi=compute_hi,
        compute_gflops_alone=matmul_gflops(side, kernel_alone),
        compute_gflops_beside=matmul_gflops(side, kernel_beside)
        if math.isfinite(kernel_beside) else 0.0,
        overlap_efficiency=efficiency(comm, compute) if side else 1.0,
        lat_us_p50_alone=alone_s * 1e6 / messages,
    )
