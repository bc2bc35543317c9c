"""locate: find the slow GPU, node, rail or link (SPEC §8). Specs in, exit code out.

The flow, as measure's: refuse bad input before anything starts, create the run folder, launch
(local ranks through the elastic agent, or this process as one rank of an external launcher);
inside the ranks the engine runs the rounds that ``plan`` (the schedule, locate.attribution) and
``follow_up`` (the confirmation of what the main rounds point at) hand it, rank 0 writing each
pair to pairs.jsonl as it is measured. Then the same attribution is read from that file here,
and the files, the table and the exit code follow; a failed run still writes the partial
matrix and exits 3.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from commbench.core.errors import EXIT_FINDING, EXIT_OK, EXIT_RUN_FAILED, UsageError
from commbench.core.sizes import format_size, parse_size
from commbench.results.locate import (
    ENTITIES_CSV,
    ENTITY_COLUMNS,
    PAIR_COLUMNS,
    PAIRS_CSV,
    PairSink,
    read_pairs,
)
from commbench.specs.locate import LEVELS, LocateOutput, LocateSpec, MinEffect

NOT_MEASURED = "not measured"  # an entity no completed pair measured (entities.csv)
GROUPS = ("link", "switch")  # suspects that are not one entity (rows of their own)

if TYPE_CHECKING:
    from commbench.locate.attribution import PairResult



def parse_rounds(text: str) -> str:
    value = text.strip().lower()
    if value in ("full", "quick") or (value.isdigit() and int(value) >= 1):
        return value
    raise UsageError(f"bad --rounds {text!r}: full, quick or a number of rounds (>= 1)")


def parse_sizes(text: str) -> tuple[int, int]:
    """--sizes SMALL,LARGE: latency at the small one, bandwidth at the large one."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) != 2:
        raise UsageError(f"bad --sizes {text!r}: two sizes, the small (latency) and the large "
                         "(bandwidth), e.g. 8,64M")
    small, large = sorted(parse_size(p) for p in parts)
    if small < 4:
        raise UsageError(f"bad --sizes {text!r}: at least 4 bytes (one float32)")
    if small == large:
        raise UsageError(f"bad --sizes {text!r}: the small size (latency) must be smaller "
                         "than the large one (bandwidth), e.g. 8,64M")
    return small, large


def parse_effect(text: str | None, default: MinEffect | None = None) -> MinEffect | None:
    """--min-effect: 10% or 0.1 (both metrics), or busbw=30%,lat=30% (either may be left out:
    it keeps ``default``'s, else it is drawn from the run's noise); None or 'auto': the whole
    line drawn from the noise (commbench.locate.noise)."""
    if text is None or text.strip().lower() == "auto":
        return default
    found = dataclasses.asdict(default or MinEffect(None, None))
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"bad --min-effect {text!r}: a share such as 10% or 0.1, or "
                         "busbw=30%,lat=30%")
    for part in parts:
        metric, _, raw = part.rpartition("=")
        metric = metric.strip().lower()
        if metric not in ("", "busbw", "lat", "latency") or (metric == "" and len(parts) > 1):
            raise UsageError(f"bad --min-effect {text!r}: a share such as 10% or 0.1, or "
                             "busbw=30%,lat=30%")
        value = _share(raw, text)
        for key in (("busbw", "lat") if metric == "" else ("lat",) if metric.startswith("lat")
                    else ("busbw",)):
            found[key] = value
    return MinEffect(**found)


def _share(raw: str, text: str) -> float:
    raw = raw.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"bad --min-effect {text!r}: a share such as 10% or 0.1, or "
                         "busbw=30%,lat=30%") from None
    if not 0 <= value < 10:
        raise UsageError(f"bad --min-effect {text!r}: between 0% and 1000%")
    return value


# ---- what rank 0 calls inside the run (pure, through analysis) --------------------------------

def plan_rounds(spec: LocateSpec, hosts: list[dict]) -> tuple[list[dict], list]:
    """Entities of the level and the main rounds, as the ranks will run them."""
    from commbench.locate import attribution as locate
    from commbench.locate import fleet

    level = spec.level or fleet.default_level(hosts)
    found = fleet.entities(level, hosts)
    if len(found) < 2:
        return [asdict(e) for e in found], []
    rounds = locate.schedule(len(found), spec.rounds, spec.seed, leaves_of(spec, found))
    return [asdict(e) for e in found], fleet.rank_rounds(level, found, rounds)


