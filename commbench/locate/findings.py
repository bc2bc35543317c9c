"""What a locate run found, from the pairs it measured: the suspects, the transient ones, a row
per entity (entities.csv), and the exit code (docs/commands/locate.md, "Exit codes"). Pure:
rank 0 calls it inside the run for every rank's exit code, and the command after it for the
files and the console, on the same pairs.jsonl records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from commbench.core.errors import EXIT_FINDING, EXIT_OK, EXIT_RUN_FAILED
from commbench.locate.verdict import GROUPS, PASSED, Verdict, is_bad
from commbench.specs.locate import LocateSpec

if TYPE_CHECKING:
    from commbench.locate.attribution import Attribution, PairResult, Suspect
    from commbench.locate.fleet import Entity
    from commbench.locate.noise import Line
    from commbench.locate.rule import Rule


class SuspectRow(TypedDict):
    """A suspect as the console, summary.md, run.json and --json show it."""

    kind: str  # gpu | node | rail | link | switch
    entity: str  # its name; a link: "a - b"; a switch: its leaf
    entities: list[int]
    ranks: list[int]
    hosts: list[str]
    busbw_ratio: float
    lat_ratio: float
    evidence: str
    confirmed: str  # "slow again/retests"
    verdict: Verdict
    z: float
    metric: str
    pooled_z: float
    measurements: int
    interval: list[float]  # the pooled effect's 95 % interval, as ratios


class EntityRow(TypedDict):
    """A row of entities.csv (results.locate.ENTITY_COLUMNS): an entity, or a link or switch
    suspect."""

    entity: str
    kind: str
    host: str
    ranks: str
    partners: int
    busbw_ratio: float
    busbw_z: float
    lat_ratio: float
    lat_z: float
    votes: str
    confirmed: str
    verdict: Verdict


@dataclass
class Findings:
    """The attribution of the pairs measured, as rows for the files and the console."""

    main_pairs: int
    rounds: int
    measured_pairs: int  # completed (ok or wrong), any phase
    confirm_rounds: int
    leaves: tuple[str | None, ...]
    suspects: list[SuspectRow] = field(default_factory=list)
    transient: list[SuspectRow] = field(default_factory=list)
    slow: list[SuspectRow] = field(default_factory=list)  # beyond the z, under the line
    entities: list[EntityRow] = field(default_factory=list)
    attribution: Attribution | None = None
    line: Line | None = None  # the --min-effect line judged against; None: nothing judged
    rule: Rule | None = None  # the z, the line and their sources applied; None: nothing judged

    @property
    def exit_code(self) -> int:
        """3 nothing measured (no verdict, never "no suspect"), 1 something bad, else 0."""
        if not self.measured_pairs:
            return EXIT_RUN_FAILED
        return EXIT_FINDING if any(is_bad(s["verdict"]) for s in self.suspects) else EXIT_OK


def entity_of(found: dict) -> Entity:
    """An entity from its run.json form (fleet.Entity as a dict)."""
    from commbench.locate.fleet import Entity

    return Entity(found["index"], found["kind"], found["name"], tuple(found["hosts"]),
                  tuple(found["ranks"]))


def pair_result(record: dict) -> PairResult:
    """A pairs.jsonl record as the attribution reads it."""
    from commbench.locate.attribution import PairResult

    # A pair is judged on its fast calls: waiting for a CPU (ranks sharing cores) or for a
    # neighbour's traffic only adds, while a slow GPU, NIC or link slows every call. On the
    # 2-core VM a clean pair's p50 latency read 90 us or 2-3 ms depending on the scheduler,
    # its fastest call 58-60 us every time; clean pairs' median busbw spread 8x within a run,
    # their fastest decile's 2x. pairs.csv keeps the medians and p99 as well.
    latency = record.get("lat_us_min", record["lat_us_p50"])
    busbw = record.get("busbw_p10_gbps", record["busbw_gbps"])
    return PairResult(record["round"], record["a"], record["b"], busbw, latency,
                      record["lat_us_p99"], record["status"], record["phase"])


def leaves_of(spec: LocateSpec, entities: list) -> tuple[str | None, ...]:
    """Each entity's leaf switch from --topology (empty without one)."""
    if not spec.topology:
        return ()
    from commbench.locate.topology import Topology, entity_leaves

    return tuple(entity_leaves(Topology.from_rows(spec.topology), entities))


def findings(found: list[Entity], records: list[dict], spec: LocateSpec) -> Findings:
    """The attribution of the pairs measured, judged as the confirmation judges them."""
    from commbench.locate import attribution as locate
    from commbench.locate import retests

    n = len(found)
    pairs = [pair_result(r) for r in records]
    names = [e.name for e in found]
    main = [p for p in pairs if p.phase == "main"]
    view = Findings(main_pairs=len(main), rounds=len({p.round for p in main}),
                    measured_pairs=sum(1 for p in pairs if p.status in ("ok", "wrong")),
                    confirm_rounds=len({p.round for p in pairs if p.phase != "main"}),
                    leaves=leaves_of(spec, found))
    if n < 2 or not main:
        view.entities = [unmeasured_row(e) for e in found]
        return view
    kind = found[0].kind
    decided = retests.decide(n, pairs, kind, spec, names, view.leaves)
    # A candidate whose pooled evidence came out ok is no suspect (its entity row says ok).
    judged = [s for s in decided.suspects if s.verdict != Verdict.OK or s.kind not in GROUPS]
    judged += decided.slow
    judged += locate.hung_suspects(pairs, names)
    judged += locate.wrong_suspects(n, pairs, names, kind)
    rows = [suspect_row(s, found) for s in judged]
    view.attribution, view.line, view.rule = decided.attribution, decided.line, decided.rule
    view.suspects = [r for r in rows if r["verdict"] not in PASSED
                     and r["verdict"] != Verdict.SLOW]
    view.slow = [r for r in rows if r["verdict"] == Verdict.SLOW]
    view.transient = [r for r in rows if r["verdict"] == Verdict.TRANSIENT]
    view.entities = entity_rows(found, decided.attribution, judged)
    return view


