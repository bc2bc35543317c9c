"""locate's attribution, and the decision it starts, on synthetic fleets
(tests/unit/locate/fleets.py): no process, no torch."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.locate import attribution as locate
from commbench.locate import confirmation, retests
from commbench.locate import schedule as rounds_of
from commbench.locate.attribution import PairResult
from commbench.specs.locate import MinEffect
from tests.unit.locate.fleets import (
    BEHIND_B,
    LEAVES,
    LINK,
    bad,
    decide_leaves,
    decide_links,
    fleet,
    offline,
    run,
    uplink,
)

# ---- synthetic fleets -------------------------------------------------------------------------


def test_one_bad_entity_named_alone_with_evidence():
    suspects = run(8, slow={3: 0.5})
    assert bad(suspects) == [("gpu", (3,))]
    only = suspects[0]
    assert only.verdict == "bad gpu" and only.confirmed == (3, 3)
    assert abs(only.busbw_ratio - 0.5) < 0.03
    # the pooled effect, its interval and what it pools: 7 partners twice and 3 retests,
    # and the rule it was judged by (the z, its candidates, the line and its source)
    assert only.evidence.startswith("rank 3: 0.50x [0.")
    assert "over 17 exchanges (14 in the matrix, 3 retests, slow again 3/3)" in only.evidence
    assert "(bad needs 3.5: 3 candidate-metrics); min effect 11% (noise)" in only.evidence


def test_two_bad_entities_paired_together():
    suspects = run(6, slow={1: 0.5, 2: 0.6})
    assert bad(suspects) == [("gpu", (1,)), ("gpu", (2,))]


def test_bad_link_between_good_ends():
    suspects = run(6, links={(1, 3): 0.5})
    assert bad(suspects) == [("link", (1, 3))]
    (link,) = [s for s in suspects if s.verdict == "bad link"]
    assert "over 5 exchanges (2 in the matrix, 3 retests" in link.evidence
    assert link.evidence.endswith("both ends normal with their other partners; min effect 30% "
                                  "(cap)")


def test_bad_entity_plus_bad_link():
    suspects = run(8, slow={5: 0.5}, links={(1, 3): 0.5})
    assert bad(suspects) == [("gpu", (5,)), ("link", (1, 3))]


def test_one_congested_round_names_nobody():
    """Not even as a candidate: the round's median is removed, so its pairs are no links."""
    assert locate.attribute(8, fleet(8, congested={2: 0.4})).suspects == []
    assert bad(run(8, congested={2: 0.4})) == []


def test_twenty_percent_bad():
    slow = {0: 0.5, 7: 0.5, 11: 0.6, 18: 0.5}
    suspects = run(20, slow=slow)
    assert bad(suspects) == [("gpu", (e,)) for e in sorted(slow)]


@pytest.mark.parametrize("seed", range(20))
def test_clean_fleet_names_nobody(seed):
    """A noisy pair may become a candidate; the retest does not reproduce it."""
    assert bad(run(8, seed=seed, noise=0.05)) == []


def test_clean_fleets_rarely_even_have_a_candidate():
    """Candidates cost retests: at a quiet cluster's noise few clean fleets have one, though
    no z gates them any more (they must be --min-effect slower)."""
    flagged = sum(bool(locate.attribute(8, fleet(8, seed=s, noise=0.05), "gpu",
                                        MinEffect()).suspects) for s in range(100))
    assert flagged <= 15


def test_noise_free_fleet_names_nobody():
    """MAD = 0: without the floor every tiny difference would be infinitely many z away."""
    pairs = fleet(6, noise=0.0)
    pairs[0] = PairResult(0, pairs[0].a, pairs[0].b, 9.9, 50.2)  # 1 % off: not a suspect
    assert locate.attribute(6, pairs).suspects == []


def test_mad_floor_keeps_a_noise_free_fleet_clean():
    """MAD = 0 and no --min-effect: a 0.01 % difference is a candidate (every slower one
    is), and the noise floor keeps its pooled z far inside 3.5."""
    pairs = fleet(6, noise=0.0)
    pairs[3] = PairResult(pairs[3].round, pairs[3].a, pairs[3].b, 9.999, 50.0)
    judged = confirmation.judge(6, pairs, "gpu", 0.0)
    assert not [s for s in judged.suspects if s.verdict.startswith("bad")]


