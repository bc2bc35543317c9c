"""An --overlap row's columns that outlive the launch that measured them: the efficiency
formula (measure.overlap_stats computes a launch's row with it, results.launches a pooled
row's), and the pooling of K launches' overlap columns into one row.

Why the launch is the unit when a ``--repeat`` run is pooled: a fresh launch lands on a level
of its own (on the 2-core development VM, 4 ms scheduler stalls in a few or in many of its
calls), and a launch's comm_slowdown moves with it: the same command (allreduce 1 KiB beside
matmul:256) read 0.95x to 5.19x over 40 launches of 2026-12-07 (bench/overlap.py), and 3 of
their own intervals (the paired bootstrap over a launch's rounds) did not hold the median.
So K launches' ratios pool as ``ab`` pools its launch pairs: the geometric mean, and Student's
t over their logs (K - 1 degrees of freedom).
"""

from __future__ import annotations

import math
import statistics

from commbench.core.student import paired_t

SLOWDOWNS = ("comm_slowdown", "compute_slowdown")
MEDIANS = ("compute_gflops_alone", "compute_gflops_beside", "lat_us_p50_alone",
           "background_busbw")


def efficiency(comm_slowdown: float, compute_slowdown: float) -> float:
    """(t_comm + t_compute - t_both) / min(t_comm, t_compute) for the pair of workloads that
    ran together in one window t_both (measure.overlap_stats' docstring derives it)."""
    if not (comm_slowdown > 0 and compute_slowdown > 0):
        return math.nan
    comm, compute = 1 / comm_slowdown, 1 / compute_slowdown  # t_side / t_both
    return (comm + compute - 1) / min(comm, compute)


def pooled_overlap(part: list[dict]) -> dict:
    """The overlap (and background) columns of one row pooled from its launches' rows:
    each slowdown the geometric mean of the launches' ratios with Student's t interval over
    them, rates and the alone latency the median launch's, the efficiency recomputed from the
    pooled slowdowns. Columns a launch lacks are left as the first launch's."""
    pooled: dict = {}
    for name in SLOWDOWNS:
        values = [_number(row.get(name)) for row in part]
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < 2:
            continue
        centre, low, high, _ = paired_t(logs)
        pooled[name] = math.exp(centre)
        pooled[f"{name}_lo"], pooled[f"{name}_hi"] = math.exp(low), math.exp(high)
    for name in MEDIANS:
        values = [_number(row.get(name)) for row in part if row.get(name) is not None]
        if len(values) >= 2:
            pooled[name] = statistics.median(values)
    computed = any(_number(row.get("compute_gflops_alone")) > 0 for row in part)
    if computed and "comm_slowdown" in pooled and "compute_slowdown" in pooled:
        pooled["overlap_efficiency"] = efficiency(pooled["comm_slowdown"],
                                                  pooled["compute_slowdown"])
    return {name: round(value, 6) for name, value in pooled.items()}


def _number(value) -> float:
    """A row's number, 0 where it is missing or NaN (rows through pandas hold NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number else 0.0
