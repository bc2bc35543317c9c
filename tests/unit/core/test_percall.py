"""Per-call statistics (core.percall): p95, CV, spikes, and the straggler of each call, on
hand-made numbers whose answers are known without the formulas."""

import numpy as np
import pytest

from commbench.core import percall


def test_spikes_are_calls_over_one_and_a_half_medians():
    times = [10, 10, 10, 10, 10, 10, 15, 16, 40, 9]  # median 10: 16 and 40 are over 15
    stats = percall.call_stats(times)
    assert stats.spikes == 2 and stats.calls == 10


def test_p95_and_cv_on_a_known_spread():
    stats = percall.call_stats([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                19, 21])
    assert stats.p95 == pytest.approx(19.1)  # between the 19th (19) and 20th (21) value
    flat = percall.call_stats([4, 4, 4, 4])
    assert flat.cv_pct == 0.0
    two = percall.call_stats([1, 3])  # mean 2, population deviation 1: 50 %
    assert two.cv_pct == pytest.approx(50.0)


def test_the_last_to_arrive_is_the_straggler_not_the_longest_call():
    # Rank 1 starts calls 1 and 3 late by 5 units: rank 0's calls 1 and 3 last longer (it
    # waits), rank 1's are short; all end together.
    starts = np.array([[0, 10, 25, 35], [0, 15, 25, 40]], dtype=float)
    ends = np.array([[10, 25, 35, 50], [10, 25, 35, 50]], dtype=float)
    late = percall.lateness(starts, ends, shared_clock=True)
    assert late.tolist() == [[0, 0, 0, 0], [0, 5, 0, 5]]
    counts = percall.straggler_counts(late, margin=2.5)
    assert counts.tolist() == [0, 2]
    durations = ends - starts
    assert percall.straggler_counts(durations, margin=2.5).tolist() == [2, 0]  # the wrong one


def test_clocks_apart_are_set_by_the_ends():
    # The same run, rank 1's clock 1000 units ahead: its ends say so, its lateness stays.
    starts = np.array([[0, 10, 25, 35], [1000, 1015, 1025, 1040]], dtype=float)
    ends = np.array([[10, 25, 35, 50], [1010, 1025, 1035, 1050]], dtype=float)
    late = percall.lateness(starts, ends, shared_clock=False)
    assert late.tolist() == [[0, 0, 0, 0], [0, 5, 0, 5]]


def test_noise_below_the_margin_names_nobody():
    late = np.array([[0.0, 0.3, 0.0], [0.2, 0.0, 0.1]])
    assert percall.straggler_counts(late, margin=1.0).tolist() == [0, 0]
    stats = percall.call_stats([10, 10, 10], late, ranks=(4, 6))
    assert stats.stragglers == ""


def test_stragglers_text_names_global_ranks_most_first():
    assert percall.stragglers_text([3, 0, 7], ranks=(2, 4, 6)) == "6:7,2:3"
    assert percall.parse_stragglers("6:7,2:3") == [(6, 7), (2, 3)]
    assert percall.parse_stragglers("") == []
