"""Change points: a planted step is found where it is, flat noise shows none."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.history.changepoints import (
    find_change_points,
    noise_scale,
    permutation_p,
    verdict,
)


def flat(rng: np.random.Generator, runs: int, spread: float, level: float = 200.0) -> np.ndarray:
    return level * np.exp(rng.normal(0.0, spread, runs))


def test_flat_noise_at_3_percent_shows_at_most_one_change_in_100_series():
    rng = np.random.default_rng(7)
    found = sum(len(find_change_points(flat(rng, 30, 0.03))) for _ in range(100))
    assert found <= 1


@pytest.mark.parametrize("factor, expected", [(1.25, "regression"), (0.8, "improvement")])
def test_a_step_is_found_where_it_was_planted(factor, expected):
    rng = np.random.default_rng(11)
    for _ in range(20):
        values = flat(rng, 30, 0.03)
        values[18:] *= factor
        changes = find_change_points(values)
        assert [c.index for c in changes] == [18]
        assert changes[0].ratio == pytest.approx(factor, rel=0.05)
        assert verdict(changes[0], 0.05) == expected


def test_a_step_at_the_end_is_placed_exactly_once_three_runs_show_it():
    rng = np.random.default_rng(3)
    values = flat(rng, 30, 0.03)
    values[27:] *= 1.25
    assert [c.index for c in find_change_points(values)] == [27]
    assert find_change_points(values[:28]) == []  # one slow run at the end: not yet a change


def test_one_odd_run_is_an_outlier_not_a_change():
    rng = np.random.default_rng(5)
    values = flat(rng, 30, 0.03)
    values[12] *= 2.0
    values[29] *= 2.0
    assert find_change_points(values) == []


def test_two_steps_are_two_changes():
    rng = np.random.default_rng(9)
    values = flat(rng, 40, 0.02)
    values[12:] *= 1.3
    values[28:] /= 1.3
    changes = find_change_points(values)
    assert [c.index for c in changes] == [12, 28]
    assert [verdict(c, 0.05) for c in changes] == ["regression", "improvement"]


def test_a_significant_change_within_the_threshold_gets_no_verdict():
    rng = np.random.default_rng(2)
    values = flat(rng, 30, 0.005)
    values[15:] *= 1.03
    changes = find_change_points(values)
    assert [c.index for c in changes] == [15]
    assert verdict(changes[0], 0.05) == ""
    assert verdict(changes[0], 0.01) == "regression"


def test_higher_is_better_turns_the_verdict():
    rng = np.random.default_rng(4)
    values = flat(rng, 20, 0.02, level=1.0)
    values[10:] *= 0.7  # an entity's busbw ratio fell
    (change,) = find_change_points(values)
    assert verdict(change, 0.05, higher_is_worse=False) == "regression"


def test_degenerate_series_have_no_changes():
    assert find_change_points([]) == []
    assert find_change_points([100.0] * 5) == []
    assert find_change_points([100.0] * 30) == []
    assert find_change_points([100.0] * 15 + [0.0] * 15) == []  # not positive: not judged


def test_the_noise_scale_reads_the_run_to_run_spread_and_ignores_one_step():
    rng = np.random.default_rng(1)
    logs = rng.normal(0, 0.05, 400)
    assert noise_scale(logs) == pytest.approx(0.05, rel=0.15)
    logs[200:] += 1.0
    assert noise_scale(logs) == pytest.approx(0.05, rel=0.15)


def test_the_permutation_p_value_is_uniform_ish_on_noise_and_tiny_on_a_step():
    rng = np.random.default_rng(8)
    p_values = [permutation_p(rng.normal(0, 1, 20), seed=i) for i in range(200)]
    assert 0.02 <= np.mean(np.array(p_values) <= 0.05) <= 0.09
    step = np.r_[rng.normal(0, 1, 10), rng.normal(4, 1, 10)]
    assert permutation_p(step) == pytest.approx(1 / 200)


def test_the_same_series_gets_the_same_answer():
    rng = np.random.default_rng(6)
    values = flat(rng, 30, 0.05)
    values[20:] *= 1.2
    assert find_change_points(values) == find_change_points(values.copy())
