"""A trace from what a user points at: a trace folder (``record``, or an import), or Flight
Recorder dumps (files, or a folder of them), told apart by what is there (``stragglers``
reads its SOURCE through this)."""

from __future__ import annotations

from pathlib import Path

from commbench.core.errors import UsageError
from commbench.importers import flight_recorder
from commbench.importers.common import ImportFormatError
from commbench.results import trace as trace_format


class UnreadableSource(ImportFormatError):
    """A source that is there but cannot be read (a torn dump, a file of another kind):
    exit 3, as the command's reference says."""

    exit_code = 3


def load_source(sources: list[str]) -> tuple[trace_format.Trace, list[str]]:
    """The trace and the notes on what was left out."""
    if not sources:
        raise UsageError("stragglers needs a trace folder or Flight Recorder dumps")
    for source in sources:
        if not Path(source).exists():
            raise UsageError(f"{source}: no such file or folder")
    if len(sources) == 1 and Path(sources[0]).is_dir() and \
            any(Path(sources[0]).glob(trace_format.TRACE_GLOB)):
        trace = trace_format.load(sources[0])
        notes = list(trace.notes)
        missing = sorted(set(range(trace.world_size)) - set(trace.ranks))
        if missing:
            notes.append(f"no trace file for rank(s) {', '.join(map(str, missing))}: the "
                         "others are read without them")
        return trace, notes
    try:
        imported = flight_recorder.read(sources)
    except ImportFormatError as error:
        text = str(error)
        if "no Flight Recorder dump in it" in text:
            raise UsageError(f"{text} and no rank-<r>.jsonl trace (record one with "
                             "`commbench record --out DIR -- CMD`)") from None
        if "different jobs" in text or "second dump" in text or "different torch" in text:
            raise
        raise UnreadableSource(text) from None
    return imported.trace, imported.notes
