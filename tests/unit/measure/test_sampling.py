"""The measuring loop's decisions, driven by a scripted timer (nothing communicates here)."""

import numpy as np

from commbench.measure import sampling as m


class OneRank:
    """Control for a world of one: the same interface as engine.coordination.Control."""

    def __init__(self):
        self.barriers = 0
        self.gathers = 0

    def barrier(self):
        self.barriers += 1

    def gather(self, values):
        self.gathers += 1
        return np.array([values], dtype=float)


class SlowerPeer(OneRank):
    """A world of two whose other rank always took ``factor`` times as long."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def gather(self, values):
        self.gathers += 1
        return np.array([values, [v * self.factor for v in values]], dtype=float)


class FakeClock:
    """time.perf_counter for warm_up: each call of ``tick`` advances it by ``step`` seconds."""

    def __init__(self, step):
        self.now = 0.0
        self.step = step
        self.calls = 0

    def __call__(self):
        return self.now

    def tick(self):
        self.calls += 1
        self.now += self.step


class ScriptedTimer:
    """Each iteration takes ``seconds`` times a noise factor cycling through ``noise`` (one
    factor per block, or per call when it times single calls)."""

    def __init__(self, seconds, noise=(1.0,), single_calls=False):
        self.seconds = seconds
        self.noise = noise
        self.blocks = []
        self.times_single_calls = single_calls

    def block(self, call, iters):
        factor = self.noise[len(self.blocks) % len(self.noise)]
        self.blocks.append(iters)
        return self.seconds * iters * factor

    def block_calls(self, call, iters):
        start = sum(self.blocks)
        self.blocks.append(iters)
        return np.array([self.seconds * self.noise[(start + i) % len(self.noise)]
                         for i in range(iters)])


def noop():
    return None


def measure(call, timer, control, budget):
    """The loop with one rank's blocks as the samples (any --rank-time mode, for one rank)."""
    return m.measure(call, timer, control, budget, combine=lambda per_rank: per_rank[0])


def test_fixed_iterations_are_exact_and_split_into_blocks():
    timer = ScriptedTimer(1e-3)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0, iters=47, warmup=3))
    assert result.iters == 47 and int(result.counts.sum()) == 47
    assert result.per_rank.shape == (1, m.FIXED_SAMPLES)
    assert sum(timer.blocks) == 1 + 3 + 47  # timed first call + warm-up + measured
    np.testing.assert_allclose(result.per_rank, 1e-3)


def test_few_fixed_iterations_make_one_sample_each():
    result = measure(noop, ScriptedTimer(1e-3), OneRank(), m.Budget(1.0, iters=3, warmup=0))
    assert result.iters == 3 and result.per_rank.shape == (1, 3)


def test_steady_timings_stop_early_on_precision():
    timer = ScriptedTimer(1e-4)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0))
    timed = float((result.per_rank[0] * result.counts).sum())
    assert result.per_rank.shape[1] == m.MIN_SAMPLES
    assert m.EARLY_FRACTION <= timed < 1.0  # stopped well before the budget


def test_noisy_timings_run_to_the_budget_then_stop():
    noise = (1.0, 3.0, 0.5, 2.0, 1.5, 0.7, 2.5)
    timer = ScriptedTimer(1e-4, noise)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=0.2))
    timed = float((result.per_rank[0] * result.counts).sum())
    assert 0.2 <= timed <= 0.2 * 1.5  # at most one round past the budget


def test_drifting_timings_do_not_stop_on_a_narrow_looking_interval():
    """Blocks that creep up by 1 % each look precise to a rule that treats them as
    independent (x(6)..x(15) of 20 blocks is ±4.1 % of their median, within the ±5 % target),
    but neighbours are correlated: the effective size is small, and the loop keeps going."""
    drift = tuple(1 + 0.01 * i for i in range(400))
    timer = ScriptedTimer(1e-4, drift)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0, warmup=0))
    assert result.per_rank.shape[1] > m.MIN_SAMPLES
    steady = measure(noop, ScriptedTimer(1e-4), OneRank(), m.Budget(min_time=1.0, warmup=0))
    assert steady.per_rank.shape[1] == m.MIN_SAMPLES


def test_blocks_are_sized_from_the_calibration():
    timer = ScriptedTimer(1e-4)
    measure(noop, timer, OneRank(), m.Budget(min_time=1.0, warmup=2))
    per_block = round(1.0 / m.TARGET_SAMPLES / 1e-4)
    assert timer.blocks[2:] == [per_block] * (len(timer.blocks) - 2)


