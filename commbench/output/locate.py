"""locate's text: the suspects table on the console, summary.md, and the CSV files of the
matrix. Data in (plain rows the command built), text or files out."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from commbench.output.markdown import markdown_table

SUSPECT_HEADERS = ["verdict", "entity", "hosts", "ranks", "busbw", "latency", "evidence"]


def _ratio(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def suspect_cells(suspects: Sequence[dict]) -> list[list[str]]:
    return [[s["verdict"], s["entity"], ",".join(s["hosts"]),
             ",".join(map(str, s["ranks"])), _ratio(s["busbw_ratio"]), _ratio(s["lat_ratio"]),
             s["evidence"]] for s in suspects]


def console_lines(suspects: Sequence[dict], transient: Sequence[dict], head: dict) -> list[str]:
    """What the console shows: the run in one line, then each suspect with its evidence."""
    lines = [f"# locate: {head['entities']} {head['level']} entities, {head['pairs']} pairs in "
             f"{head['rounds']} rounds (+{head['confirm_rounds']} confirmation), "
             f"busbw at {head['large']}, latency at {head['small']}"]
    if not suspects:
        lines.append("# no suspect: every entity and link within "
                     f"{head['min_effect']:.0%} / 3.5 robust z of the fleet")
    for s in suspects:
        lines.append(f"{s['verdict']:<12} {s['evidence']}")
    for s in transient:
        lines.append(f"{'transient':<12} {s['evidence']} (did not reproduce)")
    return lines


def summary_markdown(suspects: Sequence[dict], transient: Sequence[dict], head: dict,
                     entity_rows: Sequence[dict], meta: dict) -> str:
    """summary.md: the run, the suspects table, then every entity."""
    versions = meta.get("versions", {})
    parts = ["# commbench locate", "",
             f"{head['entities']} {head['level']} entities on {meta.get('nnodes', '?')} node(s) "
             f"({meta.get('world_size', '?')} ranks, {head['backend']}), {head['pairs']} pairs "
             f"in {head['rounds']} rounds + {head['confirm_rounds']} confirmation round(s); "
             f"busbw: bidirectional p2p at {head['large']}, latency: at {head['small']}; "
             f"torch {versions.get('torch', '?')}, status **{meta.get('status', '?')}**.",
             "",
             "A suspect is more than 3.5 robust z (MAD) below the fleet and at least "
             f"{head['min_effect']:.0%} slower; it is called bad when its retest against "
             "known-good partners reproduces it.", ""]
    if meta.get("error"):
        parts += [f"> error: {meta['error']}", ""]
    if suspects:
        parts += ["## Suspects", "", markdown_table(SUSPECT_HEADERS, suspect_cells(suspects)), ""]
    else:
        parts += ["**No suspect.**", ""]
    if transient:
        parts += ["Did not reproduce (transient):", ""]
        parts += [f"- {s['evidence']}" for s in transient] + [""]
    headers = ["entity", "hosts", "ranks", "busbw", "z", "latency", "z ", "verdict"]
    rows = [[r["entity"], r["host"], r["ranks"], _ratio(r["busbw_ratio"]),
             f"{r['busbw_z']:.1f}", _ratio(r["lat_ratio"]), f"{r['lat_z']:.1f}", r["verdict"]]
            for r in entity_rows if r["kind"] != "link"]
    parts += ["## Entities", "", markdown_table(headers, rows), "",
              "heatmap_busbw.png and heatmap_lat.png: every pair as a ratio to the fleet "
              "median pair.", ""]
    return "\n".join(parts)


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_matrix(path: Path, values: np.ndarray, labels: Sequence[str]) -> None:
    """N x N with the entities' labels on both axes; empty = not measured."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", *labels])
        for label, row in zip(labels, values, strict=True):
            writer.writerow([label, *("" if not math.isfinite(v) else f"{v:.6g}" for v in row)])


def compare_lines(rows: Sequence[dict], paths: Sequence[str]) -> list[str]:
    """The before / after table of two locate runs, entities then links."""

    def number(value, digits=3) -> str:
        return "-" if not math.isfinite(value) else f"{value:.{digits}g}"

    lines = [f"# before: {paths[0]}", f"# after:  {paths[1]}",
             f"{'entity':<20} {'busbw before':>12} {'after':>8} {'ratio':>6} "
             f"{'lat us before':>13} {'after':>8} {'ratio':>6}  {'before':<12} {'after':<12} "
             "change"]
    for r in rows:
        lines.append(f"{r['entity']:<20} {number(r['busbw_before']):>12} "
                     f"{number(r['busbw_after']):>8} {_ratio(r['busbw_ratio']):>6} "
                     f"{number(r['lat_before']):>13} {number(r['lat_after']):>8} "
                     f"{_ratio(r['lat_ratio']):>6}  {r['before']:<12} {r['after']:<12} "
                     f"{r['change']}")
    lines.append("# busbw GB/s (fastest decile of calls), latency of the fastest call; ratio = "
                 "after / before")
    return lines
