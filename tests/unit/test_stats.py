"""Statistics over samples: percentiles, the median's interval, instability flags."""

import numpy as np
import pytest

from commbench.stats import ci_halfwidth_pct, instability, median_ci, summarize


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
    assert "p99 is 4.0x p50" in instability(100, 400, 99, 101)
    assert ci_halfwidth_pct(100, 90, 130) == 30


def test_the_exact_binomial_quantile_matches_scipy(monkeypatch):
    import builtins

    from commbench import stats

    sizes = (1, 5, 6, 10, 37, 100, 500, 2000)
    with_scipy = {n: stats._binomial_half_quantile(0.025, n) for n in sizes}
    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    without = {n: stats._binomial_half_quantile(0.025, n) for n in with_scipy}
    assert without == with_scipy