def test_min_effect_keeps_a_small_difference_out():
    """5 % slow on a noise-free fleet is far beyond 3.5 z, but below --min-effect 10 %."""
    pairs = fleet(8, slow={2: 0.95}, noise=0.0)
    assert locate.attribute(8, pairs, "gpu", 0.10).suspects == []
    assert [s.entities for s in locate.attribute(8, pairs, min_effect=0.02).suspects] == [(2,)]


def test_slow_that_does_not_reproduce_is_transient():
    """Slow in the whole matrix (far beyond 3.5 z), healthy in every retest."""
    suspects = run(8, slow={4: 0.5}, later={})
    assert [(s.entities, s.verdict) for s in suspects] == [((4,), "transient")]
    assert suspects[0].confirmed == (0, 3)
    assert "3 retests, slow again 0/3" in suspects[0].evidence


# ---- the pooled decision (issue 30, point 1) --------------------------------------------------
# Seeded synthetic pair records with lognormal noise at 0.1 (log units; the 2-core VM's clean
# runs read 0.11-0.35 in busbw, 0.14-0.19 in latency), the decision as the ranks run it.


def test_a_1_4x_slow_link_is_bad_on_its_pooled_evidence():
    """0.71x in both metrics for one pair: in the matrix its z alone is often short of 3.5;
    pooled over its retests it is named, and neither end."""
    named = 0
    for seed in range(10):
        suspects = run(6, links={(1, 3): 1 / 1.4}, noise=0.1, seed=seed)
        assert bad(suspects) in ([], [("link", (1, 3))]), seed
        if bad(suspects):
            named += 1
            (link,) = [s for s in suspects if s.verdict == "bad link"]
            ratio = link.busbw_ratio if link.metric == "busbw" else 1 / link.lat_ratio
            assert 0.6 < ratio < 0.85, link.evidence  # planted 0.71x
            assert link.measurements >= 4 and link.pooled_z <= -3.5
    assert named >= 8  # the misses: not 20 % slow in the matrix once, or an end slowish


def test_a_1_3x_slow_rank_is_bad_on_its_pooled_evidence():
    """0.77x against a 20 % line (--min-effect busbw=20%,lat=20%: a quieter machine's; the
    default 30 % of this VM puts a 1.3x rank on the line): the first pass misses it now and
    then (its median over 5 partners is 0.056 noisy), so 8 of 10, nobody else ever."""
    named = 0
    for seed in range(10):
        suspects = run(6, slow={2: 1 / 1.3}, noise=0.1, seed=seed, min_effect=MinEffect(0.2, 0.2))
        assert bad(suspects) in ([], [("gpu", (2,))]), seed
        if bad(suspects):
            named += 1
            (rank,) = [s for s in suspects if s.verdict == "bad gpu"]
            assert 0.65 < rank.busbw_ratio < 0.9, rank.evidence  # planted 0.77x
    assert named >= 8


def test_a_clean_fleet_with_one_pair_1_15x_slow_names_nobody():
    """The accusation of issue 30: a clean fleet on a busy machine, one pair 1.15x slower in
    latency (below the latency --min-effect) and busbw: retested, nobody is bad."""
    for seed in range(10):
        suspects = run(6, links={(4, 5): 1 / 1.15}, noise=0.1, seed=seed)
        assert bad(suspects) == [], [s.evidence for s in suspects]


def test_a_candidate_below_the_min_effect_on_pooled_evidence_is_ok():
    """One unlucky matrix pair (0.65x once, then normal): a candidate whatever its z, its
    retests pull the pooled effect under --min-effect: ok, no suspect, nothing left open."""
    pairs = fleet(6, noise=0.1)
    i = next(i for i, p in enumerate(pairs) if (p.a, p.b) == (0, 4))
    p = pairs[i]
    pairs[i] = PairResult(p.round, p.a, p.b, p.busbw * 0.65, p.lat, p.lat_p99)
    for batch in range(3):
        rounds = retests.next_rounds(6, pairs, "gpu", MinEffect(), 3)
        if not rounds:
            break
        pairs = pairs + fleet(6, noise=0.1, seed=9 + batch, rounds=rounds)
    judged = confirmation.judge(6, pairs, "gpu", MinEffect())
    (link,) = [s for s in judged.suspects if s.entities == (0, 4)]
    assert link.verdict == "ok" and link.confirmed[0] == 0 and link.confirmed[1] >= 3
    assert link not in judged.open
    assert not [s for s in judged.suspects if s.verdict.startswith("bad")]
    later = retests.next_rounds(6, pairs, "gpu", MinEffect(), 3)
    assert not [r for r in later if (0, 4) in r.pairs]


