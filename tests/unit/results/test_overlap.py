"""A --repeat --overlap run pooled: the overlap columns come from every launch, the launch
the unit (results.overlap), not from the first launch alone. The rows are the real
``repeat`` fixture's (three launches of allreduce at 1 KiB) with overlap columns set as a
launch writes them."""

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from commbench.results.launches import pooled_rows
from commbench.results.overlap import efficiency

FIXTURE = Path(__file__).parents[2] / "fixtures" / "repeat"


def launches(comm: list[float], compute: list[float], spread: float = 0.02,
             side: int = 256) -> list[dict]:
    """The fixture's three 1 KiB launch rows, each with a launch's overlap columns: its own
    slowdowns and a narrow interval of +-``spread`` around them (a launch's bootstrap)."""
    rows = [json.loads(line) for line in (FIXTURE / "results.jsonl").read_text().splitlines()]
    rows = [row for row in rows if row["size_bytes"] == 1024]
    assert len(rows) == len(comm) == len(compute) == 3
    for row, c, k in zip(rows, comm, compute, strict=True):
        row.update({
            "overlap": f"matmul:{side}", "comm_slowdown": c,
            "comm_slowdown_lo": c * (1 - spread), "comm_slowdown_hi": c * (1 + spread),
            "compute_slowdown": k, "compute_slowdown_lo": k * (1 - spread),
            "compute_slowdown_hi": k * (1 + spread),
            "compute_gflops_alone": 100.0 if side else 0.0,
            "compute_gflops_beside": 100.0 / k if side else 0.0,
            "overlap_efficiency": efficiency(c, k) if side else 1.0,
            "lat_us_p50_alone": row["lat_us_p50"] / c})
    return rows


def test_launches_that_disagree_widen_the_pooled_interval_beyond_any_one_launch():
    """Each launch sure of itself (+-2 %), the three 1.2x, 2.4x and 1.8x: pooled, the row
    must not be launch 0's figure, and its interval must hold the launches' disagreement."""
    rows = launches([1.2, 2.4, 1.8], [1.05, 1.10, 1.00])
    (row,) = pooled_rows(rows)
    assert row["comm_slowdown"] != pytest.approx(1.2)
    assert 1.2 < row["comm_slowdown"] < 2.4
    assert row["comm_slowdown_lo"] < 1.2 * 0.98 and row["comm_slowdown_hi"] > 2.4 * 1.02
    # Student's t over the launches' log ratios, as SciPy computes it
    logs = [math.log(v) for v in (1.2, 2.4, 1.8)]
    low, high = stats.t.interval(0.95, 2, loc=sum(logs) / 3, scale=stats.sem(logs))
    assert row["comm_slowdown_lo"] == pytest.approx(math.exp(low), rel=1e-4)
    assert row["comm_slowdown_hi"] == pytest.approx(math.exp(high), rel=1e-4)
    # the efficiency follows the pooled slowdowns, not the first launch's
    assert row["overlap_efficiency"] == pytest.approx(
        efficiency(row["comm_slowdown"], row["compute_slowdown"]), rel=1e-4)
    assert row["overlap_efficiency"] != pytest.approx(rows[0]["overlap_efficiency"])


def test_launches_that_agree_keep_a_slowdown_that_holds():
    (row,) = pooled_rows(launches([1.50, 1.53, 1.48], [1.20, 1.22, 1.19]))
    assert row["comm_slowdown_lo"] > 1.0 and row["compute_slowdown_lo"] > 1.0
    assert row["comm_slowdown_lo"] <= row["comm_slowdown"] <= row["comm_slowdown_hi"]


def test_no_compute_pools_to_one_and_keeps_its_efficiency():
    """matmul:0, the control: compute_slowdown is 1 in every launch, so it pools to exactly 1
    with the interval [1, 1], and the efficiency stays the control's 1."""
    (row,) = pooled_rows(launches([1.02, 0.97, 1.01], [1.0, 1.0, 1.0], side=0))
    assert row["compute_slowdown"] == row["compute_slowdown_lo"] == row["compute_slowdown_hi"]
    assert row["compute_slowdown"] == 1.0 and row["overlap_efficiency"] == 1.0
    assert row["comm_slowdown_lo"] <= 1.0 <= row["comm_slowdown_hi"]
