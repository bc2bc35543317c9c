"""What rank 0 shows while it measures: JSON lines on stdout (--json), a progress bar on a
terminal. Both are sinks the measure command hands to the engine next to the file sink."""

from __future__ import annotations

import json
import sys


class Sinks:
    """Several sinks behind one: each call goes to every sink, in order."""

    def __init__(self, *sinks) -> None:
        self.sinks = [s for s in sinks if s is not None]

    def begin(self, meta: dict, planned: int) -> None:
        for sink in self.sinks:
            sink.begin(meta, planned)

    def position(self, where: str) -> None:
        for sink in self.sinks:
            sink.position(where)

    def row(self, record: dict) -> None:
        for sink in self.sinks:
            sink.row(record)

    def note(self, text: str) -> None:
        for sink in self.sinks:
            sink.note(text)

    def update(self, fields: dict) -> None:
        for sink in self.sinks:
            sink.update(fields)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


class _Quiet:
    """A sink that ignores what it is not about."""

    def begin(self, meta: dict, planned: int) -> None:
        pass

    def position(self, where: str) -> None:
        pass

    def row(self, record: dict) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def update(self, fields: dict) -> None:
        pass

    def close(self) -> None:
        pass


class Notes(_Quiet):
    """Warnings from the ranks (sizes skipped for memory, ...) on stderr."""

    def note(self, text: str) -> None:
        print(f"warning: {text}", file=sys.stderr, flush=True)


class JsonRows(_Quiet):
    """--json: one JSON object per row on stdout, raw samples left in the run folder."""

    def row(self, record: dict) -> None:
        shown = {k: v for k, v in record.items() if k != "samples_us"}
        print(json.dumps(shown), flush=True)


class ProgressBar(_Quiet):
    """A rich progress bar on a terminal; created in the rank, not pickled with it."""

    def __init__(self) -> None:
        self._progress = None
        self._task = None

    def begin(self, meta: dict, planned: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("measuring", total=planned)

    def position(self, where: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=where)

    def row(self, record: dict) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
