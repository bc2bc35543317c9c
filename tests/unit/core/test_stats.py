"""Statistics over samples: percentiles, the median's interval, instability flags."""

import numpy as np
import pytest

from commbench.core.stats import (
    ci_halfwidth_pct,
    combine_ranks,
    effective_size,
    instability,
    median_ci,
    pseudo_rounds,
    ratio_interval,
    resampled_medians,
    summarize,
)


def test_summary_of_known_values():
    stats = summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert stats.p50 == 5.5
    assert stats.min == 1 and stats.max == 10
    assert stats.mean == 5.5
    assert stats.p90 == pytest.approx(9.1)
    assert stats.std == pytest.approx(np.std(np.arange(1, 11), ddof=1))
    assert stats.ci_lo <= stats.p50 <= stats.ci_hi


def test_median_interval_uses_binomial_order_statistics():
    values = np.arange(100, dtype=float)
    # Binomial(100, 1/2): the 2.5 % quantile is 40 -> the 40th and 61st smallest values.
    assert median_ci(values) == (39.0, 60.0)


def test_few_samples_give_min_to_max():
    assert median_ci(np.array([3.0, 1.0, 2.0])[np.argsort([3.0, 1.0, 2.0])]) == (1.0, 3.0)


def test_single_sample():
    stats = summarize([7.0])
    assert (stats.p50, stats.std, stats.ci_lo, stats.ci_hi) == (7.0, 0.0, 7.0, 7.0)


def test_empty_is_refused():
    with pytest.raises(ValueError):
        summarize([])


def test_instability_flags_wide_interval_and_heavy_tail():
    assert instability(100, 120, 95, 105) == ""
    assert "±20%" in instability(100, 120, 80, 110)
    assert "a tenth of the blocks took 2.5x the median" in instability(100, 250, 99, 101)
    assert instability(100, 190, 99, 101) == ""  # a tenth at 1.9x: a busy machine, not unsteady
    assert ci_halfwidth_pct(100, 90, 130) == 30


def test_the_binomial_quantile_is_the_first_k_whose_cdf_reaches_q():
    """Checked against the CDF summed in floating point, for the sizes the loop meets."""
    from math import comb

    from commbench.core import stats

    for n in (1, 5, 6, 10, 20, 37, 100, 500):
        k = stats._binomial_half_quantile(0.025, n)
        cdf = np.cumsum([comb(n, i) / 2**n for i in range(n + 1)])
        assert cdf[k] >= 0.025 and (k == 0 or cdf[k - 1] < 0.025), n
    assert stats._binomial_half_quantile(0.025, 100) == 40  # textbook: x(40)..x(61) at 95 %


def test_correlated_samples_get_a_wider_interval():
    rng = np.random.default_rng(7)
    independent = rng.normal(100, 5, 200)
    drifting = np.sort(independent)  # same values, taken as a steady climb
    lo_i, hi_i = median_ci(np.sort(independent), effective=effective_size(independent))
    lo_d, hi_d = median_ci(np.sort(drifting), effective=effective_size(drifting))
    assert effective_size(drifting) < 0.1 * effective_size(independent)
    assert hi_d - lo_d > 3 * (hi_i - lo_i)


def test_rank_time_modes_combine_as_nccl_tests_a_does():
    per_rank = np.array([[1.0, 4.0], [3.0, 2.0]])
    assert combine_ranks(per_rank, "avg").tolist() == [2.0, 3.0]
    assert combine_ranks(per_rank, "max").tolist() == [3.0, 4.0]
    assert combine_ranks(per_rank, "min").tolist() == [1.0, 2.0]
    assert combine_ranks(per_rank, "rank0").tolist() == [1.0, 4.0]


def test_tails_come_from_single_calls_when_given():
    blocks = [10.0] * 20
    calls = [9.0] * 99 + [500.0]
    stats = summarize(blocks, calls, mean_us=14.0)
    assert stats.p50 == 10.0 and stats.mean == 14.0
    assert stats.max == 500.0 and stats.min == 9.0
    # linear interpolation: 1 % of the way from the 99th call (9) to the 100th (500)
    assert stats.p99 == pytest.approx(9.0 + 0.01 * 491.0)


def _rounds(rng, levels, per_round=20, sigma=0.05):
    return [level * rng.lognormal(0, sigma, per_round) for level in levels]


def test_the_ratio_interval_excludes_one_for_a_real_shift_and_not_for_noise():
    rng = np.random.default_rng(1)
    base = [_rounds(rng, [100, 104, 98, 101, 99])]
    same = [_rounds(rng, [101, 97, 103, 100, 99])]
    slower = [_rounds(rng, [150, 156, 147, 151, 149])]
    shifted = ratio_interval(base, slower)
    assert 1.3 < shifted.lo < 1.5 < shifted.hi < 1.7 and shifted.p_value < 0.01
    quiet = ratio_interval(base, same)
    assert quiet.lo < 1 < quiet.hi and quiet.p_value > 0.05
    assert ratio_interval(base, slower) == shifted  # seeded: the same answer every time


def test_the_spread_between_rounds_and_launches_widens_the_interval():
    """The same samples: as one round (blocks resampled alone), as rounds whose levels differ,
    and as launches whose levels differ; each level's spread must show in the interval."""
    rng = np.random.default_rng(2)
    rounds = _rounds(rng, [80, 120, 90, 110, 100, 95], sigma=0.02)
    flat = [[np.concatenate(rounds)]]

    def width(nested):
        medians = resampled_medians(nested, np.random.default_rng(0))
        low, high = np.quantile(medians, [0.025, 0.975])
        return high - low

    assert width([rounds]) > 3 * width(flat)
    launches = [_rounds(rng, [level] * 5, sigma=0.01) for level in (95, 100, 105, 110, 90, 102)]
    assert width(launches) > 1.5 * width([[r for launch in launches for r in launch]])


def test_pseudo_rounds_follow_the_correlation_of_the_blocks():
    rng = np.random.default_rng(3)
    independent = rng.normal(100, 1, 200)
    drifting = np.repeat(rng.normal(100, 5, 20), 10) + rng.normal(0, 0.1, 200)
    assert len(pseudo_rounds(independent)) > 100
    assert len(pseudo_rounds(drifting)) < 40
    assert sum(r.size for r in pseudo_rounds(drifting)) == 200


def test_the_unstable_advice_names_what_applies_to_how_the_run_was_timed():
    from commbench.core.stats import UNSTABLE_ADVICE, unstable_advice

    by_time = unstable_advice({"iters": None, "min_time": 1.5})
    assert "a larger --min-time" in by_time and "--iters" not in by_time
    assert by_time == UNSTABLE_ADVICE == unstable_advice(None)
    fixed = unstable_advice({"iters": 20, "min_time": 1.5})  # -n 20: --min-time has no say
    assert "more -n/--iters or --rounds" in fixed and "--min-time" not in fixed