def test_an_effect_without_enough_z_is_retested_again_never_bad_by_luck():
    """A link 1.25x slow at a pair noise of 0.3: one batch does not settle it, so more are
    asked for (up to the cap); bad only ever with a pooled z beyond 3.5."""
    again = 0
    for seed in range(5):
        pairs, judged = offline(6, links={(2, 5): 1 / 1.25}, noise=0.3, seed=seed)
        again += any(s.measurements > 4 for s in judged.suspects if s.kind == "link")
        assert all(s.pooled_z <= -3.5 and len(s.interval) == 2
                   for s in judged.suspects if s.verdict.startswith("bad"))
    assert again >= 2  # a second batch asked for, in some of them at least


def test_the_interval_brackets_the_planted_effect():
    suspects = run(8, slow={5: 0.6}, noise=0.05, seed=2)
    (rank,) = [s for s in suspects if s.verdict == "bad gpu"]
    low, high = rank.interval
    assert low < rank.effect < high
    assert low - 0.02 < np.log(0.6) < high + 0.02  # planted 0.6x in both metrics


def test_the_evidence_reads_as_pooled_effect_interval_and_count():
    import re

    suspects = run(6, links={(0, 2): 0.5}, seed=1)
    (link,) = [s for s in suspects if s.verdict == "bad link"]
    assert re.match(r"rank 0 - rank 2: \d\.\d\dx \[\d\.\d\d-\d\.\d\d\] the fleet median "
                    r"(busbw|latency) over 5 exchanges \(2 in the matrix, 3 retests, slow again "
                    r"3/3\), z -\d+\.\d \(bad needs \d\.\d: (3\.5 raised for )?\d+ "
                    r"candidate-metrics?\), both ends normal", link.evidence), link.evidence


def test_latency_and_busbw_together_find_a_slowdown_neither_shows_alone():
    """1.3x slower in both metrics at a pair noise of 0.1: the two together (their mean,
    sigma / sqrt 2) are the surest, and nobody else is named. Under the command's schedule
    (the round robin twice at 8 entities) rank 3 is named alone in 15 of 15 seeds, 13 of
    them in the two together; the rate of a false link beside it is bench/locate.py's to
    measure, not a test's to allow."""
    runs = [run(8, slow={3: 1 / 1.3}, noise=0.1, seed=s, min_effect=MinEffect(0.2, 0.2))
            for s in range(15)]
    together = sum(any(x.metric == "both" and x.verdict == "bad gpu" for x in found)
                   for found in runs)
    assert together >= 10
    assert [bad(found) for found in runs] == [[("gpu", (3,))]] * 15
    assert not [x for found in runs for x in found
                if x.verdict.startswith("bad") and x.kind == "link" and 3 in x.entities]


def test_a_congested_round_of_three_pairs_names_nobody():
    """Six entities: a round's median is one of its three pairs; the round is still removed
    (its level is far beyond the noise), and nobody is named."""
    for seed in range(5):
        assert bad(run(6, congested={2: 0.4}, seed=seed)) == []


def test_no_good_partner_is_inconclusive():
    """Of two entities either may be the slow one: nobody is known good, so nothing is
    retested and the verdict is inconclusive."""
    pairs = fleet(3, slow={0: 0.5})
    assert retests.next_rounds(3, pairs, "gpu", MinEffect(), 0) == []
    judged = confirmation.judge(3, pairs, "gpu", MinEffect(), ["a", "b", "c"])
    assert [(s.entities, s.verdict) for s in judged.suspects] == [((0,), "inconclusive")]
    assert "not retested (no known-good partner)" in judged.suspects[0].evidence
    assert retests.next_rounds(2, fleet(2, slow={0: 0.5}), "gpu", MinEffect(), 3) == []


def test_matrix_is_ratio_to_fleet_median_with_untested_cells_nan():
    pairs = fleet(4, slow={0: 0.5}, noise=0.0, rounds=rounds_of.circle_rounds(4)[:2])
    m = locate.matrix(4, pairs, "busbw")
    assert np.isnan(np.diag(m)).all()
    assert np.isnan(m).sum() == 4 + 2 * 2  # diagonal + the round not measured
    slow = [m[0, b] for b in range(1, 4) if not np.isnan(m[0, b])]
    normal = [m[a, b] for a in range(1, 4) for b in range(1, 4) if not np.isnan(m[a, b])]
    assert max(slow) / min(normal) == pytest.approx(0.5)


