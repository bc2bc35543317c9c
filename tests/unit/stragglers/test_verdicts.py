"""The stragglers rule on synthetic traces (tests/unit/stragglers/synthetic.py): each test
injects the fault the rule must catch, or checks that a clean job names nobody."""

from commbench.results import trace as trace_format
from commbench.stragglers import analyse, verdicts
from commbench.stragglers.lateness import CLOCK_FREE, SHARED
from tests.unit.stragglers.synthetic import ddp_job


def _verdicts(analysis):
    return {r.rank: r.verdict for r in analysis.ranks}


def test_a_clean_job_names_nobody(tmp_path):
    for seed in range(5):
        analysis = analyse(trace_format.load(ddp_job(tmp_path / str(seed), seed=seed)))
        assert analysis.named == [], [r.evidence for r in analysis.named]
        assert analysis.exit_code == 0
        assert analysis.clock == SHARED


def test_a_slow_rank_is_the_culprit_while_its_own_calls_are_shortest(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, slow={2: 0.03}))
    analysis = analyse(trace)
    assert _verdicts(analysis) == {0: "ok", 1: "ok", 2: "culprit", 3: "ok"}
    culprit = analysis.ranks[2]
    assert culprit.last_share > 0.9
    assert 0.025 < culprit.lateness_p50_s < 0.035
    # the wait it cost each step: about 30 ms once, not once per bucket
    assert 0.025 < culprit.caused_s_per_step < 0.035
    # the trap the rule avoids: the culprit's own calls are the shortest
    mean = {r: sum(c.in_situ_s for c in trace.calls(r)) / len(trace.calls(r)) for r in range(4)}
    assert min(mean, key=mean.get) == 2
    assert analysis.exit_code == 1


def test_a_shifted_clock_does_not_change_the_clock_free_answer(tmp_path):
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}  # two hosts: their clocks are not compared
    base = analyse(trace_format.load(ddp_job(tmp_path / "base", slow={1: 0.03}, hosts=hosts)))
    shifted = analyse(trace_format.load(ddp_job(
        tmp_path / "shifted", slow={1: 0.03}, hosts=hosts,
        clock_offset_s={2: 7.5, 3: -3.0})))
    assert base.clock == shifted.clock == CLOCK_FREE
    assert _verdicts(base) == _verdicts(shifted) == {0: "ok", 1: "culprit", 2: "ok", 3: "ok"}
    assert abs(base.ranks[1].lateness_p50_s - shifted.ranks[1].lateness_p50_s) < 1e-6
    # the same shift read as one host's clock names the wrong rank: the check bites
    wrong = analyse(trace_format.load(ddp_job(
        tmp_path / "wrong", slow={1: 0.03}, clock_offset_s={2: 7.5, 3: -3.0})))
    assert wrong.clock == SHARED and _verdicts(wrong)[2] == "culprit"


def test_a_trace_with_waits_only_is_read_clock_free(tmp_path):
    analysis = analyse(trace_format.load(ddp_job(tmp_path, slow={3: 0.03}, with_issue=False)))
    assert analysis.clock == CLOCK_FREE
    assert _verdicts(analysis)[3] == "culprit"
    assert 0.025 < analysis.ranks[3].caused_s_per_step < 0.035


def test_transient_steps_are_found(tmp_path):
    analysis = analyse(trace_format.load(ddp_job(tmp_path, steps=16, slow={1: 0.03},
                                                 slow_steps=(5, 8))))
    assert _verdicts(analysis) == {0: "ok", 1: "transient", 2: "ok", 3: "ok"}
    assert analysis.ranks[1].steps == (5, 8)
    assert analysis.ranks[1].late_steps == [5, 6, 7, 8]


def test_steps_narrow_the_analysis(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, steps=16, slow={1: 0.03}, slow_steps=(5, 8)))
    assert _verdicts(analyse(trace, steps=(10, 16)))[1] == "ok"
    # four steps are too few for chance to be ruled out (1/4 ** 4 > 1e-3 / 4): late in all
    # four, the rank is transient there, not a culprit
    narrowed = analyse(trace, steps=(5, 8))
    assert _verdicts(narrowed)[1] == "transient" and narrowed.steps == [5, 6, 7, 8]


def test_a_missing_rank_is_named_with_its_call(tmp_path):
    analysis = analyse(trace_format.load(ddp_job(tmp_path, steps=6, buckets=3, hang=(3, 4))))
    assert [(m.rank, m.call, m.op, m.group) for m in analysis.missing] == [
        (3, 12, "allreduce", "0")]  # steps 0-3, 3 buckets each: call 12 is step 4's first
    assert analysis.exit_code == 1