def test_rank_means_are_loop_totals_not_means_of_block_means():
    # Blocks of 1 and 3 iterations: the loop total is 1x1 + 3x3 = 10 s over 4 iterations,
    # 2.5 s per call; the mean of the two block means would say 2.
    result = m.Measurement(per_rank=np.array([[1.0, 3.0]]), counts=np.array([1, 3]))
    assert result.rank_means().tolist() == [2.5]
    assert result.iters == 4


def test_single_calls_are_kept_when_the_timer_times_them():
    noise = (1.0, 1.0, 1.0, 9.0)  # every fourth call is slow: a tail block means hide
    timer = ScriptedTimer(1e-4, noise, single_calls=True)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0, iters=400, warmup=0))
    assert result.calls.shape == (1, 400)
    assert np.isclose(result.calls.max(), 9e-4) and np.isclose(np.median(result.calls), 1e-4)
    assert np.isclose(result.per_rank.max(), 3e-4)  # the blocks' worst is only 3x


def test_single_calls_beyond_the_cap_are_subsampled_evenly(monkeypatch):
    monkeypatch.setattr(m, "MAX_CALLS", 100)
    timer = ScriptedTimer(1e-6, single_calls=True)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0, iters=1000, warmup=0))
    assert result.calls.shape == (1, 100) and result.iters == 1000


def test_run_warm_up_lasts_its_time_in_doubling_chunks(monkeypatch):
    clock = FakeClock(0.01)
    monkeypatch.setattr(m.time, "perf_counter", clock)
    control = OneRank()
    m.warm_up(clock.tick, control, m.Budget(min_time=1.0))
    # one untimed set-up call, then chunks of 1, 2, 4, 8, 16, 32 calls: 0.63 s is the first
    # total past RUN_WARMUP_S
    assert m.RUN_WARMUP_S == 0.5
    assert clock.calls == 1 + 63 and control.gathers == 6


def test_run_warm_up_ends_on_the_same_chunk_everywhere(monkeypatch):
    """The slowest rank's time decides: here the peer is 4x slower, so this rank stops after
    its own 0.15 s (the peer's 0.6 s) instead of running on alone into a deadlock."""
    clock = FakeClock(0.01)
    monkeypatch.setattr(m.time, "perf_counter", clock)
    m.warm_up(clock.tick, SlowerPeer(4.0), m.Budget(min_time=1.0))
    assert clock.calls == 1 + (1 + 2 + 4 + 8)


def test_run_warm_up_does_not_count_the_set_up_call(monkeypatch):
    """A first call that makes a communicator (seconds on NCCL) must not end the warm-up."""
    clock = FakeClock(0.01)
    monkeypatch.setattr(m.time, "perf_counter", clock)

    def first_call_is_slow():
        clock.tick()
        if clock.calls == 1:
            clock.now += 5.0

    m.warm_up(first_call_is_slow, OneRank(), m.Budget(min_time=1.0))
    assert clock.calls == 1 + 63


def test_run_warm_up_is_exactly_warmup_calls_when_given(monkeypatch):
    clock = FakeClock(0.01)
    monkeypatch.setattr(m.time, "perf_counter", clock)
    control = OneRank()
    m.warm_up(clock.tick, control, m.Budget(min_time=1.0, warmup=7))
    assert clock.calls == 7 and control.gathers == 0


def test_a_round_is_one_unbroken_loop_cut_into_blocks():
    """With single calls timed, the round's calls run in one loop (nothing between blocks)
    and each block's time is the sum of its own calls."""
    noise = (1.0, 2.0, 3.0)  # per call: blocks of 2 calls see different sums
    timer = ScriptedTimer(1e-3, noise, single_calls=True)
    result = measure(noop, timer, OneRank(), m.Budget(min_time=1.0, iters=40, warmup=0))
    assert timer.blocks[-1] == 40  # the whole fixed count in one loop
    calls = result.calls[0]
    expected = calls.reshape(20, 2).mean(axis=1)
    np.testing.assert_allclose(result.per_rank[0], expected)
    assert len(set(np.round(expected, 6))) == 3


