"""The sinks rank 0 reports to, as ``Protocol``s: the engine says what it calls, each command
builds its own (files, ``--json`` lines, a live bar) without the engine importing any of them.

Kept apart from the scaffold, and free of torch, so that a sink in output/ can declare its
Protocol as a base class without loading torch (output/ stays importable on a laptop). A sink
in results/ (below the engine, so it cannot import it) matches its Protocol structurally;
tests/unit/architecture/test_sinks.py checks both kinds.
"""

from __future__ import annotations

from typing import Any, Protocol


class RunSink(Protocol):
    """What every command's rank-0 sink takes: the run's metadata once, then the end."""

    def begin(self, meta: dict, *args: Any) -> None: ...

    def close(self) -> None: ...


class RowSink(RunSink, Protocol):
    """A sweep's sink: rows as they are measured, and the live position and progress."""

    def begin(self, meta: dict, planned: int) -> None: ...

    def row(self, record: dict) -> None: ...

    def position(self, where: str) -> None: ...

    def progress(self, done: int, total: int) -> None: ...

    def note(self, text: str) -> None: ...

    def update(self, fields: dict) -> None: ...

    def calls(self, batch: Any) -> None:
        """--per-call: one size's calls on every rank (a results.calls.CallBatch)."""


class PairSink(RunSink, Protocol):
    """locate's sink: one record per pair measured."""

    def begin(self, meta: dict) -> None: ...

    def pair(self, record: dict) -> None: ...

    def planned(self, rounds: int, pairs: int) -> None: ...


class ReplaySink(RunSink, Protocol):
    """replay's sink: every rank's results, once."""

    def begin(self, meta: dict) -> None: ...

    def results(self, records: list[dict]) -> None: ...
