"""Two locate runs side by side (before / after a repair): per entity and per link, the level
then and now and what the verdict became. Pure: pair records and entity rows in, rows out.

An entity's level is the median over its partners of the pairs' judged values (busbw of the
fastest decile of calls, latency of the fastest call), the same numbers the attribution read;
a link's is its pair's. Ratios are after / before: busbw above 1 and latency below 1 are
faster.

What it says is what it measured: an entity or link one run did not measure (a node left out
of the second launch, a pair ``--rounds quick`` did not draw, a run stopped early) is ``not
measured`` on that side, never ``repaired`` nor ``ok``, and a gate fails on it: a bad node
that was simply not there the second time has not been repaired.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def levels(records: Sequence[dict], names: Sequence[str]) -> tuple[dict, dict]:
    """(entity name -> (busbw, latency), 'a - b' -> (busbw, latency)) over the main pairs."""
    per_entity: dict[str, list[tuple[float, float]]] = {}
    per_link: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if r.get("phase") != "main" or r.get("status") != "ok":
            continue
        value = (r.get("busbw_p10_gbps", r["busbw_gbps"]), r.get("lat_us_min", r["lat_us_p50"]))
        a, b = names[r["a"]], names[r["b"]]
        per_entity.setdefault(a, []).append(value)
        per_entity.setdefault(b, []).append(value)
        per_link.setdefault(" - ".join(sorted((a, b))), []).append(value)

    def median(values):
        arr = np.asarray(values, dtype=float)
        return float(np.median(arr[:, 0])), float(np.median(arr[:, 1]))

    return ({k: median(v) for k, v in per_entity.items()},
            {k: median(v) for k, v in per_link.items()})


NOT_MEASURED = "not measured"
FAILING = ("new", "still bad", NOT_MEASURED)  # changes --fail-on-regression fails on


def change(before: str, after: str) -> str:
    """What happened to a verdict: repaired, still bad, new, ok, or not measured (a side
    that has no measurement of it: nothing can be said)."""
    if NOT_MEASURED in (before, after):
        return NOT_MEASURED
    was, now = before.startswith("bad") or before == "hung", after.startswith("bad") or \
        after == "hung"
    if was and not now:
        return "repaired"
    if was and now:
        return "still bad"
    if now:
        return "new"
    return "ok"


def compare(before: dict, after: dict) -> list[dict]:
    """Rows for every entity in either run, then every link a run called bad or both measured.

    ``before`` / ``after``: {"records": pair records, "names": entity names in index order,
    "verdicts": name -> verdict (entities and links)}."""
    ents_b, links_b = levels(before["records"], before["names"])
    ents_a, links_a = levels(after["records"], after["names"])
    rows = []
    for name in dict.fromkeys([*before["names"], *after["names"]]):
        rows.append(_row("entity", name, ents_b.get(name), ents_a.get(name),
                         _entity_verdict(before, ents_b, name),
                         _entity_verdict(after, ents_a, name)))
    flagged = {" - ".join(sorted(k.split(" - "))) for run in (before, after)
               for k, v in run["verdicts"].items() if " - " in k and v != "ok"}
    for key in sorted(set(links_b) & set(links_a) | flagged):
        rows.append(_row("link", key, links_b.get(key), links_a.get(key),
                         _link_verdict(before, links_b, key),
                         _link_verdict(after, links_a, key)))
    return rows


def _measured(run: dict, measured: dict, name: str) -> bool:
    """Whether a run measured it: a level from its pairs, or a verdict that needs no level
    (a pair that hung or returned wrong data was measured, and failed)."""
    return name in measured or run["verdicts"].get(name, "ok") not in ("ok", "-", "", NOT_MEASURED)


def _entity_verdict(run: dict, measured: dict, name: str) -> str:
    if not _measured(run, measured, name):
        return NOT_MEASURED
    return run["verdicts"].get(name, "ok")


def unmeasured(rows: Sequence[dict]) -> dict[str, list[str]]:
    """'before' / 'after' -> the entities and links that side did not measure."""
    return {side: [r["entity"] for r in rows if r[side] == NOT_MEASURED]
            for side in ("before", "after")}


def entity_counts(run: dict) -> tuple[int, int]:
    """(entities of the run, entities it measured with at least one pair)."""
    measured, _ = levels(run["records"], run["names"])
    return len(run["names"]), sum(1 for name in run["names"] if name in measured)


def _link_verdict(run: dict, measured: dict, key: str) -> str:
    for name, verdict in run["verdicts"].items():
        if " - " in name and " - ".join(sorted(name.split(" - "))) == key:
            if verdict == "ok" and key not in measured:
                return NOT_MEASURED
            return verdict
    return "ok" if key in measured else NOT_MEASURED


def _row(kind, name, before, after, verdict_before, verdict_after) -> dict:
    nan = (math.nan, math.nan)
    before, after = before or nan, after or nan
    return {"kind": kind, "entity": name,
            "busbw_before": before[0], "busbw_after": after[0],
            "busbw_ratio": after[0] / before[0] if before[0] > 0 else math.nan,
            "lat_before": before[1], "lat_after": after[1],
            "lat_ratio": after[1] / before[1] if before[1] > 0 else math.nan,
            "before": verdict_before, "after": verdict_after,
            "change": change(verdict_before, verdict_after)}


def load(path: str | Path) -> dict:
    """A locate run as the comparison needs it: pairs, entity names, verdicts, level."""
    from commbench.results import read_meta
    from commbench.results.locate import read_pairs, read_verdicts

    folder = Path(path)
    meta = read_meta(folder)
    names = [e["name"] for e in meta.get("entities", [])]
    return {"records": read_pairs(folder), "names": names, "verdicts": read_verdicts(folder),
            "level": (meta.get("entities") or [{}])[0].get("kind", "?")}