# ---- links in a small fleet (issue 30, point 4) -----------------------------------------------


def test_a_link_whose_one_reading_is_below_the_line_is_still_retested_and_named():
    """1.45x slow, its matrix reading 1.2x: below the 30 % line (the cap a 6-rank run
    keeps), above half of it; without the half line it is never retested. Both of its
    readings in the matrix (the round robin twice) fall under half the line in 1 seed of 20
    (seed 2): it is never a candidate there, and nothing else is named."""
    assert locate.link_screen(6) == 0.5 and locate.link_screen(64) == 1.0
    named = 0
    for seed in range(20):
        pairs, judged = decide_links(6, {LINK: 1 / 1.2}, {LINK: 1 / 1.45}, seed=seed)
        assert bad(judged.suspects) in ([], [("link", LINK)]), seed
        if not bad(judged.suspects):
            continue
        named += 1
        (link,) = [s for s in judged.suspects if s.verdict == "bad link"]
        ratio = link.busbw_ratio if link.metric == "busbw" else 1 / link.lat_ratio
        assert link.measurements >= 4 and 0.62 < ratio < 0.8, link.evidence  # 0.69x
    assert named == 19


def test_a_large_fleet_keeps_the_whole_line_for_links():
    """At 64 entities a pair 20 % slow in the matrix is no candidate: half the line there
    would retest some 20 % of a noisy fleet's pairs."""
    n = 64
    main = fleet(n, links={(5, 9): 1 / 1.2}, noise=0.02, seed=1)
    found = locate.attribute(n, main, "gpu", MinEffect(0.3, 0.3))
    assert not [s for s in found.suspects if s.kind == "link"]
    small = fleet(6, links={LINK: 1 / 1.2}, noise=0.02, seed=1)
    found = locate.attribute(6, small, "gpu", MinEffect(0.3, 0.3))
    assert [s.entities for s in found.suspects if s.kind == "link"] == [LINK]


def test_a_cleared_end_counts_as_normal_when_its_pairs_are_weighed():
    """``links(normal=...)``: an end whose retests cleared it adds nothing to what its pairs
    are expected to be, where its matrix score (0.75x) would explain its link away."""
    main = fleet(6, links={LINK: 1 / 1.5, (1, 4): 1 / 1.45, (1, 5): 1 / 1.45}, noise=0.01)
    scores = {m: locate.score_metric(6, main, m, 0.3) for m in locate.METRICS}
    assert scores["busbw"].score[1] < -0.3
    found = locate.links(main, scores, set(), MinEffect(0.3, 0.3))
    assert LINK not in [s.entities for s in found]
    found = locate.links(main, scores, set(), MinEffect(0.3, 0.3), normal=frozenset({1}))
    assert LINK in [s.entities for s in found]


def twice(n, first, second, noise=0.02, seed=0):
    """The full schedule of a small fleet (the round robin twice), the first pass measured
    with ``first`` slow links, the second with ``second``."""
    rounds = rounds_of.schedule(n, "full")
    half = len(rounds) // 2
    return (fleet(n, links=first, noise=noise, seed=seed, rounds=rounds[:half])
            + fleet(n, links=second, noise=noise, seed=seed + 1, rounds=rounds[half:]))


def link_candidates(n, pairs):
    found = locate.attribute(n, pairs, "gpu", MinEffect(0.3, 0.3))
    return [s.entities for s in found.suspects if s.kind == "link"]


def test_a_small_fleet_reads_each_pair_twice_and_a_link_takes_their_median():
    """A 1.5x link read once fast (1.05x) and once slow is a candidate whichever reading
    came first (their median 1.25x is beyond half the 30 % line): on its one fast reading
    alone it would not be, and a rule that kept either reading alone misses one order. A
    clean pair read 1.25x once and 0.97x once is none (1.10x), where its slow reading alone
    would make it one."""
    assert len(rounds_of.schedule(6, "full")) == 2 * len(rounds_of.circle_rounds(6))
    fast, slow = {LINK: 1 / 1.05}, {LINK: 1 / 1.5}
    assert link_candidates(6, fleet(6, links=fast, noise=0.02)) == []
    assert link_candidates(6, twice(6, fast, slow)) == [LINK]
    assert link_candidates(6, twice(6, slow, fast)) == [LINK]
    noisy = (2, 4)
    assert link_candidates(6, fleet(6, links={noisy: 1 / 1.25}, noise=0.02)) == [noisy]
    assert link_candidates(6, twice(6, {noisy: 1 / 1.25}, {noisy: 1 / 0.97})) == []


