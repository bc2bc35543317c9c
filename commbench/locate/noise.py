"""The noise this locate run measured, and the --min-effect line drawn from it
(docs/commands/locate.md, "The min-effect line"). Pure, like the attribution: pairs in,
levels, a sigma and a line out.

- a round's normal level and one pair's noise (``round_levels``, ``run_noise``): what the
  confirmation compares a candidate with, and how sure its pooled effect is;
- the line (``resolve``): without --min-effect, a candidate is at least ``K`` x this
  run's pair noise slower (per metric, from the main matrix), never less than ``FLOOR`` nor
  more than ``CAP``. One fixed line suits no fleet: the old 30 % was what the busy 2-core VM
  needed (its pairs differ by 20-30 % systematically), and on a quiet cluster (noise 0.05) it
  kept a 1.3x fault (0.77x) from ever being a candidate. The numbers, from the fleet
  simulator (locate.simulate, bench/locate_sim.py; docs/project/accuracy.md, "locate"):

  * ``K`` = 4: the line is a candidate gate, the pooled z (3.5) decides. A quiet cluster's
    fleet (0.05 a rank pair) measures about 0.03 (a node pair is the slowest of its 8 rank
    pairs), a line of about 13 %: a 1.3x GPU fault read 0.81x at node level, a 1.3x node or
    link 0.76-0.77x (23 % and 30 % slower), all well outside it. At K = 3 (the line then on
    the 10 % floor) 6 clean 512-node quick fleets all had candidates (2,816 pairs x 2
    metrics, some beyond 3 sigma by chance) and took 19 rounds, 8 of them retests, against
    the issue's 20; at 4, 200 such fleets took 14 (median; at most 19);
  * ``FLOOR`` = 10 %: below it a difference is more likely a systematic one (a slower PCIe
    slot, a node's clock) than a fault, and repeating a pair cannot average that away; it
    must stay well below the 23 % a 1.3x GPU reads;
  * ``CAP`` = 30 %: the fixed line of before, what the 2-core VM's systematic spread needs
    (docs/project/accuracy.md): a noisier run does not make a 30 %-slow entity normal.

The line is computed from the main matrix only, which every later call sees unchanged, so
rank 0's retest decisions, its verdict and the files written afterwards all use one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commbench.locate.attribution import (
    MAD_TO_SIGMA,
    MEDIAN_SE,
    SCALE_FLOOR,
    Attribution,
    Effect,
    PairResult,
    Suspect,
    attribute,
    median,
    normal_spread,
)
from commbench.specs.locate import MinEffect

# A round's level moves by what lies beyond two standard errors of its clean pairs' median:
# at one, the 1-2 reference pairs of a retest round added their own noise to every retest
# (clean synthetic links at 0.15 pooled to 0.82x over 10 exchanges)
LEVEL_SHRINK = 2 * MEDIAN_SE
K = 4.0  # the line in this run's pair noise (module docstring: why 4)
FLOOR = 0.10  # never below: a systematic 10 % is no fault
CAP = 0.30  # never above: the fixed line of before (the VM's systematic spread)
LINE_METRICS = ("busbw", "lat")
# Fewer normal pairs than this in the main matrix and the noise is not read at all: the line
# is CAP. A MAD's sigma from n values is off by about 1.67/sqrt(n) of itself (37 % at 20), and
# the line multiplies it by K: 4 torchrun agents (6 pairs, 3 normal) read a latency noise of
# 0.01 on this VM, whose pairs differ by 15-25 %, and a normal node at 1.11x was retested 9
# times into "inconclusive".
MIN_NOISE_PAIRS = 20
# a verdict's noise reads the slow side's tail from this many measurements on (its 2.3 %
# point is then some 9 of them: a 6-rank run's 15 pairs never do)
SLOW_TAIL_MEASUREMENTS = 400
SLOW_TAIL = 0.02275  # the normal's 2-sigma point


@dataclass(frozen=True)
class Line(MinEffect):
    """The --min-effect a run used, per metric: given (``how`` "given"), or drawn from its
    noise (``how`` "noise", or "floor" / "cap" where the rule clamped it; ``sigma``: the
    pair noise it came from, log units)."""

    sigma_busbw: float = math.nan
    sigma_lat: float = math.nan
    how_busbw: str = "given"
    how_lat: str = "given"

    def words(self) -> str:
        """'busbw 14% (4.0 x measured noise 0.034), lat 10% (floor; measured noise 0.012)';
        a line wholly given: as --min-effect says it, '(--min-effect)' added."""
        if self.how_busbw == self.how_lat == "given":
            return f"{MinEffect.words(self)} (--min-effect)"
        return ", ".join(self._metric_words(m) for m in LINE_METRICS)

    def source(self, metric: str) -> str:
        """Where ``metric``'s share came from: given, noise, floor or cap (``both``: the
        smaller share's, as ``of`` takes it)."""
        if metric == "both":
            metric = "busbw" if self.busbw <= self.lat else "lat"
        return getattr(self, f"how_{metric}")

    def short(self) -> str:
        """The shares alone: '12%', or '14% (busbw) / 10% (latency)'."""
        return MinEffect.words(self)

    def _metric_words(self, metric: str) -> str:
        share, how, sigma = (getattr(self, metric), getattr(self, f"how_{metric}"),
                             getattr(self, f"sigma_{metric}"))
        if how == "given":
            return f"{metric} {share:.0%} (--min-effect)"
        if how == "noise":
            return f"{metric} {share:.0%} ({K:.1f} x measured noise {sigma:.3f})"
        if not math.isfinite(sigma):
            return (f"{metric} {share:.0%} ({how}; fewer than {MIN_NOISE_PAIRS} normal pairs to "
                    "measure the noise)")
        return f"{metric} {share:.0%} ({how}; measured noise {sigma:.3f})"

    def as_dict(self) -> dict:
        """For run.json and --json: each metric's share, where it came from and the noise;
        the rule's numbers."""
        def number(value: float) -> float | None:
            return round(value, 5) if math.isfinite(value) else None

        return {**{m: {"share": round(getattr(self, m), 4), "how": getattr(self, f"how_{m}"),
                       "sigma": number(getattr(self, f"sigma_{m}"))} for m in LINE_METRICS},
                "rule": {"k": K, "floor": FLOOR, "cap": CAP}}


