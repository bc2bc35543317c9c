"""The overlap columns from the four sides' samples (measure.overlap_stats): the paired
bootstrap's interval, the efficiency formula, GFLOP/s; no process."""

import math

import numpy as np
import pytest

from commbench.measure.overlap import OverlapSamples, combined_compute, kernels_inside
from commbench.measure.overlap_stats import columns, efficiency, matmul_gflops, paired_ratio


def _rounds(level: float, rounds: int = 6, blocks: int = 3, spread: float = 0.02, seed=0):
    rng = np.random.default_rng(seed)
    return [level * (1 + spread * rng.standard_normal(blocks)) for _ in range(rounds)]


def test_a_real_slowdown_gives_an_interval_above_one():
    ratio, low, high = paired_ratio(_rounds(1.0, seed=1), _rounds(1.5, seed=2))
    assert 1.4 < ratio < 1.6 and 1.0 < low <= ratio <= high


def test_the_same_distribution_gives_an_interval_around_one():
    ratio, low, high = paired_ratio(_rounds(1.0, seed=3), _rounds(1.0, seed=4))
    assert low < 1.0 < high


def test_pairing_cancels_a_slow_spell_that_hit_both_sides_of_a_round():
    """A round twice as slow on both sides: paired, the ratio's interval stays narrow."""
    base, new = _rounds(1.0, seed=5), _rounds(1.2, seed=6)
    base[2], new[2] = base[2] * 2, new[2] * 2
    ratio, low, high = paired_ratio(base, new)
    assert low > 1.0 and high < 1.5


def test_efficiency_is_one_when_nothing_slows_and_zero_when_serialised():
    assert efficiency(1.0, 1.0) == pytest.approx(1.0)
    assert efficiency(2.0, 2.0) == pytest.approx(0.0)
    # the shorter side slowed only: t_comm = 1/1.5, t_compute = 1 -> (2/3 + 1 - 1) / (2/3)
    assert efficiency(1.5, 1.0) == pytest.approx(1.0)
    assert efficiency(3.0, 3.0) < 0  # worse than one after the other
    assert math.isnan(efficiency(0.0, 1.0))


def test_gflops_counts_two_n_cubed():
    assert matmul_gflops(1000, 2.0) == pytest.approx(1.0)
    assert matmul_gflops(1000, 0.0) == 0.0


def test_no_compute_reports_its_side_as_one():
    cols = columns("matmul:0", 0, _rounds(1e-4), _rounds(1e-4, seed=9), [], [], messages=1)
    assert (cols.compute_slowdown, cols.compute_slowdown_lo, cols.compute_slowdown_hi) == (
        1.0, 1.0, 1.0)
    assert cols.overlap_efficiency == 1.0 and cols.compute_gflops_alone == 0.0
    assert cols.lat_us_p50_alone == pytest.approx(100, rel=0.1)


def test_kernels_inside_a_window_only():
    spans = [(0, 10), (5, 20), (20, 30), (25, 40)]
    assert kernels_inside(spans, 5, 30) == pytest.approx((15 + 10) / 2 * 1e-9)
    assert math.isnan(kernels_inside(spans, 11, 19))


def test_compute_sides_leave_out_a_rank_that_saw_no_kernel():
    part = np.array([[1.0, np.nan], [3.0, np.nan]])
    (means,) = combined_compute([part])
    assert means.tolist() == [2.0]


def test_the_beside_side_is_the_rows_measurement():
    samples = OverlapSamples(comm_beside=[np.ones((2, 3)), 2 * np.ones((2, 3))],
                             calls_per_block=7)
    measurement = samples.beside_measurement()
    assert measurement.per_rank.shape == (2, 6) and measurement.rounds == (3, 3)
    assert measurement.iters == 42
