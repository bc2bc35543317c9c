"""Importers: nccl-tests and OSU micro-benchmark output in, commbench results rows out, so
compare, report and model work on numbers measured by those tools.

Pure parsers: text in, rows (full Row fields) and run.json metadata out; nothing here prints,
writes a file or imports torch. A file that does not read as the tool's output raises
``UsageError`` naming the file and the line. ``commands/imports.py`` writes the folder.
"""

from __future__ import annotations

from pathlib import Path

from commbench.core.errors import UsageError
from commbench.importers import nccl_tests, osu
from commbench.importers.common import Imported, ImportFormatError

PARSERS = {"nccl-tests": nccl_tests.parse, "osu": osu.parse}
KINDS = tuple(PARSERS)

__all__ = ["KINDS", "Imported", "ImportFormatError", "parse", "read"]


def parse(kind: str, text: str, source: str, op: str | None = None,
          world_size: int | None = None) -> Imported:
    """Rows and metadata from a tool's output; ``source`` names the file in messages."""
    parser = PARSERS.get(kind)
    if parser is None:
        raise UsageError(f"unknown import kind {kind!r} (choose from {', '.join(KINDS)})")
    return parser(text, source, op=op, world_size=world_size)


def read(kind: str, path: str, op: str | None = None, world_size: int | None = None) -> Imported:
    """``parse`` on a file (undecodable bytes are replaced, not fatal: logs carry noise)."""
    if kind not in PARSERS:
        raise UsageError(f"unknown import kind {kind!r} (choose from {', '.join(KINDS)})")
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    return parse(kind, text, path, op=op, world_size=world_size)