def test_two_ranks_a_slow_one_is_named(tmp_path):
    analysis = analyse(trace_format.load(ddp_job(tmp_path, world=2, slow={0: 0.03})))
    assert _verdicts(analysis) == {0: "culprit", 1: "ok"}


def test_at_64_ranks_a_small_steady_delay_is_an_outlier_among_the_ranks(tmp_path):
    # 3 ms late every step against 2 ms of noise per rank: others are last in most steps,
    # so the sign test alone misses it; the spread of the ranks' medians does not
    slow = analyse(trace_format.load(ddp_job(tmp_path / "slow", world=64, steps=20,
                                             buckets=2, noise_s=0.002, slow={21: 0.003})))
    assert [(r.rank, r.verdict) for r in slow.named] == [(21, "culprit")]
    clean = analyse(trace_format.load(ddp_job(tmp_path / "clean", world=64, steps=20,
                                              buckets=2, noise_s=0.002)))
    assert clean.named == []


def _effect(analysis, rank):
    """How far the rank's median step lateness sits above the others', in the noise's sigma."""
    typical = verdicts.quantile(list(analysis.step_lateness[rank].values()), 0.5)
    return (typical - analysis.noise_median_s) / analysis.noise_sigma_s


def _last_in(analysis, rank):
    cells = analysis.step_lateness
    return sum(max(cells, key=lambda r: cells[r].get(step, -1.0)) == rank
               for step in analysis.steps)


def test_a_rank_late_by_a_fraction_of_the_steps_noise_is_named(tmp_path):
    """0.5 ms a step against 3 ms of noise over 200 steps: last far more often than chance, and
    0.5-1 sigma above the others, as the ranks slowed by 5-10 % of a real step were here (the
    line at a whole sigma named 2 of 6 of those)."""
    analysis = analyse(trace_format.load(ddp_job(
        tmp_path, steps=200, buckets=2, compute_s=0.016, noise_s=0.003, slow={2: 0.0005},
        seed=2)))
    assert verdicts.K_LINE <= _effect(analysis, 2) < 1.0
    assert _verdicts(analysis) == {0: "ok", 1: "ok", 2: "culprit", 3: "ok"}


def test_a_habit_under_the_effect_line_is_not_named_though_significant(tmp_path):
    """0.3 ms a step against 3 ms of noise over 600 steps: the count alone is significant (as a
    clean rank's scheduler habit was on 2 cores shared by 4 ranks), the effect is not."""
    analysis = analyse(trace_format.load(ddp_job(
        tmp_path, steps=600, buckets=2, compute_s=0.016, noise_s=0.003, slow={2: 0.0003},
        seed=1)))
    steps = len(analysis.steps)
    assert verdicts.binomial_tail(_last_in(analysis, 2), steps, 0.25) < verdicts.ALPHA / 4
    assert _effect(analysis, 2) < verdicts.K_LINE
    assert analysis.named == []


def test_a_rank_late_every_step_behind_a_noisier_one_is_named(tmp_path):
    """Rank 2 is 2 ms late every step while rank 1's 12 ms noise makes it last in most steps:
    rank 2 is last no more often than chance (the last-count test alone missed 2 of 20 real
    ranks slowed by 10 % this way), but later than the others' median in most steps."""
    analysis = analyse(trace_format.load(ddp_job(
        tmp_path, steps=200, buckets=2, compute_s=0.016, noise_s=0.002, slow={2: 0.002},
        noisy={1: 0.012}, seed=0)))
    steps = len(analysis.steps)
    assert verdicts.binomial_tail(_last_in(analysis, 2), steps, 0.25) > 0.5
    assert _verdicts(analysis) == {0: "ok", 1: "culprit", 2: "culprit", 3: "ok"}
    assert "later than the others' median in" in analysis.ranks[2].evidence


def test_later_than_the_others_median_agrees_with_a_plain_median():
    """The one-sort-per-step count against statistics.median over the others, ties included."""
    import random
    import statistics

    rng = random.Random(1)
    for _ in range(500):
        values = {r: rng.choice([rng.random(), 0.5, 0.25]) for r in range(rng.randint(1, 9))}
        plain = sorted(r for r in values if len(values) > 1 and values[r] > statistics.median(
            [v for o, v in values.items() if o != r]))
        assert sorted(verdicts._over_others_median(values)) == plain, values
