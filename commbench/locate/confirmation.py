"""locate's confirmation: candidates retested until their pooled evidence settles, then judged
(docs/commands/locate.md, "How it decides"). Pure, like the attribution: pairs in, verdicts
out (the retests' rounds: locate.retests); the rank side (locate.rank) and the fleet simulator
(locate.simulate) call the same functions.

Why pooled and sequential:

- one pass is one measurement a pair: on the busy 2-core VM a real 1.4x slow link read z -2
  in the matrix (never retested, "no suspect"), while a clean pair 1.15x slow in latency was
  slow again 3 times of 3 and named bad. Counting retests that are "slow again" has no notion
  of how far or how sure; pooling has: every measurement of a candidate (its pairs in the
  matrix with partners that are not candidates, then its retests) is a log residual from the
  fleet's normal pair of the same round, and their median, its interval and its z from the
  noise this run measured say how slow and how sure;
- a candidate is retested (known-good partners; a link: its own pair again) in batches of
  ``confirm`` until its evidence settles: bad (effect >= --min-effect and z beyond the
  run's ``bad_z``), clearly
  below --min-effect, or not reproduced, within ``follow_ups`` batches (the rank side's cap);
- the median, not the mean: a busy machine's pair noise has a heavy tail (one pair in ten or
  fifteen 1.1-1.3x slow in latency), and one such pair moved a mean of four past the line;
- a round's normal level is the median of its pairs between entities nobody suspects, kept
  only beyond two standard errors of that median (a median of 2-3 pairs is mostly their own
  noise), else the phase's; the confirmation rounds carry such reference pairs beside the
  retests, so a machine busier during the retests than during the matrix blames nobody;
- the noise is the larger of the attribution's pair noise and the plain spread of the pairs
  between non-candidates: the latter keeps the systematic differences between pairs (which
  ranks share a core), which repeating one pair cannot average away.

A switch (a leaf under --topology whose pairs across leaves are slow) is an entity made of its
leaf's entities: its measurements are its pairs across leaves with partners nobody suspects,
its retests pair its entities in turn with known-good entities of other leaves, and ``bad
switch`` is decided like any other verdict.

A link in a small fleet (up to 16 entities): its pair is read only twice in the matrix (the
round robin runs twice, ``schedule.schedule``), so a link is a candidate at half the line
(``attribution.link_screen``), and retests between half the line and the line go on up to one
more batch (``batches``). Its retests are recorded as
phase ``link`` and are no evidence about its ends; it is ``bad`` only while both ends are
normal with their other partners: an end cleared by its retests is; an end slowish in the
matrix, or with a second slow candidate link, is retested as a candidate itself and the link
waits for it; an end whose other pairs pool half the line slow is not (the 1.3x rank whose
pair was otherwise named a bad link).

Verdicts: no retest: ``inconclusive`` (no known-good partner); retests not slow (their median
less than the --min-effect): ``transient`` when the matrix had it beyond 3.5 z, else
``ok``; pooled effect below --min-effect: ``ok``, or ``slow`` (an entity) where its pooled z
is beyond ``slow_z``; pooled z beyond ``bad_z`` (3.5 raised for the candidate-metrics judged,
``z_limit``): ``bad <kind>``; else ``inconclusive``. Entities that were no candidate are
screened for ``slow`` on their measurements (``_screen``). ``ok`` candidates are no suspects
(entities.csv shows them as ok). The z, the line and their sources are returned with the
verdicts (``Judged.rule``), so that every text states what was applied.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np

from commbench.locate.attribution import (
    MAD_TO_SIGMA,
    MEDIAN_SE,
    METRICS,
    Z_LIMIT,
    Attribution,
    Effect,
    PairResult,
    Suspect,
    as_min_effect,
    attribute,
    limit,
    link_screen,
    links,
    median,
)
from commbench.locate.noise import (
    Line,
    _by_entity,
    _tested,
    _tests_of,
    resolve,
    round_levels,
    run_noise,
)
from commbench.locate.rule import Rule, _raised
from commbench.locate.schedule import SMALL_FLEET
from commbench.locate.verdict import GROUPS, PASSED, Verdict, is_bad

Z95 = 1.96
Z90 = 1.645  # two-sided 90 %, one-sided 95 %
FLEET_ALPHA = 0.001  # the chance a clean fleet may have of one false ``bad``, all candidates


def z_limit(candidates: int) -> float:
    """The pooled z a ``bad`` needs: 3.5, or more when so many candidates are judged that
    3.5 alone would name one of a clean fleet's (Bonferroni: each candidate's one-sided tail
    ``FLEET_ALPHA / candidates``; 3.5 up to 4 candidates, 4.4 at 160, 4.6 at 470). A 512 x 8
    fleet judged at gpu level, 470 candidates at a pair's noise of 0.25: 3.5 named a clean
    link bad (z -3.5) in 1 fleet of 2."""
    if candidates <= 1:
        return Z_LIMIT
    return max(Z_LIMIT, NormalDist().inv_cdf(1.0 - FLEET_ALPHA / candidates))


@dataclass(frozen=True)
class Evidence:
    """A candidate's measurements in the metric that flagged it: log speed residuals from the
    fleet's normal pair of the same round (< 0: slower), from the matrix and from retests."""

    main: tuple[float, ...]
    retests: tuple[float, ...]
    sigma: float  # one pair's noise (log units): the run's, or the candidate's own scatter
    run_sigma: float = math.nan  # the run's alone

    @property
    def count(self) -> int:
        return len(self.main) + len(self.retests)

    @property
    def effect(self) -> float:
        values = self.main + self.retests
        return median(values) if values else math.nan

    @property
    def error(self) -> float:
        return MEDIAN_SE * self.sigma / math.sqrt(max(self.count, 1))

    @property
    def z(self) -> float:
        return self.effect / self.error if self.count else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        return self.effect - Z95 * self.error, self.effect + Z95 * self.error

    def slow_again(self, slow: float) -> int:
        return sum(1 for r in self.retests if r <= slow)

    def reproduced(self, slow: float) -> bool:
        """Most retests are --min-effect slow again (their median is): half of it let a real
        rank slow on every other visit through on a retest 0.87x in the two metrics
        together (latency's noise; the delay was in busbw)."""
        middle = median(self.retests) if self.retests else math.nan
        return middle <= slow and middle < 0