def line_from(sigma: dict[str, float], given: MinEffect | None = None) -> Line:
    """The rule: per metric, K x sigma as a share slower (log units: exp(K sigma) - 1), kept
    within [FLOOR, CAP]; a metric ``given`` keeps its share."""
    shares, how = {}, {}
    for metric in LINE_METRICS:
        share = getattr(given, metric) if given is not None else None
        if share is not None:
            shares[metric], how[metric] = share, "given"
            continue
        share = math.expm1(K * sigma[metric])
        if not math.isfinite(share):  # too few normal pairs to read the noise (run_sigma)
            shares[metric], how[metric] = CAP, "cap"
            continue
        how[metric] = "floor" if share < FLOOR else "cap" if share > CAP else "noise"
        shares[metric] = min(max(share, FLOOR), CAP)
    return Line(shares["busbw"], shares["lat"], sigma.get("busbw", math.nan),
                sigma.get("lat", math.nan), how["busbw"], how["lat"])


def run_sigma(n: int, pairs: Sequence[PairResult], kind: str = "gpu",
              leaves: Sequence[str | None] = ()) -> dict[str, float]:
    """This run's pair noise per metric, from its main matrix: ``run_noise`` about each
    round's level, the entities (and switches) the FLOOR line makes candidates left out:
    the noise must not depend on the line it is to draw, and must not count a fault as
    noise (with the CAP line, a 1.3x uplink of one leaf of four was no candidate, its
    pairs across, 40 % of a 16-node matrix, read as noise, and the line rose to the cap:
    1 of 50 such fleets named the switch; with the FLOOR line, 50 of 50). Where the FLOOR
    line suspects most of the fleet, too few pairs are left to read a noise from (12 nodes
    under 3 leaves, one uplink 1.5x: each leaf a candidate, busbw read 0.23 from the leaves'
    own mixed pairs), and the CAP line's candidates are left out instead."""
    main = [p for p in pairs if p.phase == "main"]
    provisional = attribute(n, main, kind, FLOOR, leaves=leaves)
    if 2 * len(provisional.candidates) > n:
        provisional = attribute(n, main, kind, CAP, leaves=leaves)
    entities, _ = _tested(provisional)
    # distinct pairs: a small fleet's matrix reads each pair twice, and a pair's systematic
    # difference (which ranks share a core) is in both of its readings
    normal = len({(p.a, p.b) for p in main if p.status == "ok" and p.a not in entities
                  and p.b not in entities})
    if normal < MIN_NOISE_PAIRS:  # too few to read a noise from: the line is CAP
        return {m: math.nan for m in LINE_METRICS}
    return {m: run_noise(provisional, main, m) for m in LINE_METRICS}


