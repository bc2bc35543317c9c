"""locate's retests: which pairs the next batch measures, for every candidate whose pooled
evidence has not settled (``next_rounds``), how many batches at most (``batches``), and the
whole decision offline (``locate_offline``) for synthetic fleets. The evidence and the
verdicts are locate.confirmation's (docs/commands/locate.md, "How it decides"). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from commbench.locate.attribution import Attribution, Effect, PairResult, Suspect, limit
from commbench.locate.confirmation import Judged, judge
from commbench.locate.noise import _is_test_of, _tested, resolve
from commbench.locate.schedule import SMALL_FLEET, Round, pack, schedule
from commbench.specs.locate import LocateSpec


def good_partners(n: int, attribution: Attribution) -> list[int]:
    """Entities that are not candidates, the most normal first, ends of candidate links
    last (they are normal entities, but their pair is in question)."""
    entities, tested_links = _tested(attribution)
    ends = {e for link in tested_links for e in link}
    busbw = attribution.scores["busbw"].score
    lat = attribution.scores["lat"].score
    good = [e for e in range(n) if e not in entities]
    return sorted(good, key=lambda e: (e in ends, abs(busbw.get(e, 0.0))
                                       + abs(lat.get(e, 0.0)), e))


def next_rounds(n: int, pairs: Sequence[PairResult], kind: str, min_effect: Effect | None,
                confirm: int, leaves: Sequence[str | None] = (),
                judged: Judged | None = None) -> list[Round]:
    """The next batch: ``confirm`` more retests of every open candidate (an entity against
    known-good partners it has not met in a retest yet where there are any, a link its pair),
    packed into rounds beside reference pairs; none when everything has settled. Fewer than 3
    entities: none (of two, either may be the slow one, nobody is known good). ``judged``:
    ``judge`` of these very pairs, when the caller has it."""
    if n < 3 or confirm < 1:
        return []
    min_effect = resolve(min_effect, n, pairs, kind, leaves)
    if judged is None:
        judged = judge(n, pairs, kind, min_effect, confirm=confirm, leaves=leaves)
    if not judged.open:
        return []
    good = good_partners(n, judged.attribution)
    # every idle entity nobody suspects makes reference pairs, ends of candidate links too
    # (last, and never paired into a candidate link): a real 6-rank run whose 5 of 6
    # ranks ended candidate links had retest rounds of two candidate pairs and no reference
    # at all, and on this VM a round of 2 pairs runs 1.5x the matrix's latency (2 cores
    # for 4 ranks, not 6): two clean links were named bad against the matrix's level
    orders: list[list[tuple[int, int]]] = []
    link_orders: list[list[tuple[int, int]]] = []
    for i, suspect in enumerate(judged.open):
        me = suspect.entities[0]
        if suspect.kind == "link":
            link_orders.append([_ordered(*suspect.entities)])
            continue
        if suspect.kind == "switch":
            # none where no known-good entity sits under another leaf (the round robin
            # twice at 12 nodes under 3 leaves: every retest batch stopped on it)
            across = _switch_retests(suspect, pairs, good, confirm)
            if across:
                orders.append(across)
            continue
        met = {p.a if p.b == me else p.b for p in pairs if p.phase == "confirm"
               and me in (p.a, p.b)}
        # partners it was slow with in the matrix last: that pair may be a slow link (a
        # real 1.4x link made its end a candidate, retested against the other end: slow)
        slow = {p.a if p.b == me else p.b for p in pairs if p.phase == "main"
                and me in (p.a, p.b) and p.status == "ok" and p.speed(suspect.metric)
                - judged.attribution.scores[suspect.metric].center
                <= limit(min_effect, suspect.metric)}
        order = sorted(good, key=lambda e, met=met, slow=slow: (e in slow, e in met))
        if order:
            orders.append([_ordered(me, order[(i + j) % len(order)]) for j in range(confirm)])
    # the j-th retest of every candidate before anybody's (j+1)-th: each round carries one
    # of each where it can, and a truncated batch still retests everybody
    first = max((p.round for p in pairs), default=-1) + 1
    candidate_links = {tuple(sorted(s.entities)) for s in judged.attribution.suspects
                       if s.kind == "link"}
    # A batch is at most confirm + 1 rounds: candidate links sharing an end cannot share a
    # round, and a busy 6-rank run had 22 retest rounds; what did not fit is still open, and
    # the next batch takes it first. A link's retests are recorded as phase ``link``
    # (Round.phase_of): no end counts them as its own.
    tests = [order[j % len(order)] for j in range(confirm) for order in orders + link_orders]
    retested = {tuple(sorted(order[0])) for order in link_orders}
    # a link's retest keeps a reference pair beside it (``schedule.pack``), so in a small
    # fleet fewer tests fit a round: its batch with candidate links may run twice the rounds
    cap = (confirm + 1) * (2 if link_orders and n <= SMALL_FLEET else 1)
    return pack(tests, good, "confirm", first, candidate_links, retested)[:cap]


def _switch_retests(suspect: Suspect, pairs: Sequence[PairResult], good: Sequence[int],
                    confirm: int) -> list[tuple[int, int]]:
    """``confirm`` pairs across a candidate switch's uplink: its entities in turn, each with a
    known-good entity of another leaf (every non-candidate is one: the leaf's own entities
    are candidates), going on from where earlier retests left off."""
    done = sum(1 for p in pairs if p.phase == "confirm" and _is_test_of(suspect, p))
    inside, outside = suspect.entities, [e for e in good if e not in suspect.entities]
    if not outside:
        return []
    return [_ordered(inside[(done + j) % len(inside)], outside[(done + j) % len(outside)])
            for j in range(confirm)]


def _ordered(a: int, b: int) -> tuple[int, int]:
    return (min(a, b), max(a, b))


def batches(n: int, follow_ups: int) -> int:
    """Retest batches at most: ``follow_ups``, one more up to SMALL_FLEET entities, where a
    candidate whose retests sit between half the line and the line is retested until it
    leaves that band or this cap (``settled``). A 1.4x link against a 30 % line is 0.07
    beyond it in log units, about one pair's noise on this VM: its retests' median fell
    short of the line and it was let go (``ok`` or ``transient``) in 10 of 200 synthetic
    6-rank fleets at 0.08 noise. A batch of a small fleet is a few rounds; at 512 nodes the
    fourth batch cost 3 rounds for every fleet at this VM's noise (23 to 26) and found
    nothing more."""
    return follow_ups + (1 if n <= SMALL_FLEET else 0)


def main_rounds(n: int, spec: LocateSpec, leaves: Sequence[str | None] = ()) -> list[Round]:
    """The main rounds of a run of ``n`` entities as ``spec`` asks (--rounds, --seed): the
    round robin, twice up to SMALL_FLEET entities, or quick's seeded rounds
    (``schedule.schedule``). The command (locate.callbacks), the simulator and the tests all
    take them from here."""
    return schedule(n, spec.rounds, spec.seed, leaves)


def next_batch(n: int, pairs: Sequence[PairResult], kind: str, spec: LocateSpec,
               leaves: Sequence[str | None] = (), judged: Judged | None = None) -> list[Round]:
    """The next batch of retests as ``spec`` asks (--confirm, --min-effect: drawn from the
    main matrix's noise where not given): ``next_rounds``."""
    return next_rounds(n, pairs, kind, spec.min_effect, spec.confirm, leaves, judged)


def decide(n: int, pairs: Sequence[PairResult], kind: str, spec: LocateSpec,
           names: Sequence[str] | None = None, leaves: Sequence[str | None] = ()) -> Judged:
    """The verdicts on the pairs measured, as ``spec`` asks: ``confirmation.judge``."""
    return judge(n, pairs, kind, spec.min_effect, names, spec.confirm, leaves)


def locate_offline(n: int, measure: Callable[[Sequence[Round]], list[PairResult]], kind: str,
                   spec: LocateSpec | None = None, names: Sequence[str] | None = None,
                   leaves: Sequence[str | None] = (), main: Sequence[Round] | None = None
                   ) -> tuple[list[PairResult], Judged]:
    """The whole decision as the ranks run it, with ``measure`` standing in for the ranks
    (synthetic fleets: the tests, locate.simulate, bench/): ``main_rounds`` (``main``: rounds
    already drawn from it, where the caller planted a fault on them), then up to
    ``batches(n, spec.follow_ups)`` of ``next_batch``, then ``decide``, with the command's
    defaults (``LocateSpec()``: the round robin twice up to 16 entities, the line drawn
    from the noise). The line is drawn from the main matrix once, as every later call of
    the ranks' side draws it again from the same main pairs."""
    spec = spec or LocateSpec()
    main = list(main) if main is not None else main_rounds(n, spec, leaves)
    pairs = list(measure(main))
    spec = replace(spec, min_effect=resolve(spec.min_effect, n, pairs, kind, leaves))
    judged = decide(n, pairs, kind, spec, names, leaves)
    for _ in range(batches(n, spec.follow_ups)):
        # the judgement of the pairs so far decides the next batch, then the verdicts
        more = next_batch(n, pairs, kind, spec, leaves, judged)
        if not more:
            break
        pairs += measure(more)
        judged = decide(n, pairs, kind, spec, names, leaves)
    return pairs, judged
