"""Read-only: the past medians of the series that compared rows belong to, for compare's
``--noise-from STORE`` (docs/commands/compare.md, "Noise from a history").

A compared row names its series as the store does (ingest.sweep_points: op and pattern,
variant, size, backend, dtype, world size, mesh dim) within one cluster: the baseline run's
cluster where the store holds the baseline, else the cluster named after the baseline's hosts
(the store's default), else the only cluster that has the series. Only complete runs count,
and the runs being compared (``leave_out``) never do: a regressed new run must not widen the
interval that judges it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from commbench.history.ingest import _variant
from commbench.results.schema import op_label


@dataclass(frozen=True)
class PastMedians:
    """Per compared row, its series' past complete-run medians (empty: no such series)."""

    cluster: str | None
    medians: list[list[float]]
    note: str = ""


def row_series(row: Mapping) -> tuple:
    """The store's series key of a result row, cluster aside."""
    return (op_label(row["op"], row.get("pattern")), _variant(row), int(row["size_bytes"]),
            str(row["backend"]), str(row.get("dtype") or ""), int(row.get("world_size") or 0),
            str(row.get("dim") or ""))


def past_medians(url: str, rows: Iterable[Mapping], base_name: str, base_hosts: Iterable[str],
                 leave_out: Iterable[str] = ()) -> PastMedians:
    """For each of ``rows`` (compared rows: keys of the baseline), the medians of its series'
    complete past runs. Raises the store's errors (UsageError: exit 2; StoreUnreachable: 3)."""
    from commbench.history.store import Store

    rows = list(rows)
    left_out = set(leave_out)
    with Store(url) as store:
        runs = store.runs()
        points = store.points()
    by_id = {run.run_id: run for run in runs}
    order = {run.run_id: index for index, run in enumerate(runs)}
    wanted = {row_series(row) for row in rows}
    found: dict[tuple, list[tuple[int, float]]] = {}
    for run_id, point in points:
        run = by_id.get(run_id)
        if run is None or not run.usable or run_id in left_out:
            continue
        key = (point.op, point.variant, point.size_bytes, point.backend, point.dtype,
               point.world_size, point.dim)
        if key in wanted:
            found.setdefault((run.cluster, *key), []).append((order[run_id], point.lat_us))
    clusters = {key[0] for key in found}
    note = ""
    if base_name in by_id:
        cluster = by_id[base_name].cluster
    elif ",".join(sorted(set(base_hosts))) in clusters:
        cluster = ",".join(sorted(set(base_hosts)))
    elif len(clusters) == 1:
        cluster = next(iter(clusters))
        note = (f"{base_name} is not in the store: its series are taken from cluster "
                f"{cluster}, the only one that has them")
    else:
        cluster = None
        note = (f"{base_name} is not in the store and its hosts name none of its clusters "
                f"({', '.join(sorted(clusters)) or 'none has these series'})")
    medians = [[value for _, value in sorted(found.get((cluster, *row_series(row)), []))]
               for row in rows]
    return PastMedians(cluster, medians, note)
