"""locate's attribution: who is to blame (docs/commands/locate.md, "How it decides").

Nothing here runs a process or imports torch: the attribution reads pair measurements (plain
numbers, measured in the rounds of locate.schedule) and returns suspects with their evidence
in words, so it is tested on synthetic matrices.

Attribution, and why each step:

- log space: a slow GPU divides a pair's bandwidth by a factor, whatever the pair's level;
- scores are medians over partners: a bad entity is slow with all of its partners, a good one
  with at most a few (the bad ones), so the median ignores those few, and a congested round
  (every pair slow once) is one slow partner out of N-1 for everybody;
- the per-round median is removed once the first pass knows the candidates, computed over the
  pairs between non-candidates only (with two bad entities among six, two of a round's three
  pairs are slow and a plain round median would call them normal), and only beyond what its
  few pairs' noise puts there (soft threshold at one standard error);
- three metrics: busbw, latency, and their mean (a slow GPU is slow in both, and the mean of
  two independent noises is sqrt 2 quieter); a candidate is judged in the one whose z is
  furthest out first, then in the others it is a candidate in (locate.confirmation);
- candidate = at least --min-effect slower (per metric), whatever its z: one pass of a busy
  machine is too noisy for a z to gate the retest (a real 1.4x link read z -2 and was never
  retested); the z that decides is the pooled one (locate.confirmation). The robust z here
  (MAD, with a floor: a noise-free fleet's MAD is 0) orders the metrics and is reported;
- a link = a pair slow beyond what its two ends' scores explain, both ends otherwise normal;
- with a topology (each entity's leaf switch), a switch = a leaf whose pairs across leaves are
  slow while its pairs inside the leaf are normal: its uplink, not its hosts one by one (each
  of them is slow with most partners, so each is also an entity candidate, which the switch
  replaces). Leaves are scored like entities, each pair across leaves counting for the leaf
  at both of its ends, with the pairs of leaves already suspect left out once known (a good
  leaf's pairs with two bad leaves of four are 2/3 slow).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from commbench.locate.schedule import SMALL_FLEET
from commbench.locate.verdict import Verdict
from commbench.specs.locate import MinEffect

Z_LIMIT = 3.5  # robust z beyond which an entity or a link is an outlier (Iglewicz & Hoaglin)
MAD_TO_SIGMA = 1.4826  # MAD x this = sigma for normal data
SCALE_FLOOR = 0.01  # sigma floor in log units (1 %): a noise-free fleet's MAD is 0
Effect = MinEffect | float  # a float: the same share for every metric
METRICS = ("busbw", "lat", "both")  # both: the mean of the two log speeds (entities only)
MIN_ROUND_PAIRS = 3  # pairs a round needs for its median to be removed
# A median's standard error over sigma / sqrt(n), for normal data (sqrt(pi / 2)): how far a
# median of n pairs strays by noise alone (a round's level, a partner's score, a candidate's
# pooled evidence in locate.confirmation).
MEDIAN_SE = 1.2533
LINK_SCREEN = 0.5  # (link_screen: why)


# ---- attribution ------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairResult:
    """One measured pair: busbw in GB/s at the large size, latency (us) at the small one.
    ``status``: ok, wrong (validation failed), hung or failed."""

    round: int
    a: int
    b: int
    busbw: float
    lat: float  # the latency attribution reads (the command passes the pair's fastest call)
    lat_p99: float = float("nan")
    status: str = "ok"
    phase: str = "main"
    # the log speeds, computed once (the decision reads them millions of times at 512 nodes)
    _speeds: dict = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        busbw, lat = _log_speed(self.busbw, 1.0), _log_speed(self.lat, -1.0)
        self._speeds.update(busbw=busbw, lat=lat, both=(busbw + lat) / 2)

    def speed(self, metric: str) -> float:
        """Log speed, higher = faster: log busbw, -log latency, or their mean (both)."""
        return self._speeds[metric]


def _log_speed(value: float, sign: float) -> float:
    if not (value > 0 and math.isfinite(value)):
        return float("nan")
    return sign * math.log(value)


@dataclass
class MetricScores:
    """One metric's scores: entity index -> log score relative to the fleet, robust z, and the
    partners it was slow with."""

    metric: str
    score: dict[int, float]
    z: dict[int, float]
    slow_with: dict[int, tuple[int, int]]  # (slow partners, partners)
    round_offset: dict[int, float]
    center: float
    scale: float
    noise: float = SCALE_FLOOR  # one pair's sigma (pair_noise)


@dataclass
class Suspect:
    """An entity or a link the matrix points at, then what its confirmation found."""

    kind: str  # gpu | node | rail | link | switch
    entities: tuple[int, ...]  # one entity, a link's two ends, or a switch's entities
    metric: str  # busbw | lat: the one that flagged it (busbw first)
    busbw_ratio: float  # to the fleet median (< 1: slower)
    lat_ratio: float  # to the fleet median (> 1: slower)
    slow_with: tuple[int, int] = (0, 0)
    z: float = 0.0
    confirmed: tuple[int, int] = (0, 0)  # (slow again, retests)
    # the pooled evidence (locate.confirmation): log speed to the fleet's normal pair (< 0:
    # slower), its 95 % interval, the measurements pooled, and its z from this run's noise
    effect: float = float("nan")
    interval: tuple[float, float] = (float("nan"), float("nan"))
    measurements: int = 0
    pooled_z: float = float("nan")
    verdict: str = ""
    evidence: str = ""
    name: str = ""  # a switch's leaf
    # the other metrics it was a candidate in, nearest to the fleet last: judged in them too
    # when ``metric`` does not name it (a real 1.4x link read 1.21x in latency, z -14.7,
    # and 1.45x in busbw: retested in latency, it was let go as ok)
    also: tuple[str, ...] = ()


@dataclass
class Attribution:
    scores: dict[str, MetricScores]
    suspects: list[Suspect] = field(default_factory=list)
    leaves: tuple[str | None, ...] = ()  # each entity's leaf (--topology), else empty

    @property
    def candidates(self) -> set[int]:
        """Entities in question: candidate entities and every entity behind a candidate
        switch."""
        return {e for s in self.suspects if s.kind != "link"
                for e in (s.entities if s.kind == "switch" else s.entities[:1])}


def threshold(min_effect: float) -> float:
    """The log speed a slow pair or entity is at least below normal: ``min_effect`` slower
    means its time is (1 + min_effect) x normal, its speed 1 / (1 + min_effect)."""
    return -math.log1p(min_effect)


def as_min_effect(min_effect: Effect) -> MinEffect:
    return min_effect if isinstance(min_effect, MinEffect) else MinEffect(min_effect,
                                                                           min_effect)


def limit(min_effect: Effect, metric: str) -> float:
    """``threshold`` of ``metric``'s share."""
    return threshold(as_min_effect(min_effect).of(metric))


