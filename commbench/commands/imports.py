"""``commbench import nccl-tests|osu FILE``: another tool's output in, a results folder out;
``commbench import torch-profiler FILE_OR_DIR --out DIR``: profiler traces in, a trace folder
(``rank-<r>.jsonl``, docs/reference/trace-format.md) out."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

from commbench.core.errors import EXIT_OK


def run_import(kind: str, file: str, op: str | None, out: str, name: str | None, force: bool,
               world_size: int | None) -> int:
    """Parse FILE (before anything is written, so a bad file leaves no folder), then write
    run.json, results.jsonl/.csv, summary.md and the plots as a measured run would have."""
    from commbench import results
    from commbench.importers import read
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


def run_import_profiler(source: str, out: str, force: bool) -> int:
    """Parse every rank's profiler trace (before anything is written, so a bad file leaves no
    folder), then write one ``rank-<r>.jsonl`` per rank into OUT and check that the members of
    each group agree on their calls."""
    from commbench.importers import torch_profiler
    from commbench.results import trace as trace_format

    ranks = torch_profiler.read(source)
    folder = _trace_folder(out, force)
    for rank in ranks:
        trace_format.write_rank(folder / f"rank-{rank.rank}.jsonl", rank.header, rank.calls)
    said: dict[str, list[int]] = {}
    for rank in ranks:
        for note in rank.notes:
            said.setdefault(note, []).append(rank.rank)
    for note, where in said.items():
        print(f"note: rank(s) {', '.join(map(str, where))}: {note}", file=sys.stderr)
    trace = trace_format.load(folder)
    world = trace.world_size
    if len(ranks) < world:
        missing = sorted(set(range(world)) - {rank.rank for rank in ranks})
        print(f"note: {len(ranks)} of {world} ranks' traces (no file for rank(s) "
              f"{', '.join(map(str, missing))}): replay needs every rank", file=sys.stderr)
    for problem in trace_format.check_order(trace):
        print(f"warning: {problem}", file=sys.stderr)
    calls = sum(len(rank.calls) for rank in ranks)
    timed = sum(1 for rank in ranks for call in rank.calls if call.in_situ_s is not None)
    steps = trace.steps()
    print(f"imported {calls} calls ({timed} with an in-situ time) from {len(ranks)} rank "
          f"trace(s), step(s) {', '.join(map(str, steps))}, into {folder}")
    return EXIT_OK


def run_import_dumps(kind: str, sources: list[str], out: str, force: bool) -> int:
    """Flight Recorder dumps or NCCL Inspector logs in (every file read before anything is
    written), a trace folder (``rank-<r>.jsonl``) out, for replay, estimate --trace, history
    and stragglers."""
    from commbench.importers import flight_recorder, nccl_inspector
    from commbench.results import trace as trace_format

    if kind == "flight-recorder":
        imported = flight_recorder.read(sources)
        trace, notes = imported.trace, imported.notes
    else:
        trace, notes = nccl_inspector.read(sources)
    folder = _trace_folder(out, force)
    for rank, rank_trace in sorted(trace.ranks.items()):
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", rank_trace.header,
                                rank_trace.calls)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for problem in trace_format.check_order(trace_format.load(folder)):
        print(f"warning: {problem}", file=sys.stderr)
    calls = sum(len(rank.calls) for rank in trace.ranks.values())
    steps = trace.steps()
    print(f"imported {calls} calls of {len(trace.ranks)} of {trace.world_size} ranks "
          f"({len(steps)} step(s) found from the calls' rhythm) into {folder}")
    return EXIT_OK


def _trace_folder(out: str, force: bool) -> Path:
    """OUT made ready for a trace: refused where it is a file or already holds a trace
    (unless --force, which removes that trace's rank files), after every source was read."""
    from commbench.core.errors import UsageError
    from commbench.results import trace as trace_format

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    taken = sorted(folder.glob(trace_format.TRACE_GLOB)) if folder.is_dir() else []
    if taken and not force:
        raise UsageError(f"--out {out}: already holds a trace ({taken[0].name}, ...); choose "
                         "another folder or pass --force to replace it")
    folder.mkdir(parents=True, exist_ok=True)
    for old in taken:
        old.unlink()
    return folder
