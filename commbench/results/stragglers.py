"""A stragglers run's files, owned here (docs/commands/stragglers.md): ``stragglers.csv`` (one
row per rank), ``stragglers.json`` (what ``--json`` prints), ``run.json``; the names of the
heatmap and the summary the renderers write beside them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from commbench.core.errors import UsageError

CSV = "stragglers.csv"
JSON = "stragglers.json"
RUN_JSON = "run.json"
HEATMAP = "lateness.png"
SUMMARY = "summary.md"
FORMAT = "commbench-stragglers"
FORMAT_VERSION = 1
COLUMNS = ("rank", "host", "verdict", "last_share", "lateness_p50_s", "lateness_p95_s",
           "caused_s_per_step", "steps", "evidence")
FILES = (CSV, JSON, RUN_JSON, HEATMAP, SUMMARY)


def prepare(folder: Path, force: bool) -> Path:
    """The folder to write into: made where missing, refused where it holds a stragglers run
    and ``force`` is not given."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: exists and is not a folder")
    if (folder / JSON).exists() and not force:
        raise UsageError(f"--out {folder}: already holds {JSON}; pass --force to replace it")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write(folder: Path, doc: dict, meta: dict) -> None:
    """stragglers.csv, stragglers.json and run.json from the analysis' JSON object."""
    with (folder / CSV).open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for rank in doc["per_rank"]:
            steps = rank.get("steps")
            writer.writerow([rank["rank"], rank["host"], rank["verdict"], rank["last_share"],
                             f"{rank['lateness_p50_s']:.6g}", f"{rank['lateness_p95_s']:.6g}",
                             f"{rank['caused_s_per_step']:.6g}",
                             f"{steps[0]}..{steps[1]}" if steps else "", rank["evidence"]])
    (folder / JSON).write_text(json.dumps(doc, indent=2) + "\n")
    (folder / RUN_JSON).write_text(json.dumps({"format": FORMAT,
                                               "format_version": FORMAT_VERSION, **meta},
                                              indent=2) + "\n")


def read(folder: Path) -> dict:
    """A stragglers.json written by ``write``."""
    return json.loads((folder / JSON).read_text())