@dataclass
class Judged:
    """The attribution, each candidate with its evidence and verdict, and which are open."""

    attribution: Attribution
    suspects: list[Suspect]
    evidence: dict[tuple[str, tuple[int, ...]], Evidence]
    open: list[Suspect]
    line: Line | None = None  # the --min-effect used: given, or drawn from the run's noise
    bad_z: float = Z_LIMIT  # the pooled z a bad needed (z_limit of ``candidates``)
    candidates: int = 0  # candidate-metrics judged
    slow_z: float = Z_LIMIT  # the pooled z a slow needed (z_limit of ``screened``)
    screened: int = 0  # candidate-metrics and every other entity's metrics
    # entities no candidate, yet beyond ``slow_z`` on their measurements: ``slow``
    slow: list[Suspect] = field(default_factory=list)
    # what the verdicts were taken against (``_judge``), kept for the screening after it
    context: dict = field(default_factory=dict, repr=False)

    @property
    def rule(self) -> Rule | None:
        """The rule these verdicts applied; None before a line was resolved."""
        if not isinstance(self.line, Line):
            return None
        return Rule(self.bad_z, self.candidates, self.line, self.slow_z, self.screened)


# ---- a candidate's evidence -----------------------------------------------------------------

def evidence_of(suspect: Suspect, attribution: Attribution, pairs: Sequence[PairResult],
                levels: dict[str, dict[int, float]], sigma: dict[str, float],
                index: dict[int, list[int]] | None = None,
                tested: tuple[set[int], set[tuple[int, int]]] | None = None) -> Evidence:
    """A candidate's residuals: an entity with partners that are not candidates (a pair runs
    at its slower end's speed), a link its own pair; failed pairs count as slow. ``index``:
    ``_by_entity(pairs)``, ``tested``: ``_tested(attribution)`` (the candidate entities and
    links), when the caller has them (a 512 x 8 fleet judged at gpu level has some 470
    candidates, and recomputing the set for each was a third of its decision time)."""
    metric = suspect.metric
    entities, tested_links = tested if tested is not None else _tested(attribution)
    main, retests = [], []
    for p in _tests_of(suspect, pairs, index if index is not None else _by_entity(pairs)):
        # an entity's partners that are candidates are no known-good partners, and a
        # candidate link's pairs (its retests: phase ``link``) are no test of its ends: slow
        # if the link is, they named a cleared end of a slow link bad
        if suspect.kind != "link" and (_partner(suspect, p) in entities or p.phase == "link"
                                       or (min(p.a, p.b), max(p.a, p.b)) in tested_links):
            continue
        value = p.speed(metric)
        if p.status in ("ok", "wrong") and not math.isfinite(value):
            continue
        # an entity is compared with every pair of its round but the other candidate
        # entities' (a busy 6-rank run had only candidate links beside its retests, and
        # the matrix's level then called a normal retest slow); a link with the pairs
        # nobody suspects (its own repeats would pull a shared level towards it)
        level = levels[metric if suspect.kind == "link" else f"{metric}:entity"]
        residual = value - level[p.round] if p.status == "ok" else -10.0
        (main if p.phase == "main" else retests).append(residual)
    own = main + retests
    noise = sigma[metric]
    if len(own) >= 4:
        # its own scatter, where it has enough measurements to show one: a candidate whose
        # measurements scatter more than the run's pairs do (a pair near a busy core) is as
        # sure as its scatter allows (a clean link at 0.15 pooled to z -3.9 on the run's
        # sigma, -2.2 on its own)
        middle = float(np.median(own))
        scatter = MAD_TO_SIGMA * float(np.median([abs(v - middle) for v in own]))
        noise = max(noise, scatter * math.sqrt(len(own) / (len(own) - 1)))
    return Evidence(tuple(main), tuple(retests), noise, sigma[metric])