def resolve(min_effect: Effect | None, n: int, pairs: Sequence[PairResult], kind: str,
            leaves: Sequence[str | None] = ()) -> Line:
    """The line a decision uses: --min-effect where given (it wins, per metric), the rest
    drawn from the main matrix's noise (``run_sigma``, ``line_from``)."""
    if isinstance(min_effect, Line):
        return min_effect
    if min_effect is not None and not isinstance(min_effect, MinEffect):
        min_effect = MinEffect(min_effect, min_effect)
    if min_effect is not None and min_effect.busbw is not None and min_effect.lat is not None:
        return Line(min_effect.busbw, min_effect.lat)
    return line_from(run_sigma(n, pairs, kind, leaves), min_effect)


# ---- the levels a pair is compared with -------------------------------------------------------

def _tested(attribution: Attribution) -> tuple[set[int], set[tuple[int, int]]]:
    entities = attribution.candidates
    links = {tuple(sorted(s.entities)) for s in attribution.suspects if s.kind == "link"}
    return entities, links


def _clean(p: PairResult, entities: set[int], links: set[tuple[int, int]]) -> bool:
    return (p.status == "ok" and p.a not in entities and p.b not in entities
            and (min(p.a, p.b), max(p.a, p.b)) not in links)


def retest_phase(phase: str) -> str:
    """main, or confirm for every retest round (an entity's, ``link``: a link's)."""
    return "main" if phase == "main" else "confirm"


def round_levels(pairs: Sequence[PairResult], metric: str, entities: set[int],
                 links: set[tuple[int, int]], sigma: float) -> dict[int, float]:
    """Each round's normal pair (log speed): its clean pairs' median, kept only beyond one
    standard error of it from the phase's level (the median of the phase's clean pairs, the
    confirmation phase's kept only beyond their noise from the matrix's; without any, the
    matrix's)."""
    clean = [p for p in pairs if _clean(p, entities, links) and math.isfinite(p.speed(metric))]
    matrix = [p.speed(metric) for p in clean if p.phase == "main"]
    retests = [p.speed(metric) for p in clean if p.phase != "main"]
    if not matrix:
        # every pair of the matrix has a candidate end (a 5 % line on 12 ranks made a
        # cascade of candidates): the matrix's median pair, not 0, the level of a log
        # speed, which read every clean link 50x slow in latency
        matrix = [p.speed(metric) for p in pairs if p.phase == "main" and p.status == "ok"
                  and math.isfinite(p.speed(metric))]
    fallback = float(np.median(matrix)) if matrix else 0.0
    # the retest phase's own level only beyond its few pairs' noise: its rounds without a
    # reference pair all take it, so its error is every such retest's at once (a 6-rank run
    # whose every rank ended a candidate link had 3 clean retest pairs, one 0.4 fast, and a
    # clean link read 1.39x slow four times of four against them)
    phase_level = {"main": fallback,
                   "confirm": round_levels_of(retests, fallback, sigma) if retests else fallback}
    levels: dict = {("phase", phase): level for phase, level in phase_level.items()}
    phases: dict[int, str] = {}
    for p in pairs:
        phases.setdefault(p.round, retest_phase(p.phase))
    by_round: dict[int, list[float]] = {}
    for p in clean:
        by_round.setdefault(p.round, []).append(p.speed(metric))
    for index in sorted(phases):
        phase = phases[index]
        inside = by_round.get(index, [])
        if phase == "confirm" and inside:
            # a retest is compared with the reference pairs beside it, whole: on the busy VM
            # a retest round ran 0.8x the others, its 2 references said so, and shrinking
            # that towards the phase's level (their noise being as large) called a normal
            # retest slow and a flaky rank bad; their noise is in the candidate's scatter
            levels[index] = median(inside)
        else:
            levels[index] = round_levels_of(inside, phase_level.get(phase, fallback), sigma)
    return levels