def test_ranks_meet_once_per_round_without_a_barrier():
    noise = (1.0, 3.0, 0.5, 2.0, 1.5, 0.7, 2.5)
    control = OneRank()
    timer = ScriptedTimer(1e-4, noise)
    result = measure(noop, timer, control, m.Budget(min_time=0.2, warmup=1))
    rounds = 1 + (result.per_rank.shape[1] - m.MIN_SAMPLES) // m.ROUND
    assert result.per_rank.shape[1] == m.MIN_SAMPLES + (rounds - 1) * m.ROUND
    assert rounds > 1
    # calibration and warm-up meet twice each (barrier + gather); then one gather per round
    assert control.barriers == 2 and control.gathers == 2 + rounds


def test_no_round_outlasts_the_cap_so_idle_ranks_do_not_time_out():
    """An idle rank (odd-world p2p, a faster mesh group) waits in the round's gather under the
    control group's --timeout: 40 calls of 1 s are 20 blocks of 2 s, in rounds of 5 blocks."""
    control = OneRank()
    result = measure(noop, ScriptedTimer(1.0), control, m.Budget(min_time=1.0, iters=40,
                                                                 warmup=0))
    assert m.ROUND_CAP_S == 10.0 and result.iters == 40
    assert control.gathers == 1 + 4  # calibration, then 4 rounds
    timer = ScriptedTimer(1.0, single_calls=True)  # a round is one entry of timer.blocks
    result = measure(noop, timer, OneRank(), m.Budget(min_time=100.0, warmup=0))
    rounds = timer.blocks[1:]  # after the calibration call
    assert result.iters == sum(rounds) and len(rounds) > 1
    assert max(rounds) <= 10  # blocks of 2 calls of 1 s: 5 blocks a round


class TwoRanksLate(OneRank):
    """A world of two: every gather gets this rank's values, then the peer's from ``peer``
    (a function of this rank's values and which gather this is)."""

    def __init__(self, peer):
        super().__init__()
        self.peer = peer

    def gather(self, values):
        self.gathers += 1
        return np.array([values, self.peer(list(values), self.gathers)], dtype=float)


class StampingTimer(ScriptedTimer):
    """Host stamps in ns: each call lasts ``seconds``; the clock starts at 5e15 ns (months of
    uptime, beyond what a float holds to the ns)."""

    shared_clock = True

    def __init__(self, seconds):
        super().__init__(seconds)
        self.now = 5_000_000_000_000_000

    def stamp_calls(self, call, iters):
        self.blocks.append(iters)
        step = int(self.seconds * 1e9)
        stamps = self.now + step * np.arange(iters + 1, dtype=np.int64)
        self.now = int(stamps[-1]) + 1000
        return stamps


def test_per_call_keeps_every_call_and_names_who_started_late():
    # Both ranks' calls last 10 us and share the clock; the peer starts every 3rd call of
    # the size 40 us late (its chunk base is the same, its starts within it are shifted).
    timer = StampingTimer(10e-6)
    chunks = []

    def peer(values, gather):
        values = list(values)
        if len(values) == 30 and values[0] == 0.0:  # the call starts (from 0): every 3rd late
            chunks.append(len(values))
            return [v + (40e-6 if i % 3 == 2 else 0.0) for i, v in enumerate(values)]
        return values

    control = TwoRanksLate(peer)
    budget = m.Budget(min_time=1.0, iters=30, per_call=True)
    result = m.measure(noop, timer, control, budget, combine=lambda per_rank: per_rank[0])
    assert result.calls.shape == (2, 30)  # every call of both ranks, none subsampled
    assert result.call_rounds.tolist() == [0] * 30
    late = result.call_late * 1e6
    assert np.allclose(late[0], 0.0, atol=1e-3)
    assert np.allclose(late[1], [40.0 if i % 3 == 2 else 0.0 for i in range(30)], atol=1e-3)
    assert chunks == [30]


def test_per_call_rounds_are_numbered_by_visit():
    timer = StampingTimer(10e-6)
    control = OneRank()
    budget = m.Budget(min_time=1.0, iters=6, per_call=True)
    state = m.SizeRounds(noop, timer, control, budget, rounds=3)
    while not state.done():
        state.visit(noop)
    result = state.finish()
    assert result.call_rounds.tolist() == [0, 0, 1, 1, 2, 2]
    assert result.calls.shape == (1, 6) and np.allclose(result.calls, 10e-6)
    assert result.per_rank.shape == (1, 6)  # the blocks, cut from the calls