def _partner(suspect: Suspect, p: PairResult) -> int:
    """The end of a candidate's pair that is not the candidate (a switch: not behind it)."""
    return p.b if p.a in suspect.entities[:None if suspect.kind == "switch" else 1] else p.a


# ---- the decision -----------------------------------------------------------------------------

def verdict(suspect: Suspect, found: Evidence, min_effect: Effect, confirm: int = 3,
            bad_z: float = Z_LIMIT, slow_z: float | None = None) -> Verdict:
    """``bad_z``: the pooled z a ``bad`` needs (``z_limit`` of the run's candidates);
    ``slow_z``: the pooled z an entity under the line needs to be ``slow`` (None: no such
    verdict, it is ``ok``)."""
    slow = limit(min_effect, suspect.metric)
    if not found.retests:
        return Verdict.INCONCLUSIVE
    if not found.reproduced(slow):
        strong = suspect.z <= -Z_LIMIT and found.main and float(np.median(found.main)) <= slow
        return Verdict.TRANSIENT if strong else Verdict.OK
    if found.effect > slow or found.effect >= 0:
        # under the line: ok, unless far beyond the noise (a rank 3 ms slower per call read
        # 0.71-0.75x busbw at z -12 on a busy machine, under a 30 % line: "no suspect")
        if (slow_z is not None and suspect.kind not in GROUPS and found.effect < 0
                and found.z <= -slow_z and len(found.retests) >= min(confirm, 3)):
            return Verdict.SLOW
        return Verdict.OK
    if found.z <= -bad_z and len(found.retests) >= min(confirm, 3):
        return Verdict.bad(suspect.kind)
    return Verdict.INCONCLUSIVE


def settled(suspect: Suspect, found: Evidence, min_effect: Effect, confirm: int,
            bad_z: float = Z_LIMIT, patient: bool = False) -> bool:
    """No more retests needed: at least ``confirm`` retests, and either not reproduced (more
    would not make it reproduce), or bad with its interval clear of the --min-effect line, or
    its interval wholly faster than that line."""
    slow = limit(min_effect, suspect.metric)
    if len(found.retests) < confirm:
        return False
    if not found.reproduced(slow):
        # did not reproduce: more retests of a flaky entity would only catch it on its slow
        # visits (a rank slow on every other visit was retested into "bad" on a real run).
        # Unless the retests sat between half the line and the line: then three were too
        # few to tell (at 0.25 a pair's noise, a 1.5x GPU's median of 3 retests missed the
        # 30 % line in 1 fleet of 4), and one more batch of them decides; in a small fleet
        # (``patient``) more batches, up to the cap (``batches``), until they leave that band.
        middle = median(found.retests)
        return middle > slow / 2 or (not patient and len(found.retests) >= 2 * confirm)
    low, high = found.interval
    if found.effect > slow:  # below --min-effect: settled once the interval is, too
        return low > slow
    return found.z <= -bad_z and high < slow  # bad, and beyond the line whatever the noise