def _medians_without_each(values: np.ndarray) -> np.ndarray:
    """The median of ``values`` without element i, for every i (sorted once: O(n log n))."""
    order = np.argsort(values)
    ranked = values[order]
    n = len(values)
    position = np.empty(n, dtype=int)
    position[order] = np.arange(n)
    rest = n - 1

    def at(j):  # the j-th of the remaining n - 1, for each removed position
        return np.where(position > j, ranked[j], ranked[np.minimum(j + 1, n - 1)])

    if rest % 2:
        return at(rest // 2)
    return (at(rest // 2 - 1) + at(rest // 2)) / 2


def round_levels_of(inside: Sequence[float], base: float, sigma: float) -> float:
    """A round's level from its clean pairs: their median where it lies beyond two standard
    errors of it from ``base`` (the part within is taken for their noise), else ``base``."""
    if not len(inside):
        return base
    offset = median(inside) - base
    by = LEVEL_SHRINK * sigma / math.sqrt(len(inside))
    return base + math.copysign(max(0.0, abs(offset) - by), offset)


def run_noise(attribution: Attribution, pairs: Sequence[PairResult], metric: str,
              slow_side: bool = False) -> float:
    """One pair's noise in this run (robust sigma, log units), from every measurement it
    has: the pairs between non-candidates about their round's level (the matrix's and the
    retest rounds' reference pairs) and each candidate's measurements about their own
    median. The fit's pair_noise of a 15-pair matrix alone read 0.06 to 0.24 on synthetic
    fleets drawn at 0.1; every pair the run measured pins it down as the retests add up.

    ``slow_side`` (the noise a verdict's z is taken against): where the run has enough
    measurements to show its slow tail (SLOW_TAIL_MEASUREMENTS), the larger of the MAD's
    sigma and half the distance from the median to the slow side's 2-sigma point. A node
    meeting runs at its slowest of 8 rank pairs, whose spread leans to the slow side (at
    0.25 a rank pair: 0.172 there, 0.149 from the MAD), and against the MAD a clean link's
    repeats read z -4.5 in 1 of 10 simulated 512-node fleets."""
    entities, links = _tested(attribution)
    first = max(normal_spread(attribution.scores[metric], pairs, entities), SCALE_FLOOR)
    levels = round_levels(pairs, metric, entities, links, first)
    # Candidate links stay in the matrix's share: they are its slowest pairs (no z gates
    # them), and leaving them out cut the noise's tail (clean fleets drawn at 0.15 read
    # 0.07); the MAD shrugs off the few truly slow ones. Their retests count about their own
    # median (below), or a real slow link's repeats would read as noise.
    clean = [p for p in pairs if _clean(p, entities, set() if p.phase == "main" else links)
             and math.isfinite(p.speed(metric))]
    spread = []
    by_round: dict[int, list[PairResult]] = {}
    for p in clean:
        by_round.setdefault(p.round, []).append(p)
    for members in by_round.values():
        values = np.array([p.speed(metric) for p in members])
        # each pair's round level without the pair itself: with it, a round of 2 reference
        # pairs fits half of their noise away (clean synthetic fleets at 0.15 read 0.12)
        base = levels[("phase", retest_phase(members[0].phase))]
        if len(values) == 1:
            spread.append(float(values[0]) - base)
            continue
        offset = _medians_without_each(values) - base
        by = LEVEL_SHRINK * first / math.sqrt(len(values) - 1)
        level = base + np.sign(offset) * np.maximum(0.0, np.abs(offset) - by)
        spread += list(values - level)
    index = _by_entity(pairs)
    for suspect in attribution.suspects:
        if suspect.metric != metric:
            continue
        own = [p.speed(metric) for p in _tests_of(suspect, pairs, index) if p.status == "ok"
               and math.isfinite(p.speed(metric))]
        if len(own) >= 3:
            middle = float(np.median(own))
            # about their own median: k values have k-1 degrees of freedom left
            spread += [(v - middle) * math.sqrt(len(own) / (len(own) - 1)) for v in own]
    if len(spread) < 2:
        return first
    values = np.asarray(spread)
    middle = float(np.median(values))
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(values - middle)))
    if slow_side and len(values) >= SLOW_TAIL_MEASUREMENTS:
        sigma = max(sigma, (middle - float(np.quantile(values, SLOW_TAIL))) / 2)
    return max(sigma, SCALE_FLOOR)


def _by_entity(pairs: Sequence[PairResult]) -> dict[int, list[int]]:
    """Each entity's pairs, as positions in ``pairs`` (in order)."""
    index: dict[int, list[int]] = {}
    for i, p in enumerate(pairs):
        index.setdefault(p.a, []).append(i)
        if p.b != p.a:
            index.setdefault(p.b, []).append(i)
    return index


def _tests_of(suspect: Suspect, pairs: Sequence[PairResult],
              index: dict[int, list[int]]) -> list[PairResult]:
    """The pairs that test ``suspect`` (``_is_test_of``), in their order, read through the
    entity index instead of every pair (at 512 nodes: 116 candidates x 25,000 pairs)."""
    near = sorted({i for e in suspect.entities for i in index.get(e, ())})
    return [pairs[i] for i in near if _is_test_of(suspect, pairs[i])]


def _is_test_of(suspect: Suspect, p: PairResult) -> bool:
    if suspect.kind == "link":
        return (min(p.a, p.b), max(p.a, p.b)) == tuple(sorted(suspect.entities))
    if suspect.kind == "switch":  # a pair across the leaf's uplink: one end behind it
        return (p.a in suspect.entities) != (p.b in suspect.entities)
    return suspect.entities[0] in (p.a, p.b)
