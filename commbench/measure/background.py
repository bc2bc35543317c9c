"""--background on the rank side: another job's traffic, a calibrated load beside the measured
collective.

The load is an allreduce of ``--background`` bytes per rank, float32, on a second process group
of the same ranks (or of ``--background-ranks``), made before anything is timed. A thread of
each member rank calls it back to back from the start of the sweep to its end. The members must
make the same number of calls, so a rank never leaves the loop on its own: the first element of
the buffer carries a stop flag (the rest stay zero, so the sum never grows), and every member
leaves after the call in which any of them raised it.

Each row says what the load achieved while the row's size was measured: its calls between two
marks, as busbw (nccl-tests' allreduce factor 2(n-1)/n, the same as an allreduce row's).
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np

STOP_JOIN_S = 10.0  # a member whose peers are gone waits in its call until the group's timeout


class Background:
    """The load's thread on one member rank (``member`` False: this rank only counts)."""

    def __init__(self, group, ranks: tuple[int, ...], member: bool, size_bytes: int,
                 device: str, busbw_factor: float, label: str, control) -> None:
        self.group = group
        self.ranks = ranks
        self.member = member
        self.size_bytes = size_bytes
        self.device = device
        self.busbw_factor = busbw_factor
        self.label = label
        self.control = control
        self.calls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error = ""

    def start(self) -> None:
        if not self.member:
            return
        self._thread = threading.Thread(target=self._loop, name="commbench-background",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import torch
        import torch.distributed as dist

        count = max(1, self.size_bytes // 4)
        payload = torch.zeros(count, dtype=torch.float32, device=self.device)
        try:
            while True:
                payload[0] = 1.0 if self._stop.is_set() else 0.0
                dist.all_reduce(payload, group=self.group)
                self.calls += 1
                if float(payload[0]) > 0:
                    return
        except Exception as error:  # a peer gone: the run reports its own failure
            self.error = str(error)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_S)

    def mark(self) -> tuple[int, float]:
        return self.calls, time.perf_counter()

    def fields(self, mark: tuple[int, float]) -> dict:
        """The row's background columns over the window since ``mark``. Collective over the
        control group (every rank calls it at the same point of the sweep): rank 0 may not
        be a member, and reports what the members' loads achieved."""
        calls, since = mark
        elapsed = time.perf_counter() - since
        done = self.control.gather([float(self.calls - calls) if self.member else np.nan,
                                    elapsed])
        members = done[np.isfinite(done[:, 0])]
        if not members.size:
            return {"background": self.label, "background_busbw": 0.0}
        rate = float(members[:, 0].min()) / float(members[:, 1].max())  # calls per second
        busbw = rate * self.size_bytes * self.busbw_factor / 1e9
        return {"background": self.label, "background_busbw": round(busbw, 6)}


@contextlib.contextmanager
def running(background: Background | None):
    """The load runs for as long as the block does."""
    if background is None:
        yield
        return
    background.start()
    try:
        yield
    finally:
        background.stop()
