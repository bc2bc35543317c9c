"""locate's schedule (locate.schedule): retest rounds pair idle entities around candidate links
and keep a clean reference pair beside each link retest, and quick rounds under --topology
measure pairs inside every leaf."""

from __future__ import annotations

from commbench.locate import schedule as rounds_of


def test_retest_rounds_pair_idle_entities_around_candidate_links():
    """Reference pairs are a round's baseline: a candidate link is none."""
    rounds = rounds_of.pack([(1, 2)], reference_from=[0, 3, 4, 5], avoid={(0, 3), (4, 5)})
    assert sorted(rounds[0].pairs) == [(0, 4), (1, 2), (3, 5)]
    # where every pairing is a candidate, the entities are still paired
    rounds = rounds_of.pack([(1, 2)], reference_from=[0, 3], avoid={(0, 3)})
    assert sorted(rounds[0].pairs) == [(0, 3), (1, 2)]


def test_a_link_retest_keeps_a_reference_pair_beside_it():
    """The clean-CI failure's round: rank 3's retest with rank 1 and the two candidate links
    (0, 4) and (2, 5) filled all 6 ranks, no clean pair beside the links, and both were named
    bad against other rounds' level. Each link retest now has a reference pair in its round;
    the rank's retest and the first test of a round still go in as before."""
    links = {(0, 4), (2, 5)}
    rounds = rounds_of.pack([(1, 3), (0, 4), (2, 5)], reference_from=[0, 1, 2, 4, 5],
                            avoid=links, links=links)
    clean = [e for e in (0, 1, 2, 4, 5)]
    for r in rounds:
        for link in r.links:
            others = [p for p in r.pairs if p not in links and 3 not in p and p != link]
            assert others and all(a in clean and b in clean for a, b in others), r
    assert sorted(link for r in rounds for link in r.links) == [(0, 4), (2, 5)]
    assert (1, 3) in rounds[0].pairs
    # where no reference can be had at all (4 entities), a link still gets its retest
    rounds = rounds_of.pack([(0, 1), (2, 3)], reference_from=[0, 1, 2, 3],
                            avoid={(0, 1), (2, 3)}, links={(0, 1), (2, 3)})
    assert sorted(link for r in rounds for link in r.links) == [(0, 1), (2, 3)]


def test_quick_rounds_with_a_topology_measure_pairs_inside_every_leaf():
    """K random partners of 512 nodes left most leaves of 4 with no pair inside, and their
    hosts were named one by one instead of the switch: the first quick round pairs inside."""
    leaves = tuple(f"leaf{e // 4}" for e in range(512)) + (None,)  # one host under no leaf
    rounds = rounds_of.schedule(513, "quick", 3, leaves)
    assert len(rounds) == rounds_of.quick_count(513)
    first = rounds[0]
    inside = [(a, b) for a, b in first.pairs if leaves[a] == leaves[b]]
    assert len(inside) == 256 and len(first.byes) == 1
    for r in rounds:
        met = [e for pair in r.pairs for e in pair]
        assert len(met) == len(set(met))
    quick = rounds_of.quick_rounds(12, rounds_of.quick_count(12), 3)
    assert rounds_of.schedule(12, "quick", 3) == quick
