"""Interleaved rounds (--rounds): the budget split over visits, the order, the stop rule that
all ranks agree on, and the row's interval from the spread between rounds. Scripted timers and
controls: nothing communicates here."""

from types import SimpleNamespace

import numpy as np
import pytest

from commbench import collectives
from commbench.collectives.base import OpContext
from commbench.core.stats import median_ci, rounds_interval
from commbench.measure import sampling as m
from commbench.measure.rows import RowContext, build_row
from commbench.measure.sampling import round_order


class OneRank:
    def __init__(self):
        self.gathers = []

    def barrier(self):
        pass

    def gather(self, values):
        self.gathers.append(list(values))
        return np.array([values], dtype=float)


class NotYetTight(OneRank):
    """A world of two whose other rank is never ready to stop (it says 0 to every one-value
    gather, which is how the ranks share their stop verdicts)."""

    def gather(self, values):
        self.gathers.append(list(values))
        other = [0.0] if len(values) == 1 else list(values)
        return np.array([values, other], dtype=float)


class Machine:
    """A clock shared by every size: a call takes ``seconds`` x the machine's speed at that
    moment, which ``spell`` gives (a slow spell for a stretch of time)."""

    def __init__(self, seconds, spell=lambda now: 1.0):
        self.seconds, self.spell, self.now = seconds, spell, 0.0
        self.times_single_calls = False

    def block(self, call, iters):
        taken = self.seconds * iters * self.spell(self.now)
        self.now += taken
        return taken


def noop():
    return None


def first_rank(per_rank):
    return per_rank[0]


def sweep(timer, control, budget, rounds, sizes=2):
    """What measure.sweep does with an op's sizes, minus torch: visit them round by round."""
    states = {}
    for index in range(rounds):
        for size in round_order(sizes, index):
            if size not in states:
                states[size] = m.SizeRounds(noop, timer, control, budget, rounds)
            states[size].visit(noop)
        if m.rounds_done(list(states.values()), control, first_rank, budget):
            break
    return [states[size].finish() for size in range(sizes)]


def test_rounds_alternate_ascending_and_descending():
    assert [round_order(3, i) for i in range(4)] == [[0, 1, 2], [2, 1, 0], [0, 1, 2], [2, 1, 0]]
    assert round_order(3, 1, "alternate", seed=9) == [2, 1, 0]  # a seed changes nothing here


def test_a_shuffled_round_is_a_permutation_drawn_from_the_seed_and_the_round():
    orders = [round_order(8, i, "shuffle", seed=3) for i in range(6)]
    assert all(sorted(order) == list(range(8)) for order in orders)
    assert orders == [round_order(8, i, "shuffle", seed=3) for i in range(6)]  # a rerun
    assert len({tuple(order) for order in orders}) == 6  # every round its own order
    assert orders != [round_order(8, i, "shuffle", seed=4) for i in range(6)]
    assert round_order(1, 5, "shuffle", seed=3) == [0]
    # Over many rounds every size is first about equally often (no size always leads).
    firsts = [round_order(4, i, "shuffle", seed=0)[0] for i in range(400)]
    assert all(60 < firsts.count(size) < 140 for size in range(4))


def test_every_process_draws_the_same_shuffle():
    """Ranks are separate processes, each with its own salted hash(): the order must not
    depend on it, or ranks would visit different sizes and deadlock."""
    import os
    import subprocess
    import sys

    code = ("from commbench.measure.sampling import round_order; "
            "print([round_order(16, i, 'shuffle', 7) for i in range(3)])")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": salt}).stdout
            for salt in ("1", "2", "random")}
    assert seen == {f"{[round_order(16, i, 'shuffle', 7) for i in range(3)]}\n"}


def test_order_and_seed_are_refused_where_they_mean_nothing():
    from commbench.cli.measuring import measure_specs
    from commbench.core.errors import UsageError
    from commbench.specs.measure import MeasureSpec, validate

    with pytest.raises(UsageError, match="--seed orders the sizes of --order shuffle"):
        measure_specs(("allreduce",), {"seed": 3})
    spec, _ = measure_specs(("allreduce",), {"order": "Shuffle", "seed": 3})
    assert (spec.order, spec.seed) == ("shuffle", 3)
    with pytest.raises(UsageError, match="needs --rounds 2 or more"):
        validate(MeasureSpec(ops=("allreduce",), sizes=(8,), order="shuffle", rounds=1), 2)
    with pytest.raises(UsageError, match="unknown --order 'sorted'"):
        validate(MeasureSpec(ops=("allreduce",), sizes=(8,), order="sorted"), 2)


