"""What rank 0 shows while it measures: the table growing row by row under a progress bar, or
JSON lines on stdout (--json). Sinks the measure command hands to the engine next to the file
sink."""

from __future__ import annotations

import json

from commbench.engine.sinks import RowSink


class Sinks(RowSink):
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

    def progress(self, done: int, total: int) -> None:
        for sink in self.sinks:
            sink.progress(done, total)

    def note(self, text: str) -> None:
        for sink in self.sinks:
            sink.note(text)

    def update(self, fields: dict) -> None:
        for sink in self.sinks:
            sink.update(fields)

    def calls(self, batch) -> None:
        for sink in self.sinks:
            sink.calls(batch)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


class _Quiet(RowSink):
    """A sink that ignores what it is not about."""

    def begin(self, meta: dict, planned: int) -> None:
        pass

    def position(self, where: str) -> None:
        pass

    def row(self, record: dict) -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def update(self, fields: dict) -> None:
        pass

    def calls(self, batch) -> None:
        pass

    def close(self) -> None:
        pass


class Notes(_Quiet):
    """Warnings from the ranks (sizes skipped for memory, ...) on stderr (--json)."""

    def note(self, text: str) -> None:
        from commbench.output.console import say

        say(f"warning: {text}")


class _Stdout:
    """Rows on stdout, whose reader may leave (``| head -1``): the run goes on into
    ``folder``, stderr says so once, nothing more is printed (no rank dies of EPIPE)."""

    def __init__(self, folder: str = "the run folder") -> None:
        self.folder = folder
        self.left = False

    def _out(self, write, *args, **kwargs) -> None:
        if self.left:
            return
        try:
            write(*args, **kwargs)
        except BrokenPipeError:
            from commbench.output.console import reader_left

            self.left = True
            reader_left(self.folder)


class JsonRows(_Stdout, _Quiet):
    """--json: one JSON object per row on stdout (JSON Lines), raw samples left in the run
    folder."""

    def row(self, record: dict) -> None:
        shown = {k: v for k, v in record.items() if k != "samples_us"}
        self._out(print, json.dumps(shown), flush=True)


class Live(_Stdout, Notes):
    """Rows printed as they are measured (the table grows, nccl-tests style), under a progress
    bar with an ETA on a terminal, counting the sweep's visits (``progress``). Built in the
    command, started in rank 0 (not pickled live).
    """

    def __init__(self, progress: bool, folder: str = "the run folder") -> None:
        super().__init__(folder)
        self.show_bar = progress
        self._console = None
        self._bar = None
        self._task = None
        self._layout = None
        self._table = None
        self._first_times: dict = {}
        self._first_backend = ""
        self._several = False
        self._per_group = False
        self._per_call = False
        self._routed = False  # alltoallv: imbalance and the busiest rank's bytes
        self._contended = (False, False)  # --overlap, --background: their columns
        self._both_places = False
        self._footer_rows: list[dict] = []  # what the footer needs of every row

    def begin(self, meta: dict, planned: int) -> None:
        from commbench.output.console import make_console

        self._console = make_console()
        backends = meta.get("backends") or []
        self._several = len(backends) > 1
        self._first_backend = backends[0] if backends else ""
        self._per_group = bool((meta.get("config") or {}).get("per_group"))
        self._both_places = bool((meta.get("config") or {}).get("both_places"))
        if self.show_bar:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            # Columns as TextColumns, not markup strings: rows are printed with markup off
            # and the bar re-renders inside that print, which would show a string's style
            # tag raw. The description is plain text (markup off: a '[tp]' stays).
            self._bar = Progress(
                TextColumn("{task.description}", style="progress.description", markup=False),
                BarColumn(bar_width=20),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta", markup=False),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("measuring", total=planned)

    def position(self, where: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=where)

    def progress(self, done: int, total: int) -> None:
        """The bar counts visits (a size measured once, engine.progress), not rows: an op
        measured in rounds shows its rows only after its last round."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=max(total, 1))

    def _print(self, line: str, soft_wrap: bool = True) -> None:
        self._out(self._console.print, line, markup=False, highlight=False,
                  soft_wrap=soft_wrap)

    def row(self, record: dict) -> None:
        from commbench.output import console as tables
        from commbench.output.tables import Layout

        per_group = self._per_group and bool(record.get("dim"))
        key = (tables.group_key(record), record["backend"], bool(record.get("inplace")))
        if key != self._table:
            self._table = key
            self._per_call = tables.has_calls(record)  # --per-call: p95, CV, spikes
            self._routed = tables.is_routed(record)
            self._contended = tables.contention(record)  # --overlap, --background
            columns = tables.sweep_columns(per_group, self._several, self._first_backend,
                                           self._per_call, self._routed, self._contended)
            self._layout = Layout(columns, [], tables.terminal_width())
            backend = f" {record['backend']}" if not self._several else ""
            self._print("")
            place = ((" (in place)" if record.get("inplace") else " (out of place)")
                     if self._both_places else "")  # --both-places: nccl-tests' two groups
            self._print(f"# {tables.group_title(record)}{backend}{place} "
                        f"[{tables.timing_note(record)}]",
                        soft_wrap=False)  # prose: wrapped to the terminal
            for line in self._layout.header():
                self._print(line)
        where = tables.reference_key(record)
        if record["backend"] == self._first_backend:
            self._first_times[where] = record["lat_us_p50"]
        cells = tables.sweep_row(record, per_group, self._several, self._first_times.get(where),
                                 self._per_call, self._routed, self._contended)
        for line in self._layout.row(cells):
            self._print(line)
        self._footer_rows.append({k: record.get(k) for k in (
            "op", "pattern", "mesh", "dim", "groups", "group_size", "span", "group", "backend",
            "size_bytes", "busbw_gbps", "wrong", "validation", "lat_us_p50", "beside",
            "workers", "servers", "reduced_gbps", "calls", "stragglers")})

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._footer_rows:
            from commbench.output.baselines import side_by_side_lines
            from commbench.output.console import footer_lines, terminal_width

            for line in side_by_side_lines(self._footer_rows, terminal_width()):
                self._print(line)  # e.g. ps beside allreduce, with the ratio
            self._print("")
            for line in footer_lines(self._footer_rows):
                self._print(line, soft_wrap=False)  # a long table name wraps
            self._footer_rows = []