# ---- the level switch (issue 30, point 2): a leaf's uplink under --topology -------------------


@pytest.mark.parametrize("seed", range(4))
def test_a_slow_uplink_is_one_bad_switch_and_none_of_its_hosts(seed):
    pairs, judged = decide_leaves(links=uplink(LEAVES, "b", 1.5), seed=seed)
    assert bad(judged.suspects) == [("switch", BEHIND_B)]
    (switch,) = [s for s in judged.suspects if s.kind == "switch"]
    assert switch.name == "b" and switch.verdict == "bad switch"
    assert 0.6 < switch.busbw_ratio < 0.74, switch.evidence  # planted 1 / 1.5 = 0.67x
    assert switch.evidence.startswith("switch b: "), switch.evidence
    assert "(its uplink)" in switch.evidence
    # its hosts are not blamed one by one, nor its pairs across as links (a small fleet
    # retests a clean pair half the line slow, which is cleared: it involves no host of b)
    assert not [s for s in judged.suspects if s.kind != "switch"
                and set(s.entities) & set(BEHIND_B)]


def test_the_same_fault_without_a_topology_blames_the_hosts_one_by_one():
    """What the topology changes: without it the uplink's four hosts are each bad."""
    _, without = decide_leaves(links=uplink(LEAVES, "b", 1.5), topology=False)
    assert bad(without.suspects) == [("node", (e,)) for e in BEHIND_B]


def test_a_slow_host_inside_a_leaf_is_still_a_bad_node():
    for seed in range(3):
        _, judged = decide_leaves(slow={5: 1 / 1.5}, seed=seed)
        assert bad(judged.suspects) == [("node", (5,))], [s.evidence for s in judged.suspects]
        assert not [s for s in judged.suspects if s.kind == "switch"]


@pytest.mark.parametrize("seed", range(6))
def test_a_clean_fleet_with_a_topology_names_nothing(seed):
    _, judged = decide_leaves(noise=0.1, seed=seed)
    assert bad(judged.suspects) == []
    assert not [s for s in judged.suspects if s.kind == "switch"]


def test_a_slow_inside_leaf_is_no_switch():
    """A leaf slow inside (its hosts' own pairs) and normal across is not its uplink."""
    inside = {(x, y): 1 / 1.5 for x in BEHIND_B for y in BEHIND_B if x != y}
    _, judged = decide_leaves(links=inside)
    assert not [s for s in judged.suspects if s.kind == "switch"]


def test_two_slow_uplinks_of_five_leaves_are_two_bad_switches():
    """(Two of four would be half the fleet: its median pair then is no normal one.)"""
    leaves = tuple(x for x in "abcde" for _ in range(4))
    links = {**uplink(leaves, "a", 1.6), **uplink(leaves, "c", 1.6)}
    for x, y in links:  # a pair across both slow uplinks: slowed twice
        if {leaves[x], leaves[y]} == {"a", "c"}:
            links[(x, y)] = 1 / 1.6 ** 2
    _, judged = decide_leaves(leaves, links=links)
    assert bad(judged.suspects) == [("switch", (0, 1, 2, 3)), ("switch", (8, 9, 10, 11))]


# ---- wrong results ----------------------------------------------------------------------------


def test_wrong_results_name_the_entity_or_the_link():
    pairs = fleet(6)
    names = [f"rank {e}" for e in range(6)]
    broken = [PairResult(p.round, p.a, p.b, p.busbw, p.lat, status="wrong")
              if 3 in (p.a, p.b) or (p.a, p.b) == (0, 1) else p for p in pairs]
    found = locate.wrong_suspects(6, broken, names, "gpu")
    assert [(s.kind, s.entities, s.verdict) for s in found] == [
        ("gpu", (3,), "bad gpu"), ("link", (0, 1), "bad link")]
    assert found[0].evidence == "rank 3: wrong results with 5/5 partners"
    assert locate.wrong_suspects(6, pairs, names, "gpu") == []