def follow_up(spec: LocateSpec, found: list[dict], records: list[dict]) -> list:
    """The next batch of retests of the candidates whose pooled evidence has not settled
    (none: all settled); the ranks call it until it returns none, ``retest_batches`` times
    at most."""
    from commbench.locate import confirmation, fleet

    entities = [_entity(e) for e in found]
    if not entities:
        return []
    pairs = [pair_result(r) for r in records]
    rounds = confirmation.next_rounds(len(entities), pairs, entities[0].kind, spec.min_effect,
                                      spec.confirm, leaves_of(spec, entities))
    return fleet.rank_rounds(entities[0].kind, entities, rounds)


def retest_batches(spec: LocateSpec, entities: int) -> int:
    """The cap on retest batches for a fleet of ``entities`` (locate.confirmation.batches)."""
    from commbench.locate import confirmation

    return confirmation.batches(entities, spec.follow_ups)


def leaves_of(spec: LocateSpec, entities: list) -> tuple[str | None, ...]:
    """Each entity's leaf switch from --topology (empty without one)."""
    if not spec.topology:
        return ()
    from commbench.locate.topology import Topology, entity_leaves

    return tuple(entity_leaves(Topology.from_rows(spec.topology), entities))


def read_topology(spec: LocateSpec, env) -> LocateSpec:
    """--topology FILE read (one line of error for a bad one, before anything starts), and
    checked against the run's hosts where they are known now: this host for local ranks, the
    SLURM node list under srun; under other launchers only the ranks know them."""
    if spec.topology_file is None:
        if spec.level == "switch":
            raise UsageError("--level switch needs --topology FILE: which leaf switch each "
                             "host is under ('host leaf [spine]' lines or a SLURM "
                             "topology.conf)")
        return spec
    from commbench.locate import topology

    found = topology.read(spec.topology_file)
    topology.check_hosts(found, _known_hosts(env))
    return dataclasses.replace(spec, topology=found.rows())


def _known_hosts(env) -> list[str]:
    if env is None:
        import socket

        return [socket.gethostname()]
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if nodelist:
        from commbench.launch.environment import hostnames

        return hostnames(nodelist)
    return []


def verdict_code(spec: LocateSpec, found: list[dict], records: list[dict]) -> int:
    """The run's exit code as ``finish`` will judge it (in the ranks, so that every rank's
    exit code is rank 0's): 1 something bad, 0 nothing bad, 3 nothing measured."""
    view = findings([_entity(e) for e in found], records, spec)
    return _exit_code(view)


def _exit_code(view: dict) -> int:
    if not view["measured_pairs"]:
        return EXIT_RUN_FAILED  # no pair measured is no verdict, never "no suspect"
    return EXIT_FINDING if any(s["verdict"].startswith("bad")
                               for s in view["suspects"]) else EXIT_OK


def _entity(found: dict):
    from commbench.locate.fleet import Entity

    return Entity(found["index"], found["kind"], found["name"], tuple(found["hosts"]),
                  tuple(found["ranks"]))


def pair_result(record: dict) -> PairResult:
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


# ---- the command ------------------------------------------------------------------------------

