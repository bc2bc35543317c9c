"""A replay run's files, owned here: replayed.jsonl (one line per rank, written by rank 0 as the
replay ends) and the names of the tables and chart made from it."""

from __future__ import annotations

import json
from pathlib import Path

REPLAYED_JSONL = "replayed.jsonl"
REPLAY_CSV = "replay.csv"
RANKS_CSV = "replay_ranks.csv"
STEPS_CSV = "replay_steps.csv"
CHART = "replay.png"


class ReplaySink:
    """Rank 0's sink: run.json (through the run writer) and one replayed.jsonl line per rank."""

    def __init__(self, writer) -> None:
        self.writer = writer

    def begin(self, meta: dict) -> None:
        self.writer.begin(meta, 0)

    def results(self, records: list[dict]) -> None:
        with open(self.writer.path / REPLAYED_JSONL, "w") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")

    def close(self) -> None:
        pass


def read_replayed(path: Path) -> list[dict]:
    """Every rank's record, as rank 0 wrote them."""
    lines = (path / REPLAYED_JSONL).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
