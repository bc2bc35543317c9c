"""``commbench record --flight-recorder``: torch's own Flight Recorder keeps the calls.

The full recorder is a TorchDispatchMode: every op a rank dispatches, its matmuls included,
passes through Python to reach it, and that cost a 4-rank DDP job on CPU 1.33x its step time
(docs/project/accuracy.md). torch's Flight Recorder keeps each collective's entry in a C++
ring buffer (``TORCH_FR_BUFFER_SIZE`` calls) at no Python cost; this module only notes the
wall-clock time of each step end (the optimizer's step hook, or ``commbench.record.step()``)
and, when the rank ends (exit, ``destroy_process_group`` or SIGTERM), dumps the buffer as torch
does on a watchdog timeout (``DIR/flight-recorder/fr-<rank>``, pickle) beside the step ends
(``DIR/fr-steps-<rank>.json``). ``record`` then reads the dumps as ``import flight-recorder``
does and writes the trace.

What it gives up against the full recorder: completion times on gloo (a dump holds the issue
time only; NCCL's dumps carry ``duration_ms``), so the trace has arrivals, not in-situ
durations; and the calls before the buffer's last ``TORCH_FR_BUFFER_SIZE``.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from commbench.core import compat

DUMPS = "flight-recorder"
STEPS_FILE = "fr-steps-{rank}.json"

_active: Flight | None = None


class Flight:
    """One rank's step ends and the dump it owes at its end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.rank = dist.get_rank()
        self.ends: list[int] = []  # wall-clock ns, the clock of the dump's time_created_ns
        self.explicit = False
        self.dumped = False

    def end_step(self, explicit: bool) -> None:
        """A script that marks its steps (``commbench.record.step()``) is believed over the
        optimizer: it may step the optimizer more than once a step."""
        if explicit and not self.explicit:
            self.explicit, self.ends = True, []
        if explicit or not self.explicit:
            self.ends.append(time.time_ns())

    def dump(self) -> None:
        if self.dumped:
            return
        self.dumped = True
        path = self.folder / DUMPS / f"fr-{self.rank}"
        if not compat.dump_flight_recorder(str(path)):
            print(f"commbench record: rank {self.rank}: this torch wrote no Flight Recorder "
                  "dump", flush=True)
        (self.folder / STEPS_FILE.format(rank=self.rank)).write_text(
            json.dumps({"rank": self.rank, "host": socket.gethostname(),
                        "torch": torch.__version__,
                        "step_ends_ns": self.ends, "explicit": self.explicit}) + "\n")


def start(folder: str | os.PathLike) -> Flight | None:
    """Begin this rank's part (after init_process_group); idempotent."""
    global _active
    if _active is not None or not dist.is_initialized():
        return _active
    flight = Flight(Path(folder))
    _active = flight
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda *_: flight.end_step(explicit=False))
    _dump_before_destroy(flight)
    atexit.register(flight.dump)
    _dump_on_sigterm(flight)
    return flight


def mark_step() -> None:
    if _active is not None:
        _active.end_step(explicit=True)


def _dump_before_destroy(flight: Flight) -> None:
    """The buffer is dumped while the groups it names still exist."""
    from torch.distributed import distributed_c10d

    real = distributed_c10d.destroy_process_group

    @functools.wraps(real)
    def destroy(*args, **kwargs):
        group = args[0] if args else kwargs.get("group")
        if group is None:  # the whole job ends, not one subgroup
            flight.dump()
        return real(*args, **kwargs)

    distributed_c10d.destroy_process_group = destroy
    dist.destroy_process_group = destroy


def _dump_on_sigterm(flight: Flight) -> None:
    """torchrun stops the other ranks with SIGTERM when one fails or hangs: their dumps say
    which call each had reached. A handler the user installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum, frame):
        flight.dump()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
