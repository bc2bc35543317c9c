"""The measuring loop's decisions, driven by a scripted timer (nothing communicates here)."""

import numpy as np

from commbench.engine import sampling as m


class OneRank:
    """Control for a world of one: the same interface as engine.coordination.Control."""

    def __init__(self):
        self.barriers = 0

    def barrier(self):
        self.barriers += 1

    def gather(self, values):
        return np.array([values], dtype=float)


class ScriptedTimer:
    """Each iteration takes ``per_call`` seconds, times a noise factor cycling through ``noise``."""

    def __init__(self, per_call, noise=(1.0,)):
        self.per_call = per_call
        self.noise = noise
        self.calls = 0
        self.blocks = []

    def block(self, call, iters):
        factor = self.noise[len(self.blocks) % len(self.noise)]
        self.blocks.append(iters)
        self.calls += iters
        return self.per_call * iters * factor


def noop():
    return None


def test_fixed_iterations_are_exact_and_split_into_blocks():
    timer = ScriptedTimer(1e-3)
    result = m.measure(noop, timer, OneRank(), m.Budget(min_time=1.0, iters=47, warmup=3))
    assert result.iters == 47
    assert result.per_rank.shape == (1, m.FIXED_SAMPLES)
    assert sum(timer.blocks) == 1 + 3 + 47  # timed first call + warm-up + measured
    np.testing.assert_allclose(result.samples, 1e-3)


def test_few_fixed_iterations_make_one_sample_each():
    result = m.measure(noop, ScriptedTimer(1e-3), OneRank(), m.Budget(1.0, iters=3, warmup=0))
    assert result.iters == 3 and result.per_rank.shape == (1, 3)


def test_steady_timings_stop_early_on_precision():
    timer = ScriptedTimer(1e-4)
    result = m.measure(noop, timer, OneRank(), m.Budget(min_time=1.0))
    timed = result.samples.sum() * (result.iters / result.samples.size)
    assert result.samples.size == m.MIN_SAMPLES
    assert m.EARLY_FRACTION <= timed < 1.0  # stopped well before the budget


def test_noisy_timings_run_to_the_budget_then_stop():
    noise = (1.0, 3.0, 0.5, 2.0, 1.5, 0.7, 2.5)
    timer = ScriptedTimer(1e-4, noise)
    result = m.measure(noop, timer, OneRank(), m.Budget(min_time=0.2))
    timed = result.samples.sum() * (result.iters / result.samples.size)
    assert 0.2 <= timed <= 0.2 * 1.5  # at most one round past the budget


def test_blocks_are_sized_from_the_calibration():
    timer = ScriptedTimer(1e-4)
    m.measure(noop, timer, OneRank(), m.Budget(min_time=1.0, warmup=2))
    per_block = round(1.0 / m.TARGET_SAMPLES / 1e-4)
    assert timer.blocks[2:] == [per_block] * (len(timer.blocks) - 2)


def test_slowest_rank_defines_each_sample():
    per_rank = np.array([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]])
    result = m.Measurement(per_rank=per_rank, iters=3)
    assert result.samples.tolist() == [3.0, 5.0, 2.5]