def run_locate(spec: LocateSpec, output: LocateOutput) -> int:
    from commbench import collectives
    from commbench.engine.failures import explain
    from commbench.launch import detect
    from commbench.launch.backends import resolve_backends
    from commbench.launch.ranks import LaunchConfig, check_nproc, place, run_ranks
    from commbench.output.console import say

    env = detect()
    check_nproc(env, spec.nproc)
    if spec.level is not None and spec.level not in LEVELS:
        raise UsageError(f"bad --level {spec.level!r}: gpu, node, rail or switch (with "
                         "--topology)")
    spec = read_topology(spec, env)
    if spec.level in ("node", "rail", "switch") and _one_node(env):
        raise UsageError(f"--level {spec.level} needs several nodes, and every rank of this "
                         "run is on one: use --level gpu (the default here)")
    if spec.confirm < 0:
        raise UsageError(f"bad --confirm {spec.confirm}: 0 or more partners")
    if spec.backend not in ("auto", "gloo", "nccl"):
        raise UsageError(f"bad --backend {spec.backend!r}: gloo, nccl or auto")
    backend = resolve_backends((spec.backend,))[0]
    placement = place(spec.nproc, (backend,), default=None if backend == "nccl" else 4)
    world = placement.world
    if world < 2:
        raise UsageError(f"locate needs at least 2 ranks to pair (got {world})")
    device = "cuda" if backend == "nccl" else "cpu"
    from commbench.locate.rank import LocateJob, run_locate_rank  # torch: input known good

    large_window = 1 if spec.large >= 4 << 20 else 8
    job = LocateJob(op=collectives.get("p2p"), pattern="bidir", backend=backend, device=device,
                    small=spec.small, large=spec.large, timeout=spec.timeout,
                    plan=functools.partial(plan_rounds, spec),
                    follow_up=functools.partial(follow_up, spec),
                    verdict=functools.partial(verdict_code, spec), window=large_window,
                    batches=functools.partial(retest_batches, spec),
                    config=asdict(spec))
    if output.history and placement.rank0:  # a typo in the URL is refused now, not after
        from commbench.history import check_store_url

        check_store_url(output.history)
    config = LaunchConfig(placement, (backend,), spec.timeout, device == "cuda", what="locate",
                          out=output.out, name=output.name, force=output.force,
                          command_line=tuple(output.command_line), meta={"command": "locate"},
                          waiting="the pairs of a round share the cores, which locate's "
                          "per-round median absorbs, but noise grows")
    folder: list[Path] = []
    finished: dict = {}

    def sinks(writer):
        from commbench.output.locate import RoundsBar

        folder.append(writer.path)
        # A live bar on a terminal only (a log or CI gets no redraws; --json keeps stdout
        # clean).
        return RoundsBar(PairSink(writer), sys.stdout.isatty() and not output.json_out)

    if env is not None and placement.rank0:
        # Under a launcher, rank 0 finishes the folder inside the run, while the other ranks
        # wait for its verdict: were they to exit first, torchrun would stop rank 0 mid-write.
        def finish_in_rank(found_entities, records) -> int:
            finished.update(finish(folder[0], spec, output, "", backend))
            return finished["code"]

        job = dataclasses.replace(job, verdict=finish_in_rank)
    launched = run_ranks(config, run_locate_rank, job, sinks, say=say, explain=explain)
    path = launched.path
    if path is None:  # every rank exits as rank 0 will
        return int(launched.value)
    failure = launched.failure
    error = str(failure) if failure is not None else ""
    found = finished if finished and not error else finish(path, spec, output, error, backend)
    _add_to_history(output, path, failed=bool(error))
    if failure is not None:
        say(f"kept the {found['pairs']} measured pair(s) in {path}")
        return failure.exit_code
    return found["code"]


def _add_to_history(output: LocateOutput, path: Path, failed: bool) -> None:
    """``--history``: the run goes into the store as it ended (SPEC §11)."""
    if output.history:
        from commbench.history import add_ended_run
        from commbench.output.console import say

        add_ended_run(output.history, path, failed, say)


def _one_node(env) -> bool:
    """Whether every rank is known to be on this node: local ranks (--nproc), or a launcher
    whose local world is the whole world (or that says one node). Node and rail levels have
    one entity there: nothing to pair, and a run that measures nothing must not start."""
    return env is None or env.local_world == env.world or env.nnodes == 1


def finish(path: Path, spec: LocateSpec, output: LocateOutput, error: str,
           backend: str) -> dict:
    """Attribution from pairs.jsonl, every file of the folder, the console; what was found."""
    from commbench import results
    from commbench.output.console import say

    records = read_pairs(path)
    meta = results.read_meta(path)
    found = [_entity(e) for e in meta.get("entities", [])]
    from commbench.locate.attribution import Z_LIMIT

    view = findings(found, records, spec)
    if not view["measured_pairs"]:
        status = "failed"  # no pair: no verdict, whatever stopped it
        error = error or (f"measured no pair: {len(found)} {spec.level or 'gpu'} "
                          "entit(ies) at this level, nothing to pair")
    else:
        status = "complete" if not error else "partial"
    head = {"entities": len(found), "level": found[0].kind if found else spec.level or "gpu",
            "pairs": view["main_pairs"], "rounds": view["rounds"],
            "confirm_rounds": view["confirm_rounds"], "large": format_size(spec.large),
            "small": format_size(spec.small), "min_effect": _line_share(view["line"], spec),
            "min_effect_line": _line_words(view["line"], spec),
            "z_limit": Z_LIMIT, "backend": backend, "status": status,
            "measured_pairs": view["measured_pairs"],
            "leaves": len({leaf for leaf in view["leaves"] if leaf is not None})}
    meta.update(status=status, error=error or None, end_time=results.now(),
                suspects=view["suspects"], transient=view["transient"],
                min_effect=_line_dict(view["line"]))
    writer = results.RunWriter(path)
    writer.update(meta)
    _write_files(path, found, records, view, head, meta)
    from commbench.output.locate import console_lines

    lines = console_lines(view["suspects"], view["transient"], head)
    stream = sys.stderr if output.json_out else sys.stdout
    for line in lines:
        print(line, file=stream)
    print(f"results: {path}", file=stream, flush=True)
    if not view["measured_pairs"]:
        say(f"error: {error}")
    if output.json_out:
        summary = {"entities": len(found), "pairs": view["main_pairs"],
                   "rounds": view["rounds"], "level": head["level"], "status": status,
                   "suspects": [_json_suspect(s) for s in view["suspects"]],
                   "transient": [_json_suspect(s) for s in view["transient"]],
                   "min_effect": _line_dict(view["line"]), "results": str(path)}
        print(json.dumps(summary), flush=True)
    return {"pairs": len(records), "code": _exit_code(view)}


