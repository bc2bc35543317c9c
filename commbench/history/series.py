"""Series: one measured quantity followed across runs, in the order the runs started.

A series is one (op, size, backend, dtype, world size, mesh dim, variant, cluster and, for
alltoallv, routing and split matrix) of the sweeps, valued by its median latency, or one entity of
the locate runs of a cluster, valued by its busbw ratio to the fleet (docs/commands/history.md#add).
Every run is kept in the series for showing; only the complete ones are analysed, so a partial run
is never a baseline.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from commbench.core.sizes import format_size
from commbench.history.changepoints import ChangePoint, find_change_points, verdict
from commbench.history.ingest import EntityRatio, Point, RunLabels

LATENCY = "lat_us_p50"
ENTITY_RATIO = "busbw_ratio"
LOCATE_OP = "locate"


@dataclass(frozen=True)
class SeriesKey:
    op: str
    size_bytes: int
    backend: str
    dtype: str
    world_size: int
    dim: str
    variant: str
    cluster: str
    metric: str = LATENCY
    routing: str = ""  # alltoallv: the routing and split matrix (ingest.Point); '' otherwise
    split_id: str = ""

    @property
    def higher_is_worse(self) -> bool:
        """Latency regresses upwards; an entity's busbw ratio downwards."""
        return self.metric != ENTITY_RATIO

    @property
    def splits(self) -> str:
        """'zipf:1.2 splits 3fa2b1c0de' for an alltoallv series, '' for the others."""
        if not self.split_id:
            return ""
        return " ".join(p for p in (self.routing, f"splits {self.split_id}") if p)

    def label(self) -> str:
        """'allreduce gloo 1M float32 n2 [vm]'; 'alltoallv/dispatch gloo 1M float32 n4
        zipf:1.2 splits 3fa2b1c0de [vm]'; 'locate node3 (node) busbw ratio [c1]'."""
        if self.op == LOCATE_OP:
            return f"locate {self.variant} ({self.dim}) busbw ratio [{self.cluster}]"
        parts = [self.op, self.variant, self.backend, format_size(self.size_bytes), self.dtype,
                 f"n{self.world_size}", f"dim {self.dim}" if self.dim else "", self.splits]
        return " ".join(p for p in parts if p) + f" [{self.cluster}]"

    def slug(self) -> str:
        """A file-name-safe, readable key: history-<slug>.png (the split id, not the
        routing's text, stands for an alltoallv series' matrix: it is short and unique)."""
        parts = ([self.op, self.dim, self.variant] if self.op == LOCATE_OP else
                 [self.op, self.variant, self.backend, format_size(self.size_bytes), self.dtype,
                  f"n{self.world_size}", self.dim, self.split_id])
        text = "-".join(p for p in [*parts, self.cluster] if p)
        return re.sub(r"[^A-Za-z0-9.+=-]+", "_", text)[:150]

    def as_json(self) -> dict:
        return {"op": self.op, "size_bytes": self.size_bytes, "backend": self.backend,
                "dtype": self.dtype, "world_size": self.world_size, "dim": self.dim,
                "variant": self.variant, "cluster": self.cluster, "metric": self.metric,
                "routing": self.routing, "split_id": self.split_id}


@dataclass(frozen=True)
class Observation:
    run: RunLabels
    value: float
    lat_ci: tuple[float | None, float | None] = (None, None)
    busbw_gbps: float | None = None
    algbw_gbps: float | None = None


@dataclass
class Series:
    key: SeriesKey
    observations: list[Observation] = field(default_factory=list)

    @property
    def usable(self) -> list[Observation]:
        """The complete runs: the only ones change points are found in."""
        return [o for o in self.observations if o.run.usable]


@dataclass(frozen=True)
class Finding:
    """A change point with its verdict, placed in its series' complete runs."""

    series: SeriesKey
    change: ChangePoint
    run_id: str
    verdict: str  # regression | improvement
    runs: int  # complete runs in the series

    @property
    def recent(self) -> int:
        """How many complete runs have been made since (and including) the change."""
        return self.runs - self.change.index


def build_series(runs: list[RunLabels], points: Iterable[tuple[str, Point]] = (),
                 entities: Iterable[tuple[str, EntityRatio]] = ()) -> list[Series]:
    """Series from stored rows, each in run start order (``runs`` is in that order)."""
    by_id = {run.run_id: run for run in runs}
    order = {run.run_id: position for position, run in enumerate(runs)}
    found: dict[SeriesKey, list[Observation]] = defaultdict(list)
    for run_id, point in points:
        run = by_id.get(run_id)
        if run is None:
            continue
        key = SeriesKey(point.op, point.size_bytes, point.backend, point.dtype,
                        point.world_size, point.dim, point.variant, run.cluster,
                        routing=point.routing, split_id=point.split_id)
        found[key].append(Observation(run, point.lat_us, (point.lat_ci_lo, point.lat_ci_hi),
                                      point.busbw_gbps, point.algbw_gbps))
    for run_id, entity in entities:
        run = by_id.get(run_id)
        if run is None or entity.busbw_ratio is None:
            continue
        key = SeriesKey(LOCATE_OP, 0, run.backend, "", run.world_size, entity.level,
                        entity.entity, run.cluster, ENTITY_RATIO)
        found[key].append(Observation(run, entity.busbw_ratio))
    return [Series(key, sorted(obs, key=lambda o: order[o.run.run_id]))
            for key, obs in sorted(found.items(), key=lambda item: _reading_order(item[0]))]


def _reading_order(key: SeriesKey) -> tuple:
    """Cluster by cluster, an op's sizes together and ascending."""
    return (key.cluster, key.metric, key.op, key.variant, key.backend, key.dtype,
            key.world_size, key.dim, key.routing, key.split_id, key.size_bytes)


def select(series: list[Series], *, op: str | None = None, size_bytes: int | None = None,
           backend: str | None = None, cluster: str | None = None) -> list[Series]:
    """The series matching every filter given (the op by name or name/pattern)."""
    def keep(key: SeriesKey) -> bool:
        return ((op is None or key.op == op or key.op.split("/")[0] == op)
                and (size_bytes is None or key.size_bytes == size_bytes)
                and (backend is None or key.backend == backend)
                and (cluster is None or key.cluster == cluster))

    return [s for s in series if keep(s.key)]


def changes(series: Series, threshold: float) -> list[Finding]:
    """The change points of one series beyond ``threshold``, with their verdicts."""
    usable = series.usable
    values = [o.value for o in usable]
    findings = []
    for change in find_change_points(values):
        said = verdict(change, threshold, series.key.higher_is_worse)
        if said:
            findings.append(Finding(series.key, change, usable[change.index].run.run_id, said,
                                    len(usable)))
    return findings
