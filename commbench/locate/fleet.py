"""locate's entities: what a gpu, a node and a rail are in terms of ranks, and which rank
pairs run when two entities meet (docs/commands/locate.md, "Options"). Pure: host facts in,
entities and rank pairs out.

- gpu: each rank;
- node: the local ranks of one node (the launcher's node rank where it says, else the host),
  two nodes meet rail-parallel: local rank i of one with local rank i of the other;
- rail: local rank r of every node (one GPU and its NIC), two rails meet across nodes: rail r
  of node k with rail s of node k+1, so the traffic leaves the node as it does in training;
- switch: the node entities, measured as at node level; --topology groups them by leaf
  switch and the attribution looks at each leaf's uplink (locate.attribution.switches).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commbench.locate.schedule import Round

LEVELS = ("gpu", "node", "rail", "switch")


@dataclass(frozen=True)
class Entity:
    index: int
    kind: str  # gpu | node | rail
    name: str  # 'rank 3', the host, 'rail 2'
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]  # global ranks, in node order (rail) or local order (node)


@dataclass(frozen=True)
class Meeting:
    """Two entities meeting: the rank pairs that run (at the same time) for it."""

    a: int
    b: int
    rank_pairs: tuple[tuple[int, int], ...]
    phase: str = ""  # its own phase (a candidate link's retest: ``link``), else the round's


@dataclass(frozen=True)
class RankRound:
    """A round as the engine runs it: every meeting's rank pairs at once."""

    index: int
    phase: str
    meetings: tuple[Meeting, ...]


def node_keys(hosts: Sequence[dict]) -> list[tuple[str, str]]:
    """Each rank's node: (host, launcher node rank); two torchrun agents on one machine are
    two nodes."""
    return [(h.get("host", ""), str(h.get("node") or "")) for h in hosts]


def default_level(hosts: Sequence[dict]) -> str:
    """gpu when all ranks share a node, node otherwise (docs/commands/locate.md, --level)."""
    return "gpu" if len(set(node_keys(hosts))) <= 1 else "node"


def entities(level: str, hosts: Sequence[dict]) -> list[Entity]:
    """The entities of ``level`` over ranks described by ``hosts`` (rank order)."""
    if level == "switch":
        level = "node"  # a switch is judged from its nodes' pairs
    keys = node_keys(hosts)
    nodes = list(dict.fromkeys(keys))
    local = {key: [r for r, k in enumerate(keys) if k == key] for key in nodes}
    if level == "gpu":
        return [Entity(r, "gpu", f"rank {r}", (keys[r][0],), (r,)) for r in range(len(hosts))]
    if level == "node":
        hostnames = [k[0] for k in nodes]
        shared = len(set(hostnames)) < len(hostnames)
        return [Entity(i, "node", f"{k[0]}:{k[1]}" if shared else k[0], (k[0],),
                       tuple(local[k])) for i, k in enumerate(nodes)]
    if level == "rail":
        width = min(len(v) for v in local.values())
        return [Entity(r, "rail", f"rail {r}", tuple(dict.fromkeys(k[0] for k in nodes)),
                       tuple(local[k][r] for k in nodes)) for r in range(width)]
    raise ValueError(f"unknown level {level!r}")


def rank_pairs(level: str, a: Entity, b: Entity) -> tuple[tuple[int, int], ...]:
    """The rank pairs of a meeting of ``a`` and ``b``; nobody twice."""
    if level == "rail":
        nodes = len(a.ranks)
        shift = 1 if nodes > 1 else 0
        return tuple((a.ranks[k], b.ranks[(k + shift) % nodes]) for k in range(nodes))
    return tuple(zip(a.ranks, b.ranks, strict=False))


def rank_rounds(level: str, found: Sequence[Entity], rounds: Sequence[Round]) -> list[RankRound]:
    """Entity rounds as rank rounds."""
    return [RankRound(r.index, r.phase,
                      tuple(Meeting(a, b, rank_pairs(level, found[a], found[b]),
                                    r.phase_of(a, b))
                            for a, b in r.pairs))
            for r in rounds]