def suspect_row(s: Suspect, found: list[Entity]) -> SuspectRow:
    ends = [found[e] for e in s.entities]
    # a switch is its leaf (hosts: the leaf's), a link its two ends
    return {"kind": s.kind, "entity": s.name if s.kind == "switch"
            else " - ".join(e.name for e in ends),
            "entities": list(s.entities),
            "ranks": sorted({r for e in ends for r in e.ranks}),
            "hosts": list(dict.fromkeys(h for e in ends for h in e.hosts)),
            "busbw_ratio": s.busbw_ratio, "lat_ratio": s.lat_ratio,
            "evidence": s.evidence, "confirmed": f"{s.confirmed[0]}/{s.confirmed[1]}",
            "verdict": s.verdict, "z": s.z, "metric": s.metric,
            "pooled_z": s.pooled_z, "measurements": s.measurements,
            "interval": ratio_interval(s)}


def ratio_interval(s: Suspect) -> list[float]:
    """The pooled effect's 95 % interval as ratios to the fleet median, in the metric's own
    direction (busbw and speed: < 1 slower; latency: > 1 slower), low to high."""
    low, high = s.interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return [math.nan, math.nan]
    if s.metric == "lat":
        return [math.exp(-high), math.exp(-low)]
    return [math.exp(low), math.exp(high)]


def entity_rows(found: list[Entity], attribution: Attribution,
                judged: list[Suspect]) -> list[EntityRow]:
    """entities.csv: every entity (its ratios, z and verdict), then each link or switch
    suspect as a row of its own."""
    busbw, lat = attribution.scores["busbw"], attribution.scores["lat"]
    verdicts = {s.entities[0]: s for s in judged if s.kind not in GROUPS}
    rows: list[EntityRow] = []
    for e in found:
        s = verdicts.get(e.index)
        slow, partners = busbw.slow_with.get(e.index, (0, 0))
        if s is None and not partners:
            rows.append(unmeasured_row(e))
            continue
        rows.append({
            "entity": e.name, "kind": e.kind, "host": ",".join(e.hosts),
            "ranks": ",".join(map(str, e.ranks)), "partners": partners,
            "busbw_ratio": math.exp(busbw.score.get(e.index, math.nan)),
            "busbw_z": busbw.z.get(e.index, math.nan),
            "lat_ratio": math.exp(-lat.score.get(e.index, math.nan)),
            "lat_z": lat.z.get(e.index, math.nan),
            "votes": f"{max(slow, lat.slow_with.get(e.index, (0, 0))[0])}/{partners}",
            "confirmed": f"{s.confirmed[0]}/{s.confirmed[1]}" if s else "",
            "verdict": s.verdict if s else Verdict.OK})
    for s in judged:
        if s.kind in GROUPS:
            ends = [found[i] for i in s.entities]
            name = s.name if s.kind == "switch" else " - ".join(e.name for e in ends)
            rows.append({"entity": name, "kind": s.kind,
                         "host": ",".join(dict.fromkeys(h for e in ends for h in e.hosts)),
                         "ranks": ",".join(str(r) for e in ends for r in e.ranks),
                         "partners": s.slow_with[1] if s.kind == "switch" else 1,
                         "busbw_ratio": s.busbw_ratio, "busbw_z": s.z,
                         "lat_ratio": s.lat_ratio, "lat_z": s.z,
                         "votes": f"{s.slow_with[0]}/{s.slow_with[1]}",
                         "confirmed": f"{s.confirmed[0]}/{s.confirmed[1]}",
                         "verdict": s.verdict})
    return rows


def unmeasured_row(e: Entity) -> EntityRow:
    """An entity no completed pair measured: no ratio, no verdict but that."""
    return {"entity": e.name, "kind": e.kind, "host": ",".join(e.hosts),
            "ranks": ",".join(map(str, e.ranks)), "partners": 0, "busbw_ratio": math.nan,
            "busbw_z": math.nan, "lat_ratio": math.nan, "lat_z": math.nan, "votes": "0/0",
            "confirmed": "", "verdict": Verdict.NOT_MEASURED}


def good_hosts(found: list[Entity], entity_rows: list[EntityRow],
               suspects: list[SuspectRow]) -> list[str]:
    """Hosts that were measured and passed: on at least one entity judged ok or transient,
    and on no entity or suspect that did not pass (bad, hung, inconclusive, not measured).
    A host the run never measured is not good: it is unknown."""
    verdicts = {r["entity"]: r["verdict"] for r in entity_rows if r["kind"] not in GROUPS}
    failed = {h for s in suspects for h in s["hosts"]}
    failed |= {h for e in found if verdicts.get(e.name, Verdict.NOT_MEASURED) not in PASSED
               for h in e.hosts}
    return [h for h in dict.fromkeys(h for e in found for h in e.hosts)
            if h not in failed and any(verdicts.get(e.name) in PASSED
                                       for e in found if h in e.hosts)]
