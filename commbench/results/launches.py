"""The launches of a ``--repeat`` run, pooled: one row per measurement.

A folder of K launches holds K rows per size (each with its ``launch`` id); compare, report,
model and the run's own summary and plots all read one row per size, whose median is over
every launch's samples and whose interval comes from the hierarchical bootstrap over
launches, then rounds, then blocks (stats.resampled_medians). Result rows in, rows out; never
imports torch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from commbench.core.stats import (
    CONFIDENCE,
    UNSTABLE_TAIL_SHARE,
    Nested,
    instability,
    pseudo_rounds,
    resampled_medians,
)
from commbench.results import Run
from commbench.results.overlap import pooled_overlap
from commbench.results.schema import KEY_COLUMNS

POOL_SEED = 0  # the pooled interval's bootstrap: the same rows, the same interval


def listed(value) -> list:
    """A list field of a row, or [] where it is absent (rows through pandas hold NaN)."""
    return value if isinstance(value, list) else []


def plain(value):
    """None for a missing value (pandas gives NaN), the value itself otherwise."""
    return None if value is None or value != value else value


def rounds_of(row: dict) -> list[np.ndarray]:
    """A row's samples cut into its rounds (``round_samples``: blocks per round), or into
    batches of correlated blocks when it kept one round or none."""
    samples = np.asarray(listed(row.get("samples_us")), dtype=np.float64)
    counts = listed(row.get("round_samples"))
    if len(counts) >= 2 and sum(counts) == samples.size:
        return np.split(samples, np.cumsum(counts)[:-1])
    return pseudo_rounds(samples) if samples.size else []


def pool_launches(rows: list[dict], keys=KEY_COLUMNS) -> tuple[list[dict], list[Nested]]:
    """Rows of one run, one per measurement: the launches of ``--repeat`` (rows that share
    ``keys`` and differ in ``launch``) pooled into one row (``merged``). Returns the rows, in
    the order of their first launch, and per row its launches' rounds (for the bootstrap)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(plain(row.get(k)) for k in keys), []).append(row)
    pooled, nested = [], []
    for part in groups.values():
        launches = [rounds_of(row) for row in part]
        nested.append(launches)
        kept_rounds = all(len(listed(row.get("round_samples"))) >= 2 for row in part)
        levels = "rounds and blocks" if kept_rounds else "batches of blocks"
        if len(part) == 1:
            pooled.append({**part[0], "_levels": levels})
            continue
        pooled.append({**merged(part, launches), "_levels": f"launches, {levels}"})
    return pooled, nested


def pooled_rows(rows: list[dict], keys=KEY_COLUMNS) -> list[dict]:
    """What a table, a plot or a fit shows of a run: one row per measurement (a run of one
    launch comes back as it is)."""
    if len({plain(row.get("launch")) for row in rows}) <= 1:
        return rows
    pooled, _ = pool_launches(rows, keys)
    return [{k: v for k, v in row.items() if k != "_levels"} for row in pooled]


def pooled_run(run: Run) -> Run:
    """``run`` with one row per measurement, for what is drawn or tabled from it."""
    return replace(run, rows=pooled_rows(run.rows))


def merged(part: list[dict], launches: Nested) -> dict:
    """One row from the rows of several launches of one measurement.

    The median is over all their samples and its interval the bootstrap over launches,
    rounds and blocks; bandwidths follow the median. What single rows summarise from their
    own calls is combined as far as the rows allow: min and max over the launches, the mean
    weighted by iterations, the standard deviation by the law of total variance, p10, p90
    and p99 the median launch's. Counts (iterations, samples, wrong elements, wall time)
    add up; skew and the slowest rank are the most skewed launch's; an --overlap or
    --background row's slowdowns, rates and load come from every launch (results.overlap).
    ``samples_us`` and ``round_samples`` hold every launch's in launch order (their rounds are
    not one launch's rounds: re-pool from the raw rows, as compare does).
    """
    first = part[0]
    samples = np.concatenate([r for launch in launches for r in launch]) if any(
        launch for launch in launches) else np.array([])
    p50 = (float(np.median(samples)) if samples.size
           else float(np.median([row["lat_us_p50"] for row in part])))
    scale = first["lat_us_p50"] / p50 if p50 else 1.0
    iters = np.array([float(row.get("iters") or 0) for row in part])
    weights = iters if iters.sum() > 0 else np.ones(len(part))
    means = np.array([float(row.get("lat_us_mean", p50)) for row in part])
    mean = float(np.average(means, weights=weights))
    spreads = np.array([float(row.get("lat_us_std") or 0.0) for row in part])
    std = float(np.sqrt(max(0.0, np.average(spreads ** 2 + (means - mean) ** 2,
                                            weights=weights))))
    skewed = max(part, key=lambda row: float(row.get("skew_pct") or 0.0))
    row = {k: v for k, v in first.items() if k != "launch"}
    row.update({
        "lat_us_p50": p50,
        "lat_us_min": min(float(r.get("lat_us_min", p50)) for r in part),
        "lat_us_max": max(float(r.get("lat_us_max", p50)) for r in part),
        "lat_us_mean": mean,
        "lat_us_std": std,
        "algbw_gbps": float(first.get("algbw_gbps") or 0.0) * scale,
        "busbw_gbps": float(first.get("busbw_gbps") or 0.0) * scale,
        "iters": int(iters.sum()),
        "samples": int(sum(int(r.get("samples") or 0) for r in part)),
        "wrong": int(sum(int(r.get("wrong") or 0) for r in part)),
        "skew_pct": skewed.get("skew_pct", 0.0),
        "slowest_rank": skewed.get("slowest_rank", first.get("slowest_rank")),
        "launches": len(part),
        "samples_us": samples.tolist(),
        "round_samples": [n for r in part for n in listed(r.get("round_samples"))],
        "round_p50_us": [v for r in part for v in listed(r.get("round_p50_us"))],
        "rounds": int(sum(int(r.get("rounds") or 1) for r in part)),
    })
    for name in ("lat_us_p10", "lat_us_p90", "lat_us_p99"):
        values = [float(r[name]) for r in part if plain(r.get(name)) is not None]
        if values:
            row[name] = float(np.median(values))
    if plain(first.get("overlap")) or plain(first.get("background")):
        row.update(pooled_overlap(part))  # the launch is the unit (results.overlap)
    if first.get("msg_rate"):
        row["msg_rate"] = float(first["msg_rate"]) * scale
    if first.get("wall_s") is not None:
        row["wall_s"] = round(sum(float(r.get("wall_s") or 0.0) for r in part), 4)
    if samples.size:
        medians = resampled_medians(launches, np.random.default_rng(POOL_SEED))
        alpha = (1 - CONFIDENCE) / 2
        low, high = (float(v) for v in np.quantile(medians, [alpha, 1 - alpha]))
        row["lat_us_ci_lo"], row["lat_us_ci_hi"] = min(low, p50), max(high, p50)
        row["unstable"] = instability(p50, float(np.percentile(samples, UNSTABLE_TAIL_SHARE)), low,
                                      high)
    else:
        row["unstable"] = "; ".join(dict.fromkeys(r.get("unstable") or "" for r in part
                                                  if r.get("unstable")))
    return row