def _line_share(line, spec: LocateSpec) -> str:
    """The line in short ('12% (busbw) / 10% (latency)'), for the verdict's sentence."""
    if line is not None:
        return line.short()
    return spec.min_effect.words() if spec.min_effect is not None else "the noise-drawn line"


def _line_words(line, spec: LocateSpec) -> str:
    """The line and where it came from: 'busbw 14% (4.0 x measured noise 0.034), lat 10%
    (floor; measured noise 0.012)'; nothing measured: what it would have been drawn from."""
    if line is not None:
        return line.words()
    if spec.min_effect is not None and None not in (spec.min_effect.busbw, spec.min_effect.lat):
        return f"{spec.min_effect.words()} (--min-effect)"
    return "from the run's noise (nothing measured to draw it from)"


def _line_dict(line) -> dict | None:
    return line.as_dict() if line is not None else None


def _json_suspect(s: dict) -> dict:
    def number(value):
        return None if value is None or not math.isfinite(value) else round(value, 4)

    return {"kind": s["kind"], "entity": s["entity"], "ranks": s["ranks"], "hosts": s["hosts"],
            "busbw_ratio": number(s["busbw_ratio"]), "lat_ratio": number(s["lat_ratio"]),
            "evidence": s["evidence"], "confirmed": s["confirmed"], "verdict": s["verdict"],
            "metric": s.get("metric"), "interval": [number(v) for v in s.get("interval", [])],
            "measurements": s.get("measurements"), "z": number(s.get("pooled_z"))}


def findings(found: list, records: list[dict], spec: LocateSpec) -> dict:
    """The attribution of the pairs measured, as plain rows for the files and the console."""
    from commbench.locate import attribution as locate
    from commbench.locate import confirmation

    n = len(found)
    pairs = [pair_result(r) for r in records]
    names = [e.name for e in found]
    main = [p for p in pairs if p.phase == "main"]
    empty = {"suspects": [], "transient": [], "entities": [], "attribution": None,
             "main_pairs": len(main), "rounds": len({p.round for p in main}),
             "measured_pairs": sum(1 for p in pairs if p.status in ("ok", "wrong")),
             "confirm_rounds": len({p.round for p in pairs if p.phase != "main"}),
             "leaves": leaves_of(spec, found), "line": None}  # line: nothing judged
    if n < 2 or not main:
        return dict(empty, entities=[_unmeasured_row(e) for e in found])
    kind = found[0].kind
    decided = confirmation.judge(n, pairs, kind, spec.min_effect, names, spec.confirm,
                                 empty["leaves"])
    attribution = decided.attribution
    # A candidate whose pooled evidence came out ok is no suspect (its entity row says ok).
    judged = [s for s in decided.suspects if s.verdict != "ok" or s.kind not in GROUPS]
    judged += locate.hung_suspects(pairs, names)
    judged += locate.wrong_suspects(n, pairs, names, kind)
    rows = [_suspect_row(s, found) for s in judged]
    # the --min-effect line judged against: given, or drawn from the main matrix's noise
    view = dict(empty, attribution=attribution, line=decided.line)
    view["suspects"] = [r for r in rows if r["verdict"] not in ("transient", "ok")]
    view["transient"] = [r for r in rows if r["verdict"] == "transient"]
    view["entities"] = _entity_rows(found, attribution, judged)
    return view


def _suspect_row(s, found: list) -> dict:
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
            "interval": _ratio_interval(s)}


def _ratio_interval(s) -> list[float]:
    """The pooled effect's 95 % interval as ratios to the fleet median, in the metric's own
    direction (busbw and speed: < 1 slower; latency: > 1 slower), low to high."""
    low, high = s.interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return [math.nan, math.nan]
    if s.metric == "lat":
        return [math.exp(-high), math.exp(-low)]
    return [math.exp(low), math.exp(high)]


def _entity_rows(found: list, attribution, judged) -> list[dict]:
    busbw, lat = attribution.scores["busbw"], attribution.scores["lat"]
    verdicts = {s.entities[0]: s for s in judged if s.kind not in GROUPS}
    rows = []
    for e in found:
        s = verdicts.get(e.index)
        slow, partners = busbw.slow_with.get(e.index, (0, 0))
        if s is None and not partners:
            rows.append(_unmeasured_row(e))
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
            "verdict": s.verdict if s else "ok"})
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


