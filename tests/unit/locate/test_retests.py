"""locate's retests (locate.retests): which pairs the next batch measures: distinct good
partners after the matrix, none where every entity is a candidate, and a switch's retests across
its uplink to leaves known to be good."""

from __future__ import annotations

from commbench.locate import attribution as locate
from commbench.locate import retests
from commbench.specs.locate import MinEffect
from tests.unit.locate.fleets import BEHIND_B, LEAVES, fleet, uplink


def test_switch_retests_cross_its_uplink_to_known_good_leaves():
    n = len(LEAVES)
    main = fleet(n, links=uplink(LEAVES, "b", 1.5), noise=0.05)
    rounds = retests.next_rounds(n, main, "node", MinEffect(), 3, LEAVES)
    tests = [pair for r in rounds for pair in r.pairs
             if (pair[0] in BEHIND_B) != (pair[1] in BEHIND_B)]
    assert len(tests) == 3  # --confirm retests of the switch
    assert all(LEAVES[a] != LEAVES[b] for a, b in tests)
    assert len({e for pair in tests for e in pair if e in BEHIND_B}) == 3  # hosts in turn
    for r in rounds:  # nobody twice in a round; references are pairs nobody suspects
        seen = [e for pair in r.pairs for e in pair]
        assert len(seen) == len(set(seen))


def test_every_entity_a_candidate_leaves_nobody_to_retest_with():
    scores = locate.attribute(3, fleet(3)).scores
    found = locate.Attribution(scores, [locate.Suspect("gpu", (e,), "busbw", 0.5, 1.0)
                                        for e in range(3)])
    assert retests.good_partners(3, found) == []
    assert retests.next_rounds(3, fleet(3, slow={0: 0.5}), "gpu", MinEffect(), 0) == []


def test_retests_use_distinct_good_partners_after_the_matrix():
    pairs = fleet(8, slow={3: 0.5})
    rounds = retests.next_rounds(8, pairs, "gpu", MinEffect(), 3)
    partners = {b if a == 3 else a for r in rounds for a, b in r.pairs if 3 in (a, b)}
    assert len(partners) == 3 and 3 not in partners
    assert rounds[0].index == 7 and {r.phase for r in rounds} == {"confirm"}