def judge(n: int, pairs: Sequence[PairResult], kind: str, min_effect: Effect | None,
          names: Sequence[str] | None = None, confirm: int = 3,
          leaves: Sequence[str | None] = ()) -> Judged:
    """Every candidate of the matrix with its pooled evidence, verdict and words
    (``leaves``: each entity's leaf under --topology, for switches; ``min_effect`` None:
    the line drawn from this run's noise, locate.noise)."""
    names = list(names) if names is not None else [str(e) for e in range(n)]
    min_effect = resolve(min_effect, n, pairs, kind, leaves)
    attribution = attribute(n, pairs, kind, min_effect, leaves=leaves)
    judged = _judge(n, attribution, pairs, min_effect, names, confirm)
    # An entity cleared by its retests is normal after all: a pair of it slow in the matrix
    # (a slow link can make one of its ends look slow) is now a link candidate.
    # (ok only: a transient was far out in the matrix and normal on retest, flaky, and its
    # slow pairs are its flakiness; naming one a link retested it into "bad" on a real run)
    cleared = {s.entities[0] for s in judged.suspects if s.kind not in GROUPS
               and s.verdict == "ok" and s not in judged.open}
    if cleared:
        entities, known = _tested(attribution)
        main = [p for p in pairs if p.phase == "main"]
        # ...judged against a normal end: the matrix's score of a cleared end (slow with
        # the link and two noisy partners, 0.75x) explained the link away
        more = [s for s in links(main, attribution.scores, entities - cleared, min_effect,
                                 link_screen(n), frozenset(cleared))
                if tuple(sorted(s.entities)) not in known]
        # ...its slowest pair only: what made it a candidate is one slow link, or noise (a
        # real 6-rank run's end was slow with the link and two noisy partners, 0.75x);
        # every slow pair of it sharing one end could not share a retest round, and a
        # batch's 4 rounds gave each one retest
        slowest: dict[int, Suspect] = {}
        for link in more:
            for e in link.entities:
                if e in cleared and (e not in slowest or link.z < slowest[e].z):
                    slowest[e] = link
        more = [s for s in more if all(slowest[e] is s for e in s.entities if e in cleared)]
        if more:
            attribution.suspects += more
            judged = _judge(n, attribution, pairs, min_effect, names, confirm)
    # A link slow again on its retests whose end the matrix calls slowish (half the line,
    # 2.5 z: not a candidate, yet not normal) cannot be told from that end without
    # retesting the end against known-good partners: it becomes a candidate too.
    doubtful = _doubtful_ends(judged, min_effect)
    if doubtful:
        scores = attribution.scores
        for e, (metric, *also) in sorted(doubtful.items()):
            attribution.suspects.append(Suspect(
                kind, (e,), metric, math.exp(scores["busbw"].score.get(e, 0.0)),
                math.exp(-scores["lat"].score.get(e, 0.0)),
                scores[metric].slow_with.get(e, (0, 0)), scores[metric].z.get(e, 0.0),
                also=tuple(also)))
        judged = _judge(n, attribution, pairs, min_effect, names, confirm)
    judged.line = min_effect
    judged.slow = _screen(n, judged, kind, min_effect, names)
    return judged


def _screen(n: int, judged: Judged, kind: str, min_effect: Effect,
            names: Sequence[str]) -> list[Suspect]:
    """Entities that were no candidate (under the line in the matrix) yet whose measurements
    with partners nobody suspects lie beyond ``slow_z``, in any metric: ``slow``, listed
    with their evidence, never ``bad`` (no retest confirmed them, and they are under the
    line). A link's pairs are no evidence about its ends (``evidence_of``)."""
    attribution, context = judged.attribution, judged.context
    if not context:
        return []
    candidates = {s.entities[0] for s in attribution.suspects if s.kind not in GROUPS}
    candidates |= attribution.candidates
    found = []
    for e in range(n):
        if e in candidates:
            continue
        for metric in sorted(METRICS, key=lambda m: attribution.scores[m].z.get(e, 0.0)):
            there = Suspect(kind, (e,), metric, _ratio_of(attribution, "busbw", e),
                            _ratio_of(attribution, "lat", e),
                            attribution.scores[metric].slow_with.get(e, (0, 0)),
                            attribution.scores[metric].z.get(e, 0.0))
            evidence = evidence_of(there, attribution, context["pairs"], context["levels"],
                                   context["sigma"], context["index"], context["tested"])
            if not (evidence.count >= 3 and evidence.effect < 0
                    and evidence.z <= -judged.slow_z):
                continue
            there.effect, there.interval = evidence.effect, evidence.interval
            there.measurements, there.pooled_z = evidence.count, evidence.z
            there.confirmed = (evidence.slow_again(limit(min_effect, metric)),
                               len(evidence.retests))
            _pooled_ratios(there)
            there.verdict = Verdict.SLOW
            there.evidence = words(there, evidence, names, min_effect, judged.bad_z,
                                   judged.candidates, judged.slow_z, judged.screened)
            found.append(there)
            break
    return found


