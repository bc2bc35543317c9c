"""A locate run's files, owned here (pyperf's rule: the object that owns a format loads and
dumps it): pairs.jsonl as rank 0 measures, then entities.csv, pairs.csv, the matrices and the
host lists from the attribution (docs/reference/results-layout.md).

A locate run folder is one with both pairs.jsonl and entities.csv; ``compare`` and ``report``
tell it from a sweep that way.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

PAIRS_JSONL = "pairs.jsonl"
PAIRS_CSV = "pairs.csv"
ENTITIES_CSV = "entities.csv"
BAD_HOSTS = "bad-hosts.txt"  # hosts of a bad or hung suspect, one a line
GOOD_HOSTS = "good-hosts.txt"  # hosts measured and passed
METRICS = ("busbw", "lat")


def matrix_csv(metric: str) -> str:
    """The N x N matrix of one metric (``busbw`` or ``lat``), raw values."""
    return f"matrix_{metric}.csv"


def heatmap_png(metric: str) -> str:
    """The heatmap of one metric, each pair over the fleet median."""
    return f"heatmap_{metric}.png"

ENTITY_COLUMNS = ("entity", "kind", "host", "ranks", "partners", "busbw_ratio", "busbw_z",
                  "lat_ratio", "lat_z", "votes", "confirmed", "verdict")
PAIR_COLUMNS = ("round", "phase", "entity_a", "entity_b", "hosts", "ranks", "size_large",
                "busbw_gbps", "busbw_ci_lo", "busbw_ci_hi", "busbw_p10_gbps", "size_small",
                "lat_us_min",
                "lat_us_p50", "lat_us_p99", "wrong", "status")


def is_locate_run(path: str | Path) -> bool:
    folder = Path(path)
    return (folder / PAIRS_JSONL).is_file() and (folder / ENTITIES_CSV).is_file()


class PairSink:
    """Rank 0's sink: run.json (through the run writer) and one pairs.jsonl line per pair."""

    def __init__(self, writer) -> None:
        self.writer = writer
        self._file = None

    def begin(self, meta: dict) -> None:
        self.writer.begin(meta, 0)

    def planned(self, rounds: int, pairs: int) -> None:
        """The rounds the ranks were handed (a live view counts them; the file does not)."""

    def pair(self, record: dict) -> None:
        if self._file is None:
            self._file = open(self.writer.path / PAIRS_JSONL, "a", buffering=1)  # noqa: SIM115
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_pairs(path: Path) -> list[dict]:
    try:
        lines = (path / PAIRS_JSONL).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def read_verdicts(path: Path) -> dict[str, str]:
    """entity -> verdict, from entities.csv."""
    with open(path / ENTITIES_CSV) as handle:
        return {row["entity"]: row["verdict"] for row in csv.DictReader(handle)}


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> None:
    """A table with ``columns`` (others in the rows left out); locate's and replay's."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_matrix(path: Path, values, labels: Sequence[str]) -> None:
    """N x N with the entities' labels on both axes; empty = not measured."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", *labels])
        for label, row in zip(labels, values, strict=True):
            writer.writerow([label, *("" if not math.isfinite(v) else f"{v:.6g}" for v in row)])


def write_hosts(path: Path, hosts: Sequence[str]) -> None:
    path.write_text("".join(f"{h}\n" for h in hosts))
