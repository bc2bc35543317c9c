"""locate's schedule: who meets whom in which round (docs/commands/locate.md, "Rounds").

A round is a set of disjoint entity pairs measured at once; the main rounds are a round robin
(the circle method: every pair once, twice up to SMALL_FLEET entities), or for ``quick`` a few
seeded shuffles, with pairs inside every leaf under --topology; retests are packed into rounds
with reference pairs beside them (``pack``). Pure: no process, no torch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

SMALL_FLEET = 16  # entities up to which a link candidate needs only LINK_SCREEN of the line


@dataclass(frozen=True)
class Round:
    """One round: pairs of entity indices that run at the same time, and who sits out."""

    index: int
    pairs: tuple[tuple[int, int], ...]
    byes: tuple[int, ...] = ()
    phase: str = "main"  # main | confirm
    links: tuple[tuple[int, int], ...] = ()  # pairs retested as candidate links

    def phase_of(self, a: int, b: int) -> str:
        """A pair's phase: ``link`` for a candidate link's retest, else the round's. A
        link's retests are no test of its ends: an end judged while its link was not yet a
        candidate read the link's slow retests as its own (a cleared end turned bad, and
        the link was dropped)."""
        return "link" if (min(a, b), max(a, b)) in self.links else self.phase


def circle_rounds(n: int, count: int | None = None) -> list[Round]:
    """The circle method (round-robin tournament): every entity meets every other exactly once.

    Even n: n-1 rounds of n/2 pairs. Odd n: a phantom entity joins, whoever meets it has a bye,
    n rounds of (n-1)/2 pairs, and the phantom is the fixed point so the bye rotates through
    everybody once. ``count``: the first ``count`` of those rounds only."""
    if n < 2:
        return []
    slots = list(range(n)) + ([None] if n % 2 else [])
    m = len(slots)
    fixed, moving = slots[-1], slots[:-1]
    rounds = []
    for index in range(m - 1 if count is None else min(m - 1, max(0, count))):
        order = [fixed, *moving[index:], *moving[:index]]
        pairs, byes = [], []
        for i in range(m // 2):
            a, b = order[i], order[m - 1 - i]
            if a is None or b is None:
                byes.append(b if a is None else a)
            else:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(Round(index, tuple(sorted(pairs)), tuple(byes)))
    return rounds


def quick_rounds(n: int, count: int, seed: int = 0,
                 leaves: Sequence[str | None] = ()) -> list[Round]:
    """``count`` rounds of the circle method over a seeded shuffle of the entities: each round
    still pairs everybody (one bye for odd n), the same seed gives the same rounds, and a
    different seed meets different partners. More rounds than the full schedule has are the
    full schedule. With ``leaves`` (--topology), the first round pairs entities inside their
    leaf (``inside_round``) and ``count`` - 1 shuffled rounds follow."""
    shuffled = list(range(n))
    random.Random(seed).shuffle(shuffled)
    first = inside_round(leaves, shuffled) if count >= 2 and len(leaves) == n else None
    rounds = [first] if first is not None else []
    for found in circle_rounds(n, count - len(rounds)):
        pairs = tuple(sorted((min(shuffled[a], shuffled[b]), max(shuffled[a], shuffled[b]))
                             for a, b in found.pairs))
        rounds.append(Round(found.index + len(rounds) if first is not None else found.index,
                            pairs, tuple(shuffled[b] for b in found.byes)))
    return rounds


def inside_round(leaves: Sequence[str | None], order: Sequence[int]) -> Round | None:
    """A round that pairs entities inside their leaf switch (in ``order``), whoever is left
    over (a leaf's odd one, entities under no leaf) with each other. A bad uplink is told
    from its hosts by their pairs inside the leaf being normal: K random partners of 512
    nodes left most leaves of 4 with none (the simulator named their 4 hosts bad nodes
    instead of the switch). None when no leaf has two entities."""
    members: dict[str, list[int]] = {}
    for e in order:
        if leaves[e] is not None:
            members.setdefault(leaves[e], []).append(e)
    if not any(len(m) >= 2 for m in members.values()):
        return None
    pairs, left = [], [e for e in order if leaves[e] is None]
    for found in members.values():
        pairs += [(min(found[i], found[i + 1]), max(found[i], found[i + 1]))
                  for i in range(0, len(found) - 1, 2)]
        left += found[len(found) - len(found) % 2:]
    pairs += [(min(left[i], left[i + 1]), max(left[i], left[i + 1]))
              for i in range(0, len(left) - 1, 2)]
    return Round(0, tuple(sorted(pairs)), tuple(left[len(left) - len(left) % 2:]))


def schedule(n: int, rounds: str, seed: int = 0,
             leaves: Sequence[str | None] = ()) -> list[Round]:
    """--rounds full | quick | K: the whole round robin, or K (quick: about log2 n + 2)
    rounds over a seeded shuffle (with ``leaves``: the first of them inside the leaves).

    ``full`` runs the round robin twice up to SMALL_FLEET entities, the same rounds in the
    same order (each pair's two readings a whole pass apart): a link is one pair, and its one
    reading in the matrix decided whether it was ever retested. Two readings a pair (their
    median) named a 1.4x link in 197 of 200 synthetic 6-rank fleets at 0.08 noise and 166 at
    0.14, against 187 and 118 once (with ``batches``' extra retests). It costs n - 1 rounds
    (5 at 6 ranks, about 4 s here); above 16 entities the fleet's many pairs are the
    statistics, and ``quick`` is the schedule large fleets run."""
    if rounds == "full":
        once = circle_rounds(n)
        if n > SMALL_FLEET:
            return once
        return once + [Round(r.index + len(once), r.pairs, r.byes) for r in once]
    count = quick_count(n) if rounds == "quick" else int(rounds)
    return quick_rounds(n, count, seed, leaves)


def quick_count(n: int) -> int:
    """Enough partners that the median over them ignores one slow partner: at least 5 (or
    the full schedule when it is shorter), growing with log2 n."""
    return min(n - 1 + n % 2, max(5, math.ceil(math.log2(max(n, 2))) + 2))


def pack(tests: Sequence[tuple[int, int]], reference_from: Sequence[int],
         phase: str = "confirm", first_index: int = 0,
         avoid: set[tuple[int, int]] | frozenset = frozenset(),
         links: set[tuple[int, int]] | frozenset = frozenset()) -> list[Round]:
    """Pairs to measure, greedily packed into rounds in which nobody appears twice; each round
    is filled with pairs among the idle ``reference_from`` entities, the round's own baseline
    (a confirmation round is compared with good pairs measured at the same time). ``avoid``:
    pairs that are no baseline (candidate links): idle entities are paired around them where
    they can be (in a 6-rank run whose every rank ends a candidate link, a retest's one
    reference was another candidate, its level the one clean pair left, and a clean link's
    retests read 1.39x slow against it). ``links``: tests that retest a candidate link
    (``Round.links``).

    A link's retest goes into a round only where a reference pair is left beside it
    (``_reference_left``), unless it is the round's first test: a link is judged against
    the clean pairs of its own round, and a round of nothing but candidates takes the retest
    phase's level from other rounds. In a clean-CI run, rank 3's retest and two candidate
    links filled a 6-rank round; with rank 3 asleep the round's latency level was not the
    others', and both clean links were named bad."""
    pending = list(tests)
    rounds: list[Round] = []
    while pending:
        busy: set[int] = set()
        chosen, left = [], []
        for a, b in pending:
            if (a in busy or b in busy or a == b
                    or (chosen and (min(a, b), max(a, b)) in links
                        and not _reference_left(reference_from, busy | {a, b}, avoid))):
                left.append((a, b))
            else:
                chosen.append((a, b))
                busy.update((a, b))
        retested = tuple(pair for pair in chosen if (min(pair), max(pair)) in links)
        chosen += _references([e for e in reference_from if e not in busy], avoid)
        rounds.append(Round(first_index + len(rounds), tuple(chosen), (), phase, retested))
        pending = left
    return rounds


def _reference_left(reference_from: Sequence[int], busy: set[int],
                    avoid: set[tuple[int, int]] | frozenset) -> bool:
    """Two idle known-good entities that are no candidate link: a clean pair for the round."""
    idle = [e for e in reference_from if e not in busy]
    return any((min(a, b), max(a, b)) not in avoid
               for i, a in enumerate(idle) for b in idle[i + 1:])


def _references(idle: Sequence[int], avoid: set[tuple[int, int]] | frozenset
                ) -> list[tuple[int, int]]:
    """Idle entities paired in order, each with the first one left that it does not form an
    avoided pair with (or the first one left, where every one would)."""
    left, out = list(idle), []
    while len(left) >= 2:
        me = left.pop(0)
        other = next((e for e in left if (min(me, e), max(me, e)) not in avoid), left[0])
        left.remove(other)
        out.append((min(me, other), max(me, other)))
    return out