def _ratio_of(attribution: Attribution, metric: str, e: int) -> float:
    value = attribution.scores[metric].score.get(e, 0.0)
    return math.exp(value) if metric == "busbw" else math.exp(-value)


def _doubtful_ends(judged: Judged, min_effect: Effect) -> dict[int, tuple[str, ...]]:
    """Ends, not candidates, of links slow again on their retests that may be the slow
    one, each with the metrics to judge it in (the furthest out first): the matrix calls it
    half the --min-effect slow at 2.5 z (``_ends_normal``), or another candidate link of it
    pooled half the --min-effect slow too (a 1.3x rank just short of the line had two of its pairs
    retested as links, both slow: one named bad)."""
    attribution = judged.attribution
    candidates = attribution.candidates

    def reproduced(suspect: Suspect) -> bool:
        found = judged.evidence.get((suspect.kind, suspect.entities))
        return (found is not None and bool(found.retests)
                and found.reproduced(limit(min_effect, suspect.metric)))

    slowish: dict[int, list[Suspect]] = {}
    for suspect in judged.suspects:
        found = judged.evidence.get((suspect.kind, suspect.entities))
        if (suspect.kind == "link" and found is not None and found.count
                and found.effect <= limit(min_effect, suspect.metric) / 2):
            for e in suspect.entities:
                slowish.setdefault(e, []).append(suspect)
    out: dict[int, tuple[str, ...]] = {}
    for suspect in judged.suspects:
        if suspect.kind != "link" or not reproduced(suspect):
            continue
        for e in suspect.entities:
            if e in candidates:
                continue
            slow = [m for m, scores in attribution.scores.items()
                    if scores.score.get(e, 0.0) <= limit(min_effect, m) / 2
                    and scores.z.get(e, 0.0) <= -2.5]
            if slow:
                out[e] = tuple(sorted(slow, key=lambda m: attribution.scores[m].z.get(e, 0.0)))
            elif len(slowish.get(e, ())) >= 2:
                out[e] = (suspect.metric,)
    return out


