"""locate's schedule (locate.schedule): the main rounds (a round robin that meets every pair
once and nobody twice a round, byes in turn; quick rounds seeded; the options), and retest
rounds: nobody twice, filled with references; they pair idle entities around candidate links and
keep a clean reference pair beside each link retest, and quick rounds under --topology measure
pairs inside every leaf."""

from __future__ import annotations

import itertools

import pytest

from commbench.locate import schedule as rounds_of


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 16, 17])
def test_circle_meets_every_pair_once_and_nobody_twice_in_a_round(n):
    rounds = rounds_of.circle_rounds(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    met = [pair for r in rounds for pair in r.pairs]
    assert sorted(met) == sorted(itertools.combinations(range(n), 2))
    for r in rounds:
        seen = [e for pair in r.pairs for e in pair] + list(r.byes)
        assert sorted(seen) == list(range(n))  # everybody once: in a pair or on a bye
        assert len(r.pairs) == n // 2


@pytest.mark.parametrize("n", [3, 5, 7, 9])
def test_byes_rotate_through_everybody_once(n):
    byes = [b for r in rounds_of.circle_rounds(n) for b in r.byes]
    assert sorted(byes) == list(range(n))


def test_even_fleet_has_no_bye():
    assert all(not r.byes for r in rounds_of.circle_rounds(8))


def test_quick_rounds_are_seeded_and_still_valid():
    a = rounds_of.quick_rounds(32, 6, seed=7)
    assert a == rounds_of.quick_rounds(32, 6, seed=7)
    assert a != rounds_of.quick_rounds(32, 6, seed=8)
    assert len(a) == 6
    met = [pair for r in a for pair in r.pairs]
    assert len(met) == len(set(met)) == 6 * 16  # no pair twice
    for r in a:
        assert sorted(e for pair in r.pairs for e in pair) == list(range(32))


def test_schedule_options():
    # up to 16 entities the full round robin runs twice, in the same order, indexed on
    once, twice = rounds_of.circle_rounds(6), rounds_of.schedule(6, "full")
    assert [r.pairs for r in twice] == [r.pairs for r in once] * 2
    assert [r.index for r in twice] == list(range(10))
    assert len(rounds_of.schedule(17, "full")) == 17 and len(rounds_of.schedule(16, "full")) == 30
    assert len(rounds_of.schedule(64, "quick")) == rounds_of.quick_count(64) == 8
    assert len(rounds_of.schedule(6, "quick")) == 5  # never more than the full round robin
    assert len(rounds_of.schedule(10, "3")) == 3


def test_pack_puts_nobody_twice_in_a_round_and_fills_with_references():
    rounds = rounds_of.pack([(0, 1), (0, 2), (3, 4)], reference_from=[5, 6, 7, 8, 2])
    assert [r.pairs[:2] for r in rounds][0] == ((0, 1), (3, 4))
    for r in rounds:
        seen = [e for pair in r.pairs for e in pair]
        assert len(seen) == len(set(seen))
    assert (0, 2) in rounds[1].pairs
    assert rounds[0].phase == "confirm"


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
