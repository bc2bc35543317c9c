"""How far a sweep is, counted in visits: one visit is one size measured once (one round of
``--rounds``, or the whole size with one round). What the progress bar counts: rows of an op
measured in rounds only appear after its last round, so a bar of rows would sit at 0 and fill
at the end.

Torch-free and communication-free: rank 0 counts what its sweep did and tells its sink.
"""

from __future__ import annotations


class Visits:
    """Counts the sweep's visits and hands ``(done, total)`` to ``sink.progress``.

    An op announces its planned visits (sizes x rounds) when it starts; each visit adds one,
    never past the op's share; the op's end jumps to its share, so rounds that the stop
    rule made unnecessary, or sizes that did not fit in GPU memory, are counted as done.
    """

    def __init__(self, sink, total: int) -> None:
        self.sink, self.total = sink, total
        self.done = 0
        self._op_end = 0

    def start(self) -> None:
        self._report()

    def op(self, planned: int) -> None:
        self._op_end = min(self.total, self.done + planned)

    def visited(self) -> None:
        if self.done < self._op_end:
            self.done += 1
            self._report()

    def op_done(self) -> None:
        if self.done != self._op_end:
            self.done = self._op_end
            self._report()

    def _report(self) -> None:
        if self.sink is not None:
            self.sink.progress(self.done, self.total)