def _judge(n: int, attribution: Attribution, pairs: Sequence[PairResult], min_effect: Effect,
           names: list[str], confirm: int) -> Judged:
    entities, tested_links = _tested(attribution)
    sigma = {m: run_noise(attribution, pairs, m, slow_side=True) for m in attribution.scores}
    levels = {m: round_levels(pairs, m, entities, tested_links, sigma[m])
              for m in attribution.scores}
    levels.update({f"{m}:entity": round_levels(pairs, m, entities, set(), sigma[m])
                   for m in attribution.scores})
    found, still_open = {}, []
    index = _by_entity(pairs)
    # every metric a candidate is judged in is one more chance for a clean fleet
    candidates = sum(1 + len(s.also) for s in attribution.suspects)
    bad_z = z_limit(candidates)
    # a slow: any candidate-metric, or any metric of any other entity (``_screen``)
    others = n - len({s.entities[0] for s in attribution.suspects if s.kind not in GROUPS}
                     | attribution.candidates)
    screened = candidates + max(0, others) * len(attribution.scores)
    slow_z = z_limit(screened)
    for suspect in attribution.suspects:
        # judged in every metric it was a candidate in, named in the first that names it
        # (the furthest out first); the others must settle too before its retests stop
        judged_in = []
        for metric in (suspect.metric, *suspect.also):
            there = replace(suspect, metric=metric)
            judged_in.append((there, evidence_of(there, attribution, pairs, levels, sigma,
                                                 index, (entities, tested_links))))
        first = next((i for i, (there, found_there) in enumerate(judged_in)
                      if is_bad(verdict(there, found_there, min_effect, confirm,
                                        bad_z))), None)
        if first is None:  # named slow in none but one: judged there (else the first)
            first = next((i for i, (there, found_there) in enumerate(judged_in)
                          if verdict(there, found_there, min_effect, confirm, bad_z, slow_z)
                          == Verdict.SLOW), 0)
        metrics = [there.metric for there, _ in judged_in]
        suspect.metric = metrics.pop(first)
        suspect.also = tuple(metrics)
        evidence = judged_in[first][1]
        found[(suspect.kind, suspect.entities)] = evidence
        slow = limit(min_effect, suspect.metric)
        suspect.confirmed = (evidence.slow_again(slow), len(evidence.retests))
        suspect.effect, suspect.interval = evidence.effect, evidence.interval
        suspect.measurements, suspect.pooled_z = evidence.count, evidence.z
        _pooled_ratios(suspect)
        suspect.verdict = verdict(suspect, evidence, min_effect, confirm, bad_z, slow_z)
        suspect.evidence = words(suspect, evidence, names, min_effect, bad_z, candidates,
                                 slow_z, screened)
        if n >= 3 and not all(settled(there, found_there, min_effect, confirm, bad_z,
                                      n <= SMALL_FLEET) for there, found_there in judged_in):
            still_open.append(suspect)
    # A link's ends, once every entity has its verdict (an end retested as a candidate comes
    # after its link). An end still open waits for its retests unless its pooled evidence
    # already looks normal (not even half the line slow): a real end retested 2 times, 2
    # slow, pooled 1.36x fast, and its 0.53x link waited to the end as inconclusive.
    waiting = {s.entities[0] for s in still_open if s.kind not in GROUPS
               and not _looks_normal(found[(s.kind, s.entities)], s, min_effect)}
    for suspect in attribution.suspects:
        if (suspect.verdict == Verdict.BAD_LINK
                and not _ends_normal(suspect, attribution, min_effect)):
            # an end half the --min-effect slow with its other partners is a slow entity
            # the matrix missed (at 0.1 noise, 1 of 30 fleets named its pair a bad link)
            _withhold(suspect, "but an end is slow with its other partners in the matrix")
        ends = [e for e in suspect.entities if e in waiting]
        if suspect.verdict == Verdict.BAD_LINK and ends:
            # an end retested as a candidate itself: its retests decide first
            _withhold(suspect, f"but {names[ends[0]]} is a candidate too, not settled")
        if suspect.verdict == Verdict.BAD_LINK:
            _unless_an_end_is_slow(suspect, attribution, min_effect, names,
                                   lambda end: evidence_of(end, attribution, pairs, levels,
                                                           sigma, index,
                                                           (entities, tested_links)))
    return Judged(attribution, attribution.suspects, found, still_open, bad_z=bad_z,
                  candidates=candidates, slow_z=slow_z, screened=screened,
                  context={"pairs": pairs, "levels": levels, "sigma": sigma, "index": index,
                           "tested": (entities, tested_links)})


def _unless_an_end_is_slow(suspect: Suspect, attribution: Attribution, min_effect: Effect,
                           names: list[str], evidence: Callable[[Suspect], Evidence]) -> None:
    """A bad link whose end is slow with its other partners too is no bad link: the end may
    be all there is (a 1.3x rank read 1.17x in the matrix, no candidate; its pair with a
    noisy partner was one at half the line, slow again on every retest, and was named a
    bad link). Slow: an end named bad, or its pairs but the candidate links' (the matrix's
    and the retest rounds', partners nobody suspects) pooled half the --min-effect slow and
    1.64 z out (one-sided 95 %: this only withholds a ``bad``, so it asks less than one;
    that rank's 3 other pairs pooled 0.87x, z -1.85)."""
    slow = []
    for e in suspect.entities:
        mine = next((s for s in attribution.suspects if s.kind not in GROUPS
                     and s.entities == (e,)), None)
        if mine is not None and is_bad(mine.verdict):
            slow.append(e)
            continue
        found = evidence(Suspect("gpu", (e,), suspect.metric, math.nan, math.nan))
        if (found.count and found.effect <= limit(min_effect, suspect.metric) / 2
                and found.z <= -Z90):
            slow.append(e)
    if slow:
        _withhold(suspect, f"but {names[slow[0]]} is slow with its other partners too")