def test_each_round_is_a_share_of_the_budget_and_the_row_keeps_its_rounds():
    timer = Machine(1e-4, spell=lambda now: 1 + 0.5 * np.sin(now * 40))  # never tight
    sizes = sweep(timer, OneRank(), m.Budget(min_time=0.5), rounds=5)
    for measured in sizes:
        assert measured.rounds == (m.TARGET_SAMPLES // 5,) * 5
        timed = float((measured.per_rank[0] * measured.counts).sum())
        assert 0.5 * 0.8 < timed < 0.5 * 1.2  # the budget, split over the rounds


def test_a_slow_spell_lands_on_every_size_alike():
    """Two sizes that cost the same, a machine twice as slow for the second half of the run:
    measured one after the other, the second size reads 2x the first; in rounds, alike."""
    def spell(now):
        return 2.0 if now > 0.5 else 1.0

    one = sweep(Machine(1e-4, spell), OneRank(), m.Budget(min_time=0.5), rounds=1 + 0)
    assert np.median(one[1].per_rank) / np.median(one[0].per_rank) > 1.9
    rounds = sweep(Machine(1e-4, spell), OneRank(), m.Budget(min_time=0.5), rounds=6)
    ratio = np.mean(rounds[1].per_rank) / np.mean(rounds[0].per_rank)
    assert ratio == pytest.approx(1.0, abs=0.1)


def test_steady_sizes_stop_after_the_minimum_rounds():
    sizes = sweep(Machine(1e-4), OneRank(), m.Budget(min_time=0.5), rounds=10)
    assert all(len(s.rounds) == m.MIN_ROUNDS for s in sizes)


def test_no_rank_stops_alone():
    """Steady here, but the other rank is not ready: every rank runs every round."""
    control = NotYetTight()
    sizes = sweep(Machine(1e-4), control, m.Budget(min_time=0.5), rounds=6)
    assert all(len(s.rounds) == 6 for s in sizes)


def test_fixed_iterations_are_split_over_the_rounds():
    sizes = sweep(Machine(1e-4), OneRank(), m.Budget(min_time=1.0, iters=47, warmup=0),
                  rounds=4)
    for measured in sizes:
        assert measured.iters == 47 and sum(measured.rounds) == m.FIXED_SAMPLES
        assert len(measured.rounds) == 4


def test_the_row_interval_comes_from_the_spread_between_rounds():
    """Rounds at different levels (a slow spell per round) and steady blocks within each: the
    order-statistic interval of 50 blocks is narrow, the between-round one is not."""
    rng = np.random.default_rng(4)
    levels = [1.0, 1.3, 0.9, 1.2, 1.05]
    samples = np.concatenate([lv * 1e-3 * rng.lognormal(0, 0.01, 10) for lv in levels])
    measured = m.Measurement(per_rank=np.array([samples, samples]),
                             counts=np.full(50, 10), rounds=(10,) * 5)
    op = collectives.get("allreduce")
    ctx = OpContext(0, 2, None, "float32", "sum", None)
    row = build_row(op, ctx, RowContext("gloo", "cpu", 1, "float32", 4, 0), 256, measured, 1, 0)
    assert row.rounds == 5 and row.round_samples == [10] * 5
    assert row.round_p50_us == pytest.approx([lv * 1e3 for lv in levels], rel=0.03)
    lo, hi = median_ci(np.sort(samples * 1e6))  # as if the 50 blocks were independent
    assert row.lat_us_ci_hi - row.lat_us_ci_lo > 2 * (hi - lo)
    assert (row.lat_us_ci_lo, row.lat_us_ci_hi) == rounds_interval(samples * 1e6, [10] * 5)
    flat = build_row(op, ctx, RowContext("gloo", "cpu", 1, "float32", 4, 0), 256,
                     m.Measurement(per_rank=measured.per_rank, counts=measured.counts), 1, 0)
    assert flat.rounds == 1 and flat.round_samples == [] and flat.round_p50_us == []


def test_sizes_whose_calls_outlast_a_visit_take_fewer_blocks_per_visit():
    """A call as long as a visit's share (64M on the VM): 2 blocks a visit, not 50/N, which
    would spend 5x the budget."""
    sizes = sweep(Machine(0.1), NotYetTight(), m.Budget(min_time=0.5), rounds=5, sizes=1)
    assert sizes[0].rounds == (2,) * 5
    assert float((sizes[0].per_rank[0] * sizes[0].counts).sum()) <= 1.0 + 1e-9


# ---- the progress bar counts visits (a size measured once), not rows -----------------------

class Recorder:
    def __init__(self):
        self.seen = []

    def progress(self, done, total):
        self.seen.append((done, total))


def test_visits_advance_per_measured_size_and_round():
    """An op's rows appear only after its last round: the bar must move at every visit.
    Op A: 3 sizes x 2 rounds, stopped early after 4 visits (the stop rule); op B: 1 x 2."""
    from commbench.measure.progress import Visits

    sink = Recorder()
    visits = Visits(sink, total=8)
    visits.start()
    visits.op(6)
    for _ in range(4):
        visits.visited()
    visits.op_done()  # the rounds the stop rule made unnecessary count as done
    visits.op(2)
    for _ in range(3):  # one visit too many never passes the op's share
        visits.visited()
    visits.op_done()
    assert sink.seen == [(0, 8), (1, 8), (2, 8), (3, 8), (4, 8), (6, 8), (7, 8), (8, 8)]
    assert Visits(None, 3).visited() is None  # ranks other than 0 have no sink


def test_one_bar_over_every_launch_of_a_repeat():
    from commbench.commands.measure import Launch

    sink = Recorder()
    Launch(sink, 1, 3, "start").progress(2, 8)
    assert sink.seen == [(10, 24)]


def test_the_live_bar_follows_visits_without_a_terminal():
    from commbench.output.live import Live, Sinks

    live = Live(progress=True)
    sinks = Sinks(live)
    sinks.begin({"backends": ["gloo"], "config": {}}, 3)
    try:
        sinks.progress(5, 12)
        task = live._bar.tasks[0]
        assert (task.completed, task.total) == (5, 12)
        sinks.progress(12, 12)
        assert live._bar.tasks[0].finished
    finally:
        sinks.close()
    quiet = Live(progress=False)
    quiet.begin({"backends": ["gloo"], "config": {}}, 3)
    quiet.progress(1, 3)  # no bar: nothing to move, nothing printed
    quiet.close()


def test_a_size_is_visited_once_per_round_or_per_share_of_its_iterations():
    assert m.visits_per_size(1, None) == 1 and m.visits_per_size(1, 50) == 1
    assert m.visits_per_size(5, None) == 5 and m.visits_per_size(5, 47) == 5
    assert m.visits_per_size(5, 3) == 3  # 3 blocks cannot be shared over 5 rounds
    sizes = sweep(Machine(1e-4), OneRank(), m.Budget(min_time=1.0, iters=3, warmup=0), rounds=5)
    assert all(len(s.rounds) == m.visits_per_size(5, 3) for s in sizes)


def test_make_bench_fidelity_reads_each_sides_median_over_rounds():
    """Both harnesses in rounds (bench/run_all.py, bench/thin_loop.py): a side's time is the
    median over its rounds of a round's mean (equal blocks in a round: its loop total)."""
    from bench import run_all, thin_loop

    row = {"samples_us": [1.0, 3.0, 10.0, 10.0, 10.0, 2.0, 2.0], "round_samples": [2, 3, 2]}
    assert run_all.round_means(row) == [2.0, 10.0, 2.0]
    assert run_all.round_means({"samples_us": [1.0, 2.0, 6.0]}) == [3.0]  # one round
    visits = [[1e-6, 3e-6], [10e-6, 10e-6], [2e-6, 2e-6]]  # seconds, per block
    loop = thin_loop._row("allreduce", 8, visits, started=0.0, peak_rss_mib=1.0)
    assert loop["round_means_us"] == pytest.approx([2.0, 10.0, 2.0])
    assert loop["rounds_median_us"] == pytest.approx(2.0)
    assert loop["mean_us"] == pytest.approx(14 / 3)
    pingpong = thin_loop._row("pingpong", 8, visits, started=0.0, peak_rss_mib=1.0)
    assert pingpong["rounds_median_us"] == pytest.approx(1.0)  # one way: half a round trip


class FakeControl:
    def __init__(self, fits_per_rank):
        self.fits_per_rank = fits_per_rank

    def gather(self, values):
        return np.array(self.fits_per_rank, dtype=float)


def test_a_size_runs_only_if_it_fits_on_every_rank(monkeypatch):
    """The root of gather needs world x the buffer: it cannot fit the largest size, the others
    can; every rank must drop it, or the others wait in it for the root until the timeout."""
    import torch

    from commbench.measure.sweep import Sweep
    from commbench.specs.measure import MeasureSpec

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (8 << 30, 16 << 30))
    notes = []
    session = SimpleNamespace(control=FakeControl([[1, 1, 0], [1, 1, 1], [1, 1, 1]]),
                              rank=1, world=3)
    sweep = Sweep(session, MeasureSpec(ops=("gather",), dtype="float32"),
                  SimpleNamespace(note=notes.append))
    ctx = OpContext(1, 3, None, "float32", "sum", None)
    kept = sweep._fitting(collectives.get("gather"), ctx, "cuda", [3, 300, 3 << 30])
    assert kept == [3, 300]  # rank 1 itself would fit all three
    assert "do not fit in GPU memory on every rank: 12G" in notes[0]


def test_barrier_under_cuda_graphs_is_timed_eagerly_and_says_so(monkeypatch):
    from commbench.measure import sweep as sweep_module
    from commbench.specs.measure import MeasureSpec

    made = []
    monkeypatch.setattr(sweep_module, "CudaEventTimer",
                        lambda blocking=False: made.append("events") or "events")
    barrier = object()  # the graph timer meets the ranks on the control channel
    monkeypatch.setattr(sweep_module, "CudaGraphTimer",
                        lambda barrier: made.append(barrier) or "graph")
    notes = []
    session = SimpleNamespace(rank=0, world=2, control=SimpleNamespace(barrier=barrier))
    sweep = sweep_module.Sweep(session, MeasureSpec(ops=("barrier",), cuda_graph=True),
                               SimpleNamespace(note=notes.append))
    assert sweep._timer("cuda", collectives.get("barrier")) == "events"
    assert sweep._timer("cuda", collectives.get("allreduce")) == "graph"
    assert made == ["events", barrier]
    assert "barrier cannot be captured in a CUDA graph: it is timed eagerly" in notes[0]
