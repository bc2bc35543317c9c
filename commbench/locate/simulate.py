"""A fleet simulator for locate: synthetic nodes x GPUs, faults planted, and the very same
schedule, --min-effect line, attribution and confirmation a real run uses
(locate.schedule, locate.noise, locate.retests.locate_offline: no second
implementation; without a given --min-effect each fleet draws its line from its own main
matrix, as a run does). Pure: numpy, no torch, no process.

The simulated run is at node level, as on a cluster: two nodes meet rail-parallel (local
rank i with local rank i), and a meeting is as fast as its slowest rank pair, as the rank
side records it. Each rank pair draws its own noise (lognormal, sigma per metric: a quiet
cluster's 0.05, or what the real runs here measured), then the faults:

- ``gpu``: one GPU of one node (its rank pair in every meeting of the node) slow;
- ``node``: every rank pair of one node slow;
- ``rail``: one NIC of one node: that local rank's pairs slow (a GPU fault, seen from the
  node level; ``rail`` level would name the rail);
- ``link``: the path between two nodes slow (all their rank pairs, in that meeting only);
- ``switch``: one leaf switch's uplink slow: every rank pair between a node behind it and a
  node of another leaf (``leaf_size`` nodes a leaf, the topology handed to the decision as
  --topology would be), its pairs inside the leaf untouched (its leaf is to be named, none
  of its nodes);
- ``congested``: one main round slower for everybody (nobody is to be named);
- ``many``: 2 % of the nodes slow at once (each is to be named).

A slow factor f divides busbw by f and multiplies latency by f.

At ``level="gpu"`` every GPU is an entity (node-major: entity ``node * gpus + gpu``), as
``locate --level gpu`` runs across nodes: each pair is one rank pair, no slowest-of-G. A
single slow GPU is then a whole entity slow with every partner, where at node level it is
one lane of G and the meeting's slowest lane hides it under a noisy fleet's spread (at 0.25
a rank pair, a 1.5x GPU read 0.87x of its node). ``rail`` (one NIC) slows only its pairs
with other nodes; a right answer names the GPU (``bad gpu``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from commbench.locate import retests
from commbench.locate.attribution import PairResult
from commbench.locate.schedule import Round
from commbench.locate.verdict import is_bad
from commbench.specs.locate import LocateSpec, MinEffect

FAULTS = ("clean", "gpu", "node", "rail", "link", "congested", "many", "switch")
SWITCH_LEAF = 4  # nodes a leaf where a switch fault is planted without a leaf_size
QUIET = (0.05, 0.05)  # a quiet cluster's pair noise, (busbw, latency), log units


@dataclass(frozen=True)
class Fleet:
    nodes: int
    gpus: int = 8
    noise: tuple[float, float] = QUIET  # lognormal sigma (busbw, latency) of one rank pair
    fault: str = "clean"
    factor: float = 1.3
    many_share: float = 0.02
    leaf_size: int = 0  # nodes a leaf switch (0: no topology known; switch faults: 4)
    level: str = "node"  # node: a node an entity; gpu: every GPU one

    @property
    def entities(self) -> int:
        return self.nodes * self.gpus if self.level == "gpu" else self.nodes

    def node_of(self, entity: int) -> int:
        return entity // self.gpus if self.level == "gpu" else entity

    def leaves(self) -> tuple[str | None, ...]:
        """Each entity's leaf, as --topology would say: consecutive nodes, ``leaf_size`` a
        leaf (a switch fault without one: SWITCH_LEAF); none without a topology."""
        size = self.leaf_size or (SWITCH_LEAF if self.fault == "switch" else 0)
        return (tuple(f"leaf{self.node_of(e) // size}" for e in range(self.entities))
                if size else ())


@dataclass
class Planted:
    """What the fault is, and which entities a right answer names bad."""

    slow_gpus: dict[tuple[int, int], float] = field(default_factory=dict)  # (node, gpu)
    slow_nics: dict[tuple[int, int], float] = field(default_factory=dict)  # across nodes only
    slow_links: dict[tuple[int, int], float] = field(default_factory=dict)  # node pair
    slow_uplinks: dict[str, float] = field(default_factory=dict)  # leaf
    congested: dict[int, float] = field(default_factory=dict)  # main round -> factor
    expected: set[tuple[str, tuple[int, ...]]] = field(default_factory=set)


def plant(fleet: Fleet, rng: np.random.Generator, main: Sequence[Round] = ()) -> Planted:
    """The fault; a link is planted on a pair the main rounds measure (``--rounds quick``
    measures K of a node's N-1 partners: a link it never draws it cannot see)."""
    found = Planted()
    node = int(rng.integers(fleet.nodes))
    per_gpu = fleet.level == "gpu"
    if fleet.fault in ("gpu", "rail"):
        gpu = int(rng.integers(fleet.gpus))
        # seen from node level a NIC is one slow lane, as a GPU is
        slow = found.slow_nics if per_gpu and fleet.fault == "rail" else found.slow_gpus
        slow[(node, gpu)] = fleet.factor
        found.expected.add(("gpu", (node * fleet.gpus + gpu,)) if per_gpu
                           else ("node", (node,)))
    elif fleet.fault == "node":
        for gpu in range(fleet.gpus):
            found.slow_gpus[(node, gpu)] = fleet.factor
            if per_gpu:
                found.expected.add(("gpu", (node * fleet.gpus + gpu,)))
        if not per_gpu:
            found.expected.add(("node", (node,)))
    elif fleet.level == "gpu" and fleet.fault in ("link", "switch", "many"):
        raise ValueError(f"the {fleet.fault} fault is simulated at node level only")
    elif fleet.fault == "link":
        measured = [pair for r in main for pair in r.pairs]
        if measured:
            link = measured[int(rng.integers(len(measured)))]
        else:
            other = int((node + 1 + rng.integers(fleet.nodes - 1)) % fleet.nodes)
            link = (min(node, other), max(node, other))
        found.slow_links[link] = fleet.factor
        found.expected.add(("link", link))
    elif fleet.fault == "congested":
        found.congested[0] = 2.0  # the whole first round twice as slow
    elif fleet.fault == "switch":
        leaves = fleet.leaves()
        leaf = leaves[node]
        found.slow_uplinks[leaf] = fleet.factor
        found.expected.add(("switch", tuple(e for e, name in enumerate(leaves)
                                             if name == leaf)))
    elif fleet.fault == "many":
        count = max(1, round(fleet.many_share * fleet.nodes))
        for bad in rng.choice(fleet.nodes, size=count, replace=False):
            for gpu in range(fleet.gpus):
                found.slow_gpus[(int(bad), gpu)] = fleet.factor
            found.expected.add(("node", (int(bad),)))
    return found


def measure(fleet: Fleet, planted: Planted, rounds: Sequence[Round],
            rng: np.random.Generator) -> list[PairResult]:
    """Each meeting of two nodes: their G rank pairs at once, each with its noise and the
    faults on it; the meeting is its slowest rank pair (busbw) and latency."""
    if fleet.level == "gpu":
        return _measure_gpus(fleet, planted, rounds, rng)
    out = []
    gpus = fleet.gpus
    leaves = fleet.leaves()
    for r in rounds:
        if not r.pairs:
            continue
        count = len(r.pairs)
        noise = np.exp(rng.normal(0.0, 1.0, size=(2, count, gpus))
                       * np.asarray(fleet.noise)[:, None, None])
        slow = np.ones((count, gpus))
        for i, (a, b) in enumerate(r.pairs):
            for g in range(gpus):
                slow[i, g] = max(planted.slow_gpus.get((a, g), 1.0),
                                 planted.slow_gpus.get((b, g), 1.0))
            slow[i] *= planted.slow_links.get((a, b), 1.0)
            if leaves and leaves[a] != leaves[b]:  # across an uplink, on both leaves' sides
                slow[i] *= max(planted.slow_uplinks.get(leaves[a], 1.0),
                               planted.slow_uplinks.get(leaves[b], 1.0))
        if r.phase == "main":
            slow *= planted.congested.get(r.index, 1.0)
        busbw = (10.0 / slow * noise[0]).min(axis=1)
        lat = (50.0 * slow * noise[1]).max(axis=1)
        out += [PairResult(r.index, a, b, float(busbw[i]), float(lat[i]), float(lat[i]),
                           "ok", r.phase_of(a, b)) for i, (a, b) in enumerate(r.pairs)]
    return out


def _measure_gpus(fleet: Fleet, planted: Planted, rounds: Sequence[Round],
                  rng: np.random.Generator) -> list[PairResult]:
    """``level="gpu"``: each pair is one rank pair, its noise and the faults on its two
    GPUs (a slow NIC on its pairs with other nodes)."""
    out = []
    gpus = fleet.gpus
    for r in rounds:
        if not r.pairs:
            continue
        noise = np.exp(rng.normal(0.0, 1.0, size=(2, len(r.pairs)))
                       * np.asarray(fleet.noise)[:, None])
        slow = np.ones(len(r.pairs))
        for i, (a, b) in enumerate(r.pairs):
            ends = (divmod(a, gpus), divmod(b, gpus))
            across = ends[0][0] != ends[1][0]
            slow[i] = max(max(planted.slow_gpus.get(end, 1.0),
                              planted.slow_nics.get(end, 1.0) if across else 1.0)
                          for end in ends)
        if r.phase == "main":
            slow *= planted.congested.get(r.index, 1.0)
        busbw = 10.0 / slow * noise[0]
        lat = 50.0 * slow * noise[1]
        out += [PairResult(r.index, a, b, float(busbw[i]), float(lat[i]), float(lat[i]),
                           "ok", r.phase_of(a, b)) for i, (a, b) in enumerate(r.pairs)]
    return out


@dataclass(frozen=True)
class Outcome:
    found: bool  # the expected entities named bad, and nothing else
    false_bad: bool  # something named bad that was not planted
    rounds: int  # main + retest rounds
    retest_rounds: int
    line: tuple[float, float] = (float("nan"), float("nan"))  # --min-effect used (busbw, lat)
    listed_slow: bool = False  # an entity not planted listed ``slow`` (a clean fleet: any)


def simulate(fleet: Fleet, rounds: str = "quick", seed: int = 0,
             spec: LocateSpec | None = None) -> Outcome:
    """One simulated locate run: plant, the schedule, measure, retest, judge."""
    spec = replace(spec or LocateSpec(), rounds=rounds, seed=seed)
    rng = np.random.default_rng(seed)
    main = retests.main_rounds(fleet.entities, spec, fleet.leaves())
    planted = plant(fleet, rng, main)
    pairs, judged = retests.locate_offline(
        fleet.entities, lambda more: measure(fleet, planted, more, rng), fleet.level, spec,
        leaves=fleet.leaves(), main=main)
    named = {(s.kind, tuple(s.entities)) for s in judged.suspects
             if is_bad(s.verdict)}
    retest = len({p.round for p in pairs if p.phase != "main"})
    planted_entities = {e for _, entities in planted.expected for e in entities}
    slow = {s.entities[0] for s in [*judged.suspects, *judged.slow] if s.verdict == "slow"}
    return Outcome(named == planted.expected and bool(planted.expected) or
                   (not planted.expected and not named),
                   bool(named - planted.expected), len(main) + retest, retest,
                   (judged.line.busbw, judged.line.lat) if judged.line else (math.nan,) * 2,
                   bool(slow - planted_entities))


def rates(fleet: Fleet, rounds: str, trials: int, seed: int = 0,
          min_effect: MinEffect | None = None) -> dict:
    """Detection rate, false-bad rate per fleet, rounds (median, max) over ``trials``."""
    spec = LocateSpec(min_effect=min_effect)  # None: the line drawn from each fleet's noise
    outcomes = [simulate(fleet, rounds, seed + t, spec) for t in range(trials)]
    counts = [o.rounds for o in outcomes]
    return {"trials": trials, "found": sum(o.found for o in outcomes) / trials,
            "false_bad": sum(o.false_bad for o in outcomes) / trials,
            "false_bad_count": sum(o.false_bad for o in outcomes),
            "listed_slow": sum(o.listed_slow for o in outcomes) / trials,
            "rounds_median": float(np.median(counts)), "rounds_max": max(counts),
            "line_busbw": float(np.median([o.line[0] for o in outcomes])),
            "line_lat": float(np.median([o.line[1] for o in outcomes]))}
