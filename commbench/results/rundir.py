"""The run folder: files are written so that a crash at any moment leaves something useful.

``results.jsonl`` gets one line per row as soon as the row exists; ``run.json`` is replaced
atomically; the derived files (CSV, summary, plots) are rebuilt from the JSONL at the end, by
whoever is left to do it (rank 0, or the local launcher after a failure).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

from commbench.errors import UsageError

JSONL = "results.jsonl"
CSV = "results.csv"
RUN_JSON = "run.json"
SUMMARY = "summary.md"
BANDWIDTH_PNG = "bandwidth.png"
LATENCY_PNG = "latency.png"


def default_run_id(ops: tuple[str, ...], backends: tuple[str, ...], world: int) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    op_part = ops[0] if len(ops) == 1 else f"{len(ops)}ops"
    return f"{stamp}-{op_part}-{'+'.join(backends)}-n{world}"


def create(root: str, run_id: str) -> Path:
    """Make ``root/run_id`` (with a -2, -3 ... suffix if taken); refuse an unwritable root."""
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", run_id):
        raise UsageError(f"bad --name {run_id!r}: use letters, digits, '.', '_', '+' and '-'")
    base = Path(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = base / f".commbench-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write to --out {root}: {error.strerror or error}") from None
    path = base / run_id
    suffix = 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            suffix += 1
            path = base / f"{run_id}-{suffix}"


class RunDir:
    """Paths and writers of one run folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rows = None

    def file(self, name: str) -> Path:
        return self.path / name

    def append_row(self, row: dict) -> None:
        if self._rows is None:
            self._rows = open(self.file(JSONL), "a", buffering=1)  # noqa: SIM115 (kept open)
        self._rows.write(json.dumps(row) + "\n")
        self._rows.flush()

    def close(self) -> None:
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    def write_meta(self, meta: dict) -> None:
        tmp = self.file(RUN_JSON + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        os.replace(tmp, self.file(RUN_JSON))

    def read_meta(self) -> dict:
        try:
            return json.loads(self.file(RUN_JSON).read_text())
        except (OSError, ValueError):
            return {}

    def update_meta(self, **fields) -> dict:
        meta = self.read_meta()
        meta.update(fields)
        self.write_meta(meta)
        return meta

    def read_rows(self) -> list[dict]:
        """Every complete line of results.jsonl (a line cut by a crash is skipped)."""
        rows = []
        try:
            text = self.file(JSONL).read_text()
        except OSError:
            return rows
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        return rows
