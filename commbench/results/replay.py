"""A replay run's files, owned here: replayed.jsonl (one line per rank, written by rank 0 as the
replay ends), and the tables made from it, their names and columns
(docs/reference/results-layout.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from commbench.results.locate import write_csv

REPLAYED_JSONL = "replayed.jsonl"
REPLAY_CSV = "replay.csv"
RANKS_CSV = "replay_ranks.csv"
STEPS_CSV = "replay_steps.csv"
CHART = "replay.png"

# an all-to-all's bytes sent and received, recorded and replayed (empty for other ops)
MOVED = ("sent_bytes", "received_bytes", "replayed_sent_bytes", "replayed_received_bytes")
OP_COLUMNS = ("op", "dtype", "bytes", "calls", "in_situ_s", "replayed_s", "model_s",
              "replayed_bytes", "replayed_calls", "ranks", "model_source", *MOVED)
RANK_COLUMNS = ("rank", "op", "dtype", "bytes", "calls", "in_situ_s", "replayed_s", "model_s",
                "replayed_bytes", "replayed_calls", "model_source", *MOVED)
# bytes: the calls' largest buffers; sent/received: what the step's all-to-alls handed torch
STEP_COLUMNS = ("rank", "index", "step", "wall_s", "calls", "calls_s", "bytes", "sent_bytes",
                "received_bytes")
# Counts a step moves: a mean over steps is a sum divided, which reads 1050623.9999999995
# bytes and 0.9999999999999997 calls; written to 6 decimals, a whole count as an integer.
COUNT_COLUMNS = frozenset(("bytes", "calls", "replayed_bytes", "replayed_calls", *MOVED))
COUNT_DIGITS = 6


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


def count(value):
    """A count as written: rounded to COUNT_DIGITS decimals, an integer when whole; anything
    else (None, text) as it is."""
    if isinstance(value, float):
        value = round(value, COUNT_DIGITS)
        return int(value) if value.is_integer() else value
    return value


def write_table(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> None:
    """replay.csv, replay_ranks.csv or replay_steps.csv: ``columns`` of ``rows``, counts
    rounded (``count``)."""
    write_csv(path, [{k: count(v) if k in COUNT_COLUMNS else v for k, v in row.items()}
                     for row in rows], columns)
