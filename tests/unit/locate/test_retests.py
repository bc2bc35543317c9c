"""locate's retests (locate.retests): which pairs the next batch measures; a switch's retests
cross its uplink to leaves known to be good."""

from __future__ import annotations

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