def _looks_normal(found: Evidence, suspect: Suspect, min_effect: Effect) -> bool:
    """Its pooled evidence not even half the --min-effect slow."""
    return found.count > 0 and found.effect > limit(min_effect, suspect.metric) / 2


def _withhold(link: Suspect, why: str) -> None:
    """A link that would be bad, not named: its evidence says why instead of 'both ends
    normal'."""
    link.verdict = Verdict.INCONCLUSIVE
    link.evidence = link.evidence.replace("both ends normal with their other partners", why)


def _ends_normal(suspect: Suspect, attribution: Attribution, min_effect: Effect) -> bool:
    """Neither end is half the --min-effect slow with its partners AND 2.5 z out, in any
    metric (on the busy VM a real slow link's end read 0.9x, z -0.7: normal; a 1.3x rank
    read z -2.3 in busbw and -5.0 in both). An end that was a candidate and was cleared by
    its retests is normal whatever the matrix said: its retests say more."""
    cleared = {s.entities[0] for s in attribution.suspects
               if s.kind not in GROUPS and s.verdict in PASSED}
    return not any(scores.score.get(e, 0.0) <= limit(min_effect, metric) / 2
                   and scores.z.get(e, 0.0) <= -2.5
                   for metric, scores in attribution.scores.items()
                   for e in suspect.entities if e not in cleared)


def _pooled_ratios(suspect: Suspect) -> None:
    """The flagging metric's ratio becomes the pooled one (the other stays the matrix's)."""
    if not math.isfinite(suspect.effect):
        return
    if suspect.metric == "busbw":
        suspect.busbw_ratio = math.exp(suspect.effect)
    elif suspect.metric == "lat":
        suspect.lat_ratio = math.exp(-suspect.effect)


# ---- words ------------------------------------------------------------------------------------

def words(suspect: Suspect, found: Evidence, names: Sequence[str],
          min_effect: Effect | None = None, bad_z: float = Z_LIMIT, candidates: int = 0,
          slow_z: float | None = None, screened: int = 0) -> str:
    """'rank 1 - rank 3: 0.68x [0.61-0.74] the fleet median busbw over 4 exchanges (1 in the
    matrix, 3 retests, slow again 3/3), z -4.2 (bad needs 3.9: 3.5 raised for 20
    candidate-metrics), both ends normal with their other partners; min effect 12% (noise)'
    : the z and the line it was judged against, in its metric, and where each came from
    (a ``slow`` entity: the z a slow needed)."""
    who = (f"switch {suspect.name}" if suspect.kind == "switch"
           else " - ".join(names[e] for e in suspect.entities))
    if not found.count:
        return f"{who}: not measured against a known-good partner"
    low, high = found.interval
    if suspect.metric == "lat":
        what = (f"{math.exp(-found.effect):.2f}x [{math.exp(-high):.2f}-{math.exp(-low):.2f}] "
                "the fleet median latency")
    else:
        metric = "busbw" if suspect.metric == "busbw" else "speed (busbw and latency together)"
        what = (f"{math.exp(found.effect):.2f}x [{math.exp(low):.2f}-{math.exp(high):.2f}] the "
                f"fleet median {metric}")
    retests = len(found.retests)
    done = (f"{retests} retests, slow again {suspect.confirmed[0]}/{retests}" if retests
            else "not retested (under the line in the matrix: no candidate)"
            if suspect.verdict == Verdict.SLOW else "not retested (no known-good partner)")
    text = (f"{who}: {what} over {found.count} exchanges ({len(found.main)} in the matrix, "
            f"{done}), z {found.z:.1f}")
    if suspect.verdict == Verdict.SLOW and slow_z is not None:
        text += f" (slow needs {slow_z:.1f}: {_raised(slow_z, screened, 'entity-metric')})"
    else:
        text += f" (bad needs {bad_z:.1f}: {_raised(bad_z, candidates, 'candidate-metric')})"
    if suspect.kind == "link":
        text += ", both ends normal with their other partners"
    if suspect.kind == "switch":
        text += (f", across leaves; its {len(suspect.entities)} entities normal with each "
                 "other inside the leaf (its uplink)")
    if min_effect is not None:
        source = (min_effect.source(suspect.metric) if isinstance(min_effect, Line)
                  else "given")
        text += f"; min effect {as_min_effect(min_effect).of(suspect.metric):.0%} ({source})"
    return text
