"""``commbench record --flight-recorder``: torch's own Flight Recorder keeps the calls.

The full recorder is a TorchDispatchMode: every op a rank dispatches, its matmuls included,
passes through Python to reach it, and that cost a 4-rank DDP job on CPU 1.23-1.33x its step
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

import json
import os
import socket
import time
from pathlib import Path

import torch
import torch.distributed as dist

from commbench.core import compat
from commbench.record import lifecycle

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
    # dumped while the groups it names still exist (the whole job's destroy, not a subgroup's),
    # at exit, and at the SIGTERM torchrun sends hung or failed ranks: their dumps say which
    # call each had reached
    lifecycle.attach(end_step=flight.end_step,
                     before_destroy=lambda group: flight.dump() if group is None else None,
                     at_exit=flight.dump, on_sigterm=flight.dump)
    return flight


def mark_step() -> None:
    if _active is not None:
        _active.end_step(explicit=True)
