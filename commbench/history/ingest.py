"""A run folder read into what the history store keeps: one record of labels, the series points of
a sweep, and the per-entity ratios of a locate run.

The store keeps one number per (run, series), not the raw samples: the run folder is the archive,
the history is the index over many of them. A ``--repeat`` run contributes the median over its
launches, and only the rows over every group (``--per-group`` rows are a finer view of the same
measurement, which would otherwise be counted twice). Labels come from run.json, overridable
by the caller: cluster (default the host list), commit (default ``$GITHUB_SHA`` or
``$CI_COMMIT_SHA``), torch / NCCL / commbench versions, world size, backend.

A row that names a split matrix (alltoallv's ``split_id``) keeps it in its point with the run's
routing (``--routing`` as run.json's config holds it): a uniform and a zipf run of one op and
size move different bytes between different ranks, so they are two series, not one series
with a step where the routing changed.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from commbench.core.errors import UsageError
from commbench.results import JSONL, RUN_JSON, load_run, read_meta
from commbench.results.locate import ENTITIES_CSV, PAIRS_JSONL
from commbench.results.schema import is_combined, op_label

COMMIT_VARIABLES = ("GITHUB_SHA", "CI_COMMIT_SHA")
STATUSES = ("complete", "partial", "failed")


@dataclass(frozen=True)
class RunLabels:
    """One run as the store indexes it. ``start_time`` is UTC ISO-8601 to the second, so that
    text order is time order in every database."""

    run_id: str
    start_time: str
    status: str
    kind: str  # sweep | locate
    cluster: str
    commit: str = ""
    torch: str = ""
    nccl: str = ""
    commbench: str = ""
    world_size: int = 0
    backend: str = ""
    hosts: str = ""
    path: str = ""

    @property
    def usable(self) -> bool:
        """Only a complete run may be a baseline (docs/commands/history.md#check): a partial one is
        kept and shown."""
        return self.status == "complete"


@dataclass(frozen=True)
class Point:
    """One series' value in one run: the median latency (and its interval) and the bandwidths."""

    op: str
    variant: str
    size_bytes: int
    backend: str
    dtype: str
    world_size: int
    dim: str
    lat_us: float
    lat_ci_lo: float | None = None
    lat_ci_hi: float | None = None
    busbw_gbps: float | None = None
    algbw_gbps: float | None = None
    # alltoallv: the routing as written (zipf:1.2, nccl-tests generated) and the split
    # matrix's id (splits-<id>.csv; "unknown" where an import could not know it). '' for the
    # ops without one, and for points stored before the store kept them (schema 1).
    routing: str = ""
    split_id: str = ""


@dataclass(frozen=True)
class EntityRatio:
    """A locate run's verdict on one entity (or link): its busbw and latency against the fleet."""

    level: str
    entity: str
    kind: str
    hosts: str
    busbw_ratio: float | None
    lat_ratio: float | None
    verdict: str


@dataclass(frozen=True)
class IngestedRun:
    labels: RunLabels
    points: tuple[Point, ...] = ()
    entities: tuple[EntityRatio, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def utc_text(value: str) -> str:
    """A run.json time as UTC ISO text; a time without a zone is taken as UTC."""
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def _start_time(folder: Path, meta: Mapping) -> tuple[str, list[str]]:
    """start_time; else end_time; else the folder's file time, said in a note (an imported
    nccl-tests or OSU run may carry neither)."""
    for key in ("start_time", "end_time"):
        if meta.get(key):
            try:
                return utc_text(meta[key]), []
            except ValueError:
                raise UsageError(f"{folder / RUN_JSON}: bad {key} {meta[key]!r}") from None
    newest = max((p.stat().st_mtime for p in (folder / RUN_JSON, folder / JSONL,
                                              folder / PAIRS_JSONL) if p.exists()), default=0.0)
    stamp = datetime.fromtimestamp(newest, timezone.utc).isoformat(timespec="seconds")
    return stamp, [f"{folder.name}: run.json has no start_time: ordered by its files' time "
                   f"({stamp})"]


def _variant(row: Mapping) -> str:
    """What else makes two rows of one op measure different things (compare keeps them apart),
    as far as the op's descriptor says the option means something for it: a reduce op other
    than sum, the in-place form where torch offers both, a root other than 0; and a load
    beside it (--overlap, --background)."""
    from commbench import collectives

    try:
        op = collectives.get(str(row["op"]))
    except KeyError:  # an imported op commbench does not measure itself: keep what it says
        op = None
    parts = []
    if row.get("reduce_op") not in (None, "", "sum") and (op is None or op.reduces):
        parts.append(str(row["reduce_op"]))
    if row.get("inplace") and (op is None or op.has_in_place):
        parts.append("inplace")
    if row.get("root") not in (None, 0) and (op is None or op.rooted):
        parts.append(f"root={row['root']}")
    # --overlap / --background: a series of its own, never one with the collective alone
    parts += [f"{column}={row[column]}" for column in ("overlap", "background")
              if row.get(column)]
    return ",".join(parts)


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _median(values: list) -> float | None:
    present = [v for v in (_number(x) for x in values) if v is not None]
    return statistics.median(present) if present else None


def run_routing(meta: Mapping) -> str:
    """The routing a run's split matrices were drawn from, as ``--routing`` is written: from
    run.json's config (a measured run: its op options, where an absent routing is the
    default, uniform), else run.json's ``routing`` (an import says what it knows), else ''."""
    config = meta.get("config") if isinstance(meta.get("config"), Mapping) else {}
    for entry in config.get("op_options") or ():
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] == "routing":
            return _routing_text(entry[1])
    return str(meta.get("routing") or "")


def _routing_text(value) -> str:
    """A routing as run.json holds it (collectives.routing.Routing written as an object; None
    when the option was not given) -> its option text: uniform, zipf:1.2, hot:2:0.5, file:P."""
    from commbench.collectives.routing import Routing

    if value is None:
        return "uniform"
    if isinstance(value, Mapping):
        try:
            return Routing(kind=str(value.get("kind") or "uniform"),
                           exponent=float(value.get("exponent") or 0.0),
                           hot=int(value.get("hot") or 0),
                           share=float(value.get("share") or 0.0),
                           path=str(value.get("path") or "")).text
        except (TypeError, ValueError):
            return str(value.get("kind") or "")
    return str(value)


def sweep_points(rows: list[dict], routing: str = "") -> tuple[Point, ...]:
    """One point per series of a sweep: --per-group rows left out, --repeat launches pooled.
    ``routing``: the run's (``run_routing``), kept with the points of rows naming a split."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        if not is_combined(row):
            continue
        split_id = str(row.get("split_id") or "")
        key = (op_label(row["op"], row.get("pattern")), _variant(row), int(row["size_bytes"]),
               str(row["backend"]), str(row.get("dtype") or ""),
               int(row.get("world_size") or 0), str(row.get("dim") or ""),
               routing if split_id else "", split_id)
        groups[key].append(row)
    points = []
    for (*key, routed, split_id), members in groups.items():
        lat = _median([r["lat_us_p50"] for r in members])
        if lat is None:
            continue
        points.append(Point(*key, lat_us=lat,
                            lat_ci_lo=_median([r.get("lat_us_ci_lo") for r in members]),
                            lat_ci_hi=_median([r.get("lat_us_ci_hi") for r in members]),
                            busbw_gbps=_median([r.get("busbw_gbps") for r in members]),
                            algbw_gbps=_median([r.get("algbw_gbps") for r in members]),
                            routing=routed, split_id=split_id))
    return tuple(sorted(points, key=lambda p: (p.op, p.variant, p.backend, p.dim, p.routing,
                                               p.split_id, p.size_bytes)))


def entity_ratios(folder: Path, level: str) -> tuple[EntityRatio, ...]:
    """entities.csv of a locate run (written by commands/locate.py when the run ends)."""
    path = folder / ENTITIES_CSV
    if not path.exists():
        return ()
    try:
        with path.open(newline="") as handle:
            records = list(csv.DictReader(handle))
    except (OSError, csv.Error) as error:
        raise UsageError(f"cannot read {path}: {error}") from None
    return tuple(EntityRatio(level=level, entity=r.get("entity", ""), kind=r.get("kind", ""),
                             hosts=r.get("host", ""), busbw_ratio=_number(r.get("busbw_ratio")),
                             lat_ratio=_number(r.get("lat_ratio")),
                             verdict=r.get("verdict", "")) for r in records if r.get("entity"))


def _labels(folder: Path, meta: Mapping, kind: str, status: str, rows: list[dict],
            cluster: str | None, commit: str | None,
            env: Mapping[str, str]) -> tuple[RunLabels, list[str]]:
    start, notes = _start_time(folder, meta)
    hosts = [str(h) for h in meta.get("hosts") or []]
    versions = meta.get("versions") or {}
    backends = meta.get("backends") or sorted({str(r["backend"]) for r in rows})
    if not backends and isinstance(meta.get("config"), dict):
        backends = [meta["config"].get("backend") or ""]
    world = meta.get("world_size") or max((int(r.get("world_size") or 0) for r in rows),
                                           default=0)
    if commit is None:
        commit = next((env[name] for name in COMMIT_VARIABLES if env.get(name)), "")
    labels = RunLabels(
        run_id=str(meta.get("name") or folder.name), start_time=start, status=status, kind=kind,
        cluster=cluster or ",".join(sorted(set(hosts))) or "unknown", commit=commit or "",
        torch=str(versions.get("torch") or ""), nccl=str(versions.get("nccl") or ""),
        commbench=str(versions.get("commbench") or ""), world_size=int(world or 0),
        backend=",".join(str(b) for b in backends if b), hosts=",".join(hosts),
        path=str(folder.resolve()))
    return labels, notes


def _status(meta: Mapping) -> str:
    """A run that never said how it ended (killed with its launcher) is partial, not complete."""
    status = str(meta.get("status") or "")
    return status if status in STATUSES else "partial"


def read_run_folder(path: str | Path, *, cluster: str | None = None, commit: str | None = None,
                    env: Mapping[str, str] | None = None) -> IngestedRun:
    """A sweep or locate run folder as the store keeps it; anything else is refused (exit 2)."""
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"{path} is not a run folder (no such folder)")
    env = os.environ if env is None else env
    meta = read_meta(folder)
    if (folder / PAIRS_JSONL).exists() or meta.get("command") == "locate":
        if not (folder / RUN_JSON).exists():
            raise UsageError(f"{path} is not a run folder (no {RUN_JSON})")
        level = str((meta.get("config") or {}).get("level") or "")
        entities = entity_ratios(folder, level)
        if entities and not level:
            level = entities[0].kind
            entities = tuple(EntityRatio(level, *_rest(e)) for e in entities)
        labels, notes = _labels(folder, meta, "locate", _status(meta), [], cluster, commit, env)
        return IngestedRun(labels, (), entities, tuple(notes))
    if not (folder / JSONL).exists():
        raise UsageError(f"{path} is not a run folder (no {JSONL}, and no {PAIRS_JSONL} of a "
                         "locate run)")
    run = load_run(folder)
    labels, notes = _labels(folder, run.meta, "sweep", _status(run.meta), run.rows, cluster,
                            commit, env)
    return IngestedRun(labels, sweep_points(run.rows, run_routing(run.meta)), (),
                       tuple([*run.warnings, *notes]))


def _rest(entity: EntityRatio) -> tuple:
    return (entity.entity, entity.kind, entity.hosts, entity.busbw_ratio, entity.lat_ratio,
            entity.verdict)


def describe(run: IngestedRun) -> str:
    """'night-03 (complete, 3 series, cluster vm)' for the one-line messages."""
    what = (f"{len(run.points)} series" if run.labels.kind == "sweep"
            else f"{len(run.entities)} entity ratios")
    return f"{run.labels.run_id} ({run.labels.status}, {what}, cluster {run.labels.cluster})"