def median(values: Sequence[float]) -> float:
    """np.median of a short list of finite numbers, the same float, without numpy's
    per-call cost (the decision takes some 15,000 medians of ~11 values at 512 nodes)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2)


def _robust(values: Sequence[float]) -> tuple[float, float]:
    """(median, sigma from the MAD with its floor)."""
    arr = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if not arr.size:
        return 0.0, SCALE_FLOOR
    center = float(np.median(arr))
    return center, max(MAD_TO_SIGMA * float(np.median(np.abs(arr - center))), SCALE_FLOOR)


def score_metric(n: int, pairs: Sequence[PairResult], metric: str, min_effect: Effect,
                 exclude: set[int] | None = None) -> MetricScores:
    """Per-round offsets (from pairs between entities not in ``exclude``), then each entity's
    median residual over its partners, centred on the fleet, with its robust z."""
    usable = [p for p in pairs if p.status == "ok" and math.isfinite(p.speed(metric))]
    offsets: dict[int, float] = {}
    if exclude is not None:
        counts: dict[int, int] = {}
        by_round: dict[int, tuple[list[float], list[float]]] = {}
        for p in usable:
            inside, clean = by_round.setdefault(p.round, ([], []))
            inside.append(p.speed(metric))
            if p.a not in exclude and p.b not in exclude:
                clean.append(p.speed(metric))
        for index in sorted(by_round):
            inside, clean = by_round[index]
            # A round of one or two pairs has no median to speak of: it would be the pair
            # itself, and removing it would erase whatever the pair found (3 or 4 entities).
            if len(clean or inside) >= MIN_ROUND_PAIRS:
                offsets[index] = float(np.median(clean or inside))
                counts[index] = len(clean or inside)
        level = float(np.median(list(offsets.values()))) if offsets else 0.0
        # Only the part of a round's level beyond what its few pairs' noise puts there is
        # removed (soft threshold at one standard error of their median): a median of 3 pairs
        # is one of them, so removing it whole set a third of the residuals to exactly 0, the
        # spread read a third of the noise, and clean synthetic fleets of 6 named bad links.
        noise = pair_noise(usable, metric) if offsets else 0.0
        offsets = {k: _shrink(v - level, MEDIAN_SE * noise / math.sqrt(counts[k]))
                   for k, v in offsets.items()}
    per_entity: dict[int, list[float]] = {e: [] for e in range(n)}
    for p in usable:
        residual = p.speed(metric) - offsets.get(p.round, 0.0)
        per_entity[p.a].append(residual)
        per_entity[p.b].append(residual)
    raw = {e: median(v) for e, v in per_entity.items() if v}
    center, scale = _robust(list(raw.values()))
    # A few entities' MAD can be small by chance; a median over k partners varies by about
    # 1.25 sigma / sqrt(k) (the median's standard error), sigma being one pair's noise.
    noise = pair_noise(usable, metric, offsets)
    partners = max(1, int(np.median([len(v) for v in per_entity.values() if v] or [1])))
    scale = max(scale, MEDIAN_SE * noise / math.sqrt(partners))
    slow = limit(min_effect, metric)
    slow_with = {}
    for e, values in per_entity.items():
        slow_with[e] = (sum(1 for v in values if v - center <= slow), len(values))
    score = {e: v - center for e, v in raw.items()}
    z = {e: v / scale for e, v in score.items()}
    return MetricScores(metric, score, z, slow_with, offsets, center, scale, noise)


def _shrink(value: float, by: float) -> float:
    return math.copysign(max(0.0, abs(value) - by), value)


def pair_noise(pairs: Sequence[PairResult], metric: str,
               offsets: dict[int, float] | None = None) -> float:
    """One pair's noise (robust sigma, log units): how far a pair lies from what its round and
    its two ends predict, each taken without the pair itself and from the fastest of the
    others (its round's other pairs, an end's other partners): slowness is what is looked
    for, so a level must not be pulled down by it. With 3 pairs a round, the median of the
    other two is their mean, and a slow link of 0.1x moved its round-mates' residuals by +1.1
    (the noise read 0.64 instead of 0.3 and the link was missed).

    Leaving the pair out matters: medians that include it fit part of its noise away (at 8
    entities the MAD of such residuals read half the true sigma, and noise looked twice as far
    out as it was); the ends' levels matter: the raw spread of a fleet with one slow rank
    counts that rank's pairs as noise (one 0.27x rank of six read z = -2.7); so do the rounds
    (the VM's load moved whole rounds 3x while other jobs ran). Without ``offsets`` (the
    first pass) rounds are not removed: the noise is wider, erring towards naming nobody."""
    if len(pairs) < 2:
        return SCALE_FLOOR
    rounds = np.array([p.round for p in pairs])
    ends = np.array([(p.a, p.b) for p in pairs])
    values = np.array([p.speed(metric) for p in pairs], dtype=float)
    level = float(np.median(values))
    offset = np.array([(offsets or {}).get(r, 0.0) for r in rounds.tolist()], dtype=float)
    corrected = values - offset - level
    # An end's level is its fastest other pair: a pair runs at its slower end's speed, so a
    # good entity's pairs with bad partners are slow, and with 2-3 partners (4 nodes) a
    # median would land between the two and call the normal pairs noisy. Each entity's
    # fastest pair per partner, then its two fastest partners: without one partner, the
    # fastest is the first, or the second where that partner is the first.
    me = np.concatenate([ends[:, 0], ends[:, 1]])
    other = np.concatenate([ends[:, 1], ends[:, 0]])
    speed = np.concatenate([corrected, corrected])
    order = np.lexsort((-speed, other, me))  # by entity, partner, fastest first
    me, other, speed = me[order], other[order], speed[order]
    first = np.ones(len(me), dtype=bool)
    first[1:] = (me[1:] != me[:-1]) | (other[1:] != other[:-1])
    me, other, speed = me[first], other[first], speed[first]
    order = np.lexsort((-speed, me))  # by entity, its fastest partner first
    me, other, speed = me[order], other[order], speed[order]
    start = np.ones(len(me), dtype=bool)
    start[1:] = me[1:] != me[:-1]
    heads = np.flatnonzero(start)
    has_second = np.zeros(len(heads), dtype=bool)
    has_second[:-1] = heads[1:] - heads[:-1] >= 2
    has_second[-1] = len(me) - heads[-1] >= 2
    size = int(me.max()) + 1
    best_partner = np.full(size, -1)
    best = np.zeros(size)
    second = np.zeros(size)  # no second partner: 0.0
    best_partner[me[heads]] = other[heads]
    best[me[heads]] = speed[heads]
    second[me[heads][has_second]] = speed[heads[has_second] + 1]

    def end(entity: np.ndarray, without: np.ndarray) -> np.ndarray:
        return np.where(best_partner[entity] != without, best[entity], second[entity])

    if offsets:
        # the round's own level, without this pair: its fastest other pair (a round of one
        # pair: 0); each round's two fastest, the second where this pair is the first
        top1, top2 = {}, {}
        for r in np.unique(rounds).tolist():
            fastest = np.sort(values[rounds == r])[::-1]
            top1[r] = fastest[0]
            top2[r] = fastest[1] if len(fastest) >= 2 else math.nan
        own_round = np.array([r in offsets for r in rounds.tolist()])
        first_value = np.array([top1[r] for r in rounds.tolist()])
        second_value = np.array([top2[r] for r in rounds.tolist()])
        own = np.where(values == first_value, second_value, first_value) - level
        own = np.where(np.isnan(second_value), 0.0, own)
        corrected = np.where(own_round, values - level - own, corrected)
    residuals = corrected - end(ends[:, 0], ends[:, 1]) - end(ends[:, 1], ends[:, 0])
    return _robust(residuals.tolist())[1]


def _flagged(scores: MetricScores, min_effect: Effect) -> set[int]:
    """Candidates: at least --min-effect slower, whatever their z (docs/commands/locate.md,
    "How it decides"): on a busy machine a real 1.4x link read z -2 in the matrix and was
    never retested; the z comes from the pooled evidence (locate.confirmation)."""
    slow = limit(min_effect, scores.metric)
    return {e for e, s in scores.score.items() if s <= slow and s < 0}


def attribute(n: int, pairs: Sequence[PairResult], kind: str = "gpu",
              min_effect: Effect = 0.10, passes: int = 3,
              leaves: Sequence[str | None] = ()) -> Attribution:
    """Candidate entities, switches (``leaves``: each entity's leaf, from --topology) and
    links from the main matrix (their retest and verdict: locate.confirmation).

    Pass 1 scores without round offsets (the median over partners already ignores a slow
    round); later passes remove each round's median over the pairs between non-candidates,
    until the candidates stop changing."""
    main = [p for p in pairs if p.phase == "main"]
    exclude: set[int] | None = None
    scores: dict[str, MetricScores] = {}
    for _ in range(passes):
        scores = {m: score_metric(n, main, m, min_effect, exclude) for m in METRICS}
        found = set().union(*(_flagged(s, min_effect) for s in scores.values()))
        if exclude is not None and found == exclude:
            break
        exclude = found
    flagged = {m: _flagged(s, min_effect) for m, s in scores.items()}
    suspects = []
    for e in sorted(set().union(*flagged.values())):
        # The metric that is most sure (its z furthest out) is judged first, the others it
        # is a candidate in after it: a slow GPU is slow in both, and latency on the VM is
        # 5-30x quieter than busbw.
        metric, *also = sorted((m for m in METRICS if e in flagged[m]),
                               key=lambda m: scores[m].z[e])
        suspects.append(Suspect(kind, (e,), metric, _ratio(scores, "busbw", e),
                                _ratio(scores, "lat", e), scores[metric].slow_with[e],
                                scores[metric].z[e], also=tuple(also)))
    found_switches = switches(main, scores, leaves, min_effect) if leaves else []
    behind = {e for s in found_switches for e in s.entities}
    # a switch's hosts are not blamed one by one: the switch stands for them
    suspects = [s for s in suspects if s.entities[0] not in behind] + found_switches
    candidates = {s.entities[0] for s in suspects if s.kind != "switch"} | behind
    suspects += links(main, scores, candidates, min_effect, link_screen(n))
    return Attribution(scores, suspects, tuple(leaves))


def switches(pairs: Sequence[PairResult], scores: dict[str, MetricScores],
             leaves: Sequence[str | None], min_effect: Effect) -> list[Suspect]:
    """Candidate switches: leaves whose pairs across leaves are at least --min-effect slow
    (their median residual from the round's normal pair), while the pairs inside the leaf are
    not even half that slow (a slow host inside a leaf makes some of both slow, a bad uplink
    only those across). A leaf with no pair inside measured cannot be told from its hosts and
    stays with them. Leaves already suspect are left out of the others' pairs across from the
    second pass on (one bad leaf of four made the good ones' pairs across 1/3 slow; two bad,
    2/3); a leaf left with no such pair keeps what the pass before said (two leaves: each the
    other's only partner)."""
    members: dict[str, list[int]] = {}
    for entity, leaf in enumerate(leaves):
        if leaf is not None:
            members.setdefault(leaf, []).append(entity)
    if len(members) < 2:
        return []

    # each leaf's pairs (both ends under a leaf, completed), in order, as (leaf a, leaf b,
    # residual from the round's normal pair) per metric: every leaf reads only its own
    by_leaf: dict[str, dict[str, list[tuple[str, str, float]]]] = {m: {} for m in METRICS}
    for metric in METRICS:
        s = scores[metric]
        for p in pairs:
            value = p.speed(metric)
            if p.status != "ok" or not math.isfinite(value):
                continue
            ends = (leaves[p.a], leaves[p.b])
            if None in ends:
                continue
            found = (ends[0], ends[1], value - s.center - s.round_offset.get(p.round, 0.0))
            for leaf in dict.fromkeys(ends):
                by_leaf[metric].setdefault(leaf, []).append(found)

    def residuals(metric: str, leaf: str, exclude: set[str]) -> tuple[list[float], list[float]]:
        across, inside = [], []
        for end_a, end_b, residual in by_leaf[metric].get(leaf, ()):
            if end_a == end_b:
                inside.append(residual)
            elif (end_b if end_a == leaf else end_a) not in exclude:
                across.append(residual)
        return across, inside

    flagged: dict[str, dict[str, tuple[float, float, int, int]]] = {m: {} for m in METRICS}
    effects: dict[str, dict[str, float]] = {m: {} for m in METRICS}  # across, every leaf
    for metric in METRICS:
        slow = limit(min_effect, metric)
        suspect: set[str] = set()
        for _ in range(len(members) + 2):
            found: dict[str, tuple[float, float, int, int]] = {}
            for leaf in members:
                across, inside = residuals(metric, leaf, suspect - {leaf})
                if not across and leaf in suspect:
                    across, inside = residuals(metric, leaf, set())
                if not across or not inside:
                    continue
                effect, within = float(np.median(across)), float(np.median(inside))
                effects[metric][leaf] = effect
                if effect <= slow and effect < 0 and within > slow / 2:
                    noise = max(scores[metric].noise, SCALE_FLOOR)
                    z = effect / (MEDIAN_SE * noise / math.sqrt(len(across)))
                    found[leaf] = (effect, z, sum(1 for v in across if v <= slow), len(across))
            if set(found) == suspect:
                break
            # one new leaf a pass, the slowest: a good leaf's pairs across are half with
            # the bad one among three leaves, and a line drawn from the noise (17-19 % at
            # 0.05) flagged all three at once, each then left with no good leaf to be
            # retested against (2 of 8 seeds: three inconclusive switches)
            new = [leaf for leaf in found if leaf not in suspect]
            kept = suspect & set(found)
            suspect = kept | ({min(new, key=lambda leaf: found[leaf][0])} if new else set())
        flagged[metric] = found
    out = []
    for leaf in sorted(set().union(*flagged.values())):
        metric = min((m for m in METRICS if leaf in flagged[m]), key=lambda m: flagged[m][leaf][1])
        _, z, slow_pairs, count = flagged[metric][leaf]
        out.append(Suspect("switch", tuple(members[leaf]), metric,
                           math.exp(effects["busbw"].get(leaf, math.nan)),
                           math.exp(-effects["lat"].get(leaf, math.nan)), (slow_pairs, count), z,
                           name=leaf))
    return out


def _ratio(scores: dict[str, MetricScores], metric: str, entity: int) -> float:
    value = scores[metric].score.get(entity, float("nan"))
    return math.exp(value) if metric == "busbw" else math.exp(-value)


def link_screen(n: int) -> float:
    """The share of the --min-effect line a pair must be slow by to be a link candidate: half
    of it in fleets of up to SMALL_FLEET entities, the whole line above.

    A pair is measured once in the matrix, so a link at 1.4x against a 30 % line reads
    below the line whenever its one reading is a pair's noise fast (a third of real 6-rank
    runs: the link was never retested). At half the line it is retested whatever its one
    reading said, and its verdict still needs the whole line on the pooled evidence: on
    synthetic 6-rank fleets at 0.08 noise a 1.4x link was named in 183 of 200 instead of
    155, clean fleets named nothing in 200 of 200 either way. A small fleet has few pairs
    (15 at 6 ranks, 120 at 16), so the extra candidates cost a retest batch; at 512 nodes
    half the line would make hundreds of clean pairs candidates and raise the z every
    verdict needs (``z_limit``)."""
    return LINK_SCREEN if n <= SMALL_FLEET else 1.0


def normal_spread(scores: MetricScores, pairs: Sequence[PairResult], tested: set[int]) -> float:
    """The robust spread of the main matrix's pairs between entities nobody suspects, each
    round's level removed: a clean pair's noise that no fit has shrunk (pair_noise read 0.09
    on synthetic fleets of 6 drawn at 0.3, and those fleets named a bad link)."""
    return _robust([p.speed(scores.metric) - scores.round_offset.get(p.round, 0.0)
                    for p in pairs if p.phase == "main" and p.status == "ok"
                    and p.a not in tested and p.b not in tested])[1]


def links(pairs: Sequence[PairResult], scores: dict[str, MetricScores], candidates: set[int],
           min_effect: Effect, screen: float = 1.0, normal: frozenset[int] = frozenset()
           ) -> list[Suspect]:
    """Pairs at least --min-effect slower than their ends explain, between two ends that are
    not candidates, whatever their z (the retests' pooled z decides)."""
    found: dict[tuple[int, int], Suspect] = {}
    flagged: dict[tuple[int, int], dict[str, float]] = {}  # link -> metric -> z
    for metric in ("busbw", "lat"):
        slow = limit(min_effect, metric) * screen
        s = scores[metric]
        readings: dict[tuple[int, int], list[float]] = {}
        for p in pairs:
            if p.status != "ok" or p.a in candidates or p.b in candidates:
                continue
            value = p.speed(metric)
            if not math.isfinite(value):
                continue
            expected = s.center + s.round_offset.get(p.round, 0.0)
            readings.setdefault((p.a, p.b), []).append(
                value - expected - (0.0 if p.a in normal else s.score.get(p.a, 0.0))
                - (0.0 if p.b in normal else s.score.get(p.b, 0.0)))
        # a pair read twice (a small fleet's full schedule): the median of its readings
        residuals = {link: median(values) for link, values in readings.items()}
        # The fit leaves many residuals near 0 (their MAD is deflated): one pair's noise,
        # measured before the fit, or the plain spread of the pairs between non-candidates,
        # is the honest scale where it is larger (at 6 entities and a pair noise of 0.3,
        # pair_noise read 0.1 in some synthetic clean fleets and they named a bad link).
        center, scale = _robust(list(residuals.values()))
        scale = max(scale, s.noise, normal_spread(s, pairs, candidates))
        for link, value in residuals.items():
            if value - center > slow or value >= center:
                continue
            z = (value - center) / scale
            flagged.setdefault(link, {})[metric] = z
            if link not in found or z < found[link].z:
                ratio = math.exp(value - center)
                found[link] = Suspect(
                    "link", link, metric, ratio if metric == "busbw" else float("nan"),
                    1 / ratio if metric == "lat" else float("nan"), (1, 1), z)
    for link, suspect in found.items():
        suspect.also = tuple(sorted((m for m in flagged[link] if m != suspect.metric),
                                    key=flagged[link].get))
    return [found[k] for k in sorted(found)]


def hung_suspects(pairs: Sequence[PairResult], names: list[str]) -> list[Suspect]:
    """Pairs that hung or failed: both ends are named, the pair is the evidence."""
    found = []
    for p in pairs:
        if p.status in ("hung", "failed"):
            who = f"{names[p.a]} - {names[p.b]}"
            found.append(Suspect("link", (p.a, p.b), "busbw", float("nan"), float("nan"),
                                 verdict=Verdict.HUNG,
                                 evidence=f"{who}: the pair {p.status} in round {p.round}"))
    return found


def wrong_suspects(n: int, pairs: Sequence[PairResult], names: list[str],
                   kind: str) -> list[Suspect]:
    """Pairs whose data arrived wrong (validation is exact, so no retest is needed): an entity
    wrong with more than half of its partners (at least 2) is bad itself, any other wrong pair
    is a bad link."""
    wrong = [p for p in pairs if p.status == "wrong"]
    partners: dict[int, set[int]] = {}
    tested: dict[int, set[int]] = {}
    for p in pairs:
        for me, other in ((p.a, p.b), (p.b, p.a)):
            tested.setdefault(me, set()).add(other)
    for p in wrong:
        partners.setdefault(p.a, set()).add(p.b)
        partners.setdefault(p.b, set()).add(p.a)
    bad = {e for e, found in partners.items()
           if len(found) >= 2 and 2 * len(found) > len(tested.get(e, ()))}
    found = [Suspect(kind, (e,), "busbw", float("nan"), float("nan"),
                     (len(partners[e]), len(tested[e])), verdict=Verdict.bad(kind),
                     evidence=f"{names[e]}: wrong results with {len(partners[e])}/"
                              f"{len(tested[e])} partners")
             for e in sorted(bad)]
    for link in sorted({(p.a, p.b) for p in wrong if p.a not in bad and p.b not in bad}):
        found.append(Suspect("link", link, "busbw", float("nan"), float("nan"),
                             verdict=Verdict.BAD_LINK,
                             evidence=f"{names[link[0]]} - {names[link[1]]}: wrong results"))
    return found


def matrix(n: int, pairs: Sequence[PairResult], metric: str,
           relative: bool = True) -> np.ndarray:
    """n x n of a metric's value over the fleet median (NaN = untested), from the main pairs
    that completed; a pair measured in several rounds keeps its median. ``relative=False``:
    the values themselves."""
    values: dict[tuple[int, int], list[float]] = {}
    for p in pairs:
        if p.phase == "main" and p.status == "ok":
            value = p.busbw if metric == "busbw" else p.lat
            if value > 0 and math.isfinite(value):
                values.setdefault((p.a, p.b), []).append(value)
    out = np.full((n, n), np.nan)
    if not values:
        return out
    medians = {k: float(np.median(v)) for k, v in values.items()}
    fleet = float(np.median(list(medians.values()))) if relative else 1.0
    for (a, b), value in medians.items():
        out[a, b] = out[b, a] = value / fleet
    return out
