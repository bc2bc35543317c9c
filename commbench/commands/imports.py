"""``commbench import nccl-tests|osu FILE``: another tool's output in, a results folder out."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

from commbench.errors import EXIT_OK


def run_import(kind: str, file: str, op: str | None, out: str, name: str | None, force: bool,
               world_size: int | None) -> int:
    """Parse FILE (before anything is written, so a bad file leaves no folder), then write
    run.json, results.jsonl/.csv, summary.md and the plots as a measured run would have."""
    from commbench import results
    from commbench.analysis.importers import read
    from commbench.output.files import write_run_files

    imported = read(kind, file, op=op, world_size=world_size)
    run_id = name or _generated_name(kind, file)
    path = results.create(out, run_id, force=force, generated=name is None)
    writer = results.RunWriter(path, {"name": path.name,
                                      "command_line": _command_line(kind, file, op, out, name,
                                                                    force, world_size),
                                      "source": kind})
    meta = {
        "status": "running",
        "error": None,
        "start_time": None,  # the tool's measurement time is not in every file
        "imported_at": results.now(),
        "imported_from": str(Path(file).resolve()),
        "hosts": [],
        **imported.meta,
    }
    writer.begin(meta, planned=len(imported.rows))
    try:
        for row in imported.rows:
            writer.row(row)
    finally:
        writer.close()
    run = results.finalize(path, "complete")
    write_run_files(run)
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"imported {len(imported.rows)} rows from {file} into {path}")
    return EXIT_OK


def _generated_name(kind: str, file: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "-", Path(file).stem).strip("-.") or "file"
    return f"{stamp}-{kind}-{stem}"


def _command_line(kind: str, file: str, op: str | None, out: str, name: str | None,
                  force: bool, world_size: int | None) -> list[str]:
    """The command that made the folder, as a user would type it."""
    words = ["commbench", "import", kind, file, "--out", out]
    if op:
        words += ["--op", op]
    if world_size is not None:
        words += ["--world-size", str(world_size)]
    if name:
        words += ["--name", name]
    if force:
        words.append("--force")
    return words