def _unmeasured_row(e) -> dict:
    """An entity no completed pair measured: no ratio, no verdict but that."""
    return {"entity": e.name, "kind": e.kind, "host": ",".join(e.hosts),
            "ranks": ",".join(map(str, e.ranks)), "partners": 0, "busbw_ratio": math.nan,
            "busbw_z": math.nan, "lat_ratio": math.nan, "lat_z": math.nan, "votes": "0/0",
            "confirmed": "", "verdict": NOT_MEASURED}


def good_hosts(found: list, entity_rows: list[dict], suspects: list[dict]) -> list[str]:
    """Hosts that were measured and passed: on at least one entity judged ok or transient,
    and on no entity or suspect that did not pass (bad, hung, inconclusive, not measured).
    A host the run never measured is not good: it is unknown."""
    passed = {"ok", "transient"}
    verdicts = {r["entity"]: r["verdict"] for r in entity_rows if r["kind"] not in GROUPS}
    failed = {h for s in suspects for h in s["hosts"]}
    failed |= {h for e in found if verdicts.get(e.name, NOT_MEASURED) not in passed
               for h in e.hosts}
    return [h for h in dict.fromkeys(h for e in found for h in e.hosts)
            if h not in failed and any(verdicts.get(e.name) in passed
                                       for e in found if h in e.hosts)]


def _write_files(path: Path, found: list, records: list[dict], view: dict, head: dict,
                 meta: dict) -> None:
    from commbench.locate import attribution as locate
    from commbench.output import heatmap
    from commbench.output.locate import summary_markdown, write_csv, write_matrix

    labels = [_label(e, found) for e in found]
    rows = []
    for r in records:
        a, b = found[r["a"]], found[r["b"]]
        rows.append({**r, "entity_a": labels[r["a"]], "entity_b": labels[r["b"]],
                     "hosts": ";".join(dict.fromkeys((*a.hosts, *b.hosts))),
                     "ranks": ";".join(f"{x}-{y}" for x, y in r["ranks"])})
    write_csv(path / PAIRS_CSV, rows, PAIR_COLUMNS)
    write_csv(path / ENTITIES_CSV, view["entities"], ENTITY_COLUMNS)
    pairs = [pair_result(r) for r in records]
    n = len(found)
    for metric in ("busbw", "lat"):
        write_matrix(path / f"matrix_{metric}.csv", locate.matrix(n, pairs, metric, False),
                     labels)
    bad_entities = sorted({i for s in view["suspects"] if s["kind"] not in GROUPS
                           for i in s["entities"]})
    groups = None
    if view["leaves"]:  # rows and columns by leaf, a suspect switch's leaf named in red
        groups = heatmap.Groups(view["leaves"], frozenset(
            s["entity"] for s in view["suspects"] if s["kind"] == "switch"))
    links = [tuple(s["entities"]) for s in view["suspects"] if s["kind"] == "link"]
    titles = {"busbw": f"busbw of each pair (fastest decile of calls, {head['large']}B)",
              "lat": f"latency of each pair (fastest call, {head['small']}B)"}
    for metric, slower_high in (("busbw", False), ("lat", True)):
        if n >= 2:
            column = "busbw_ratio" if metric == "busbw" else "lat_ratio"
            heatmap.heatmap(path / f"heatmap_{metric}.png", locate.matrix(n, pairs, metric),
                            labels, f"locate: {titles[metric]} / fleet median", slower_high,
                            bad_entities, links,
                            [r[column] for r in view["entities"] if r["kind"] not in GROUPS],
                            groups)
    bad_hosts = list(dict.fromkeys(h for s in view["suspects"] if s["verdict"].startswith("bad")
                                   or s["verdict"] == "hung" for h in s["hosts"]))
    (path / "bad-hosts.txt").write_text("".join(f"{h}\n" for h in bad_hosts))
    passed = good_hosts(found, view["entities"], view["suspects"])
    (path / "good-hosts.txt").write_text("".join(f"{h}\n" for h in passed))
    (path / "summary.md").write_text(summary_markdown(view["suspects"], view["transient"],
                                                      head, view["entities"], meta))


def _label(entity, found: list) -> str:
    """An entity's axis label: with its host where the fleet spans several."""
    hosts = {h for e in found for h in e.hosts}
    if entity.kind == "gpu" and len(hosts) > 1:
        return f"{entity.hosts[0]}:{entity.ranks[0]}"
    return entity.name
