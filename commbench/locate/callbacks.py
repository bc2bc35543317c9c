"""What rank 0 calls inside a locate run, and the job that carries those calls to the ranks:
``plan_rounds`` (the entities and the main rounds, locate.schedule), ``follow_up`` (the next
batch of retests, locate.confirmation), ``retest_batches`` (their cap) and ``verdict_code``
(every rank's exit code is rank 0's, from locate.findings). Pure, but for the job's op.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

from commbench.locate.findings import entity_of, findings, leaves_of, pair_result
from commbench.specs.locate import LocateSpec


def plan_rounds(spec: LocateSpec, hosts: list[dict]) -> tuple[list[dict], list]:
    """Entities of the level and the main rounds, as the ranks will run them."""
    from commbench.locate import fleet, retests

    level = spec.level or fleet.default_level(hosts)
    found = fleet.entities(level, hosts)
    if len(found) < 2:
        return [asdict(e) for e in found], []
    rounds = retests.main_rounds(len(found), spec, leaves_of(spec, found))
    return [asdict(e) for e in found], fleet.rank_rounds(level, found, rounds)


def follow_up(spec: LocateSpec, found: list[dict], records: list[dict]) -> list:
    """The next batch of retests of the candidates whose pooled evidence has not settled
    (none: all settled); the ranks call it until it returns none, ``retest_batches`` times
    at most."""
    from commbench.locate import fleet, retests

    entities = [entity_of(e) for e in found]
    if not entities:
        return []
    pairs = [pair_result(r) for r in records]
    rounds = retests.next_batch(len(entities), pairs, entities[0].kind, spec,
                                leaves_of(spec, entities))
    return fleet.rank_rounds(entities[0].kind, entities, rounds)


def retest_batches(spec: LocateSpec, entities: int) -> int:
    """The cap on retest batches for a fleet of ``entities`` (locate.retests.batches)."""
    from commbench.locate import retests

    return retests.batches(entities, spec.follow_ups)


def verdict_code(spec: LocateSpec, found: list[dict], records: list[dict]) -> int:
    """The run's exit code as the command's finish will judge it (in the ranks, so that every
    rank's exit code is rank 0's): 1 something bad, 0 nothing bad, 3 nothing measured."""
    return findings([entity_of(e) for e in found], records, spec).exit_code


def job(spec: LocateSpec, backend: str):
    """Every rank's LocateJob: bidirectional p2p at the two sizes, rank 0's calls bound to
    ``spec``. torch is imported here: after the input is known good."""
    from commbench import collectives
    from commbench.locate.rank import LocateJob

    return LocateJob(op=collectives.get("p2p"), pattern="bidir", backend=backend,
                     device="cuda" if backend == "nccl" else "cpu",
                     small=spec.small, large=spec.large, timeout=spec.timeout,
                     plan=functools.partial(plan_rounds, spec),
                     follow_up=functools.partial(follow_up, spec),
                     verdict=functools.partial(verdict_code, spec),
                     window=1 if spec.large >= 4 << 20 else 8,
                     batches=functools.partial(retest_batches, spec), config=asdict(spec))
