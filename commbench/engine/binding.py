"""Each local rank's measuring thread on a core of its own (``--bind``).

Why: on the 2-core VM, two unbound gloo ranks land in a fast or a slow mode for a launch's whole
life, as the scheduler happens to place their main threads. Six launches of allreduce 4K, 64K
and 1M (5 rounds, --min-time 0.5) read medians whose spread between launches was 0.51 / 0.11 /
0.37 (SD of the log median); with each rank's main thread bound to a core of its own it was
0.14 / 0 / 0, and the medians were 3x lower (236 vs 714 us at 4K). Binding every thread of a
rank instead (``taskset`` per rank, before the process group exists) was as steady but 2x slower
than unbound: gloo's own I/O threads then queue behind the rank's main thread on one core.

So only the calling thread is bound, after the process group exists, and every other thread of
the process (gloo's, the heartbeat's) is spread over all the CPUs the rank may use. A group made
later creates its threads from the bound thread, which they inherit: ``settle`` spreads them
again (Session calls it after it makes any group).

``auto`` binds where commbench started the ranks itself on a CPU-only run and each gets a core
(as Open MPI binds to cores when ranks fit and to nothing when they oversubscribe); under an
external launcher the user's binding (``srun --cpu-bind``, ``numactl``) is left alone unless
``--bind core`` says otherwise. GPU runs are not bound by ``auto``: NCCL places its own threads
near the GPU's NUMA node.
"""

from __future__ import annotations

import contextlib
import os
import threading


def choose(mode: str, local_rank: int, local_world: int, launcher: str, cuda: bool,
           allowed: list[int]) -> int | None:
    """The CPU this rank's measuring thread goes on, or None to leave it where it is."""
    if mode == "none" or not allowed:
        return None
    if mode == "auto" and (launcher != "local" or cuda or local_world > len(allowed)):
        return None
    return allowed[local_rank % len(allowed)]


class Binding:
    """The binding of one rank: ``cpu`` (None: unbound) and the CPUs the rank may use."""

    def __init__(self, cpu: int | None, allowed: list[int]) -> None:
        self.cpu = cpu
        self.allowed = allowed

    @classmethod
    def for_rank(cls, mode: str, env, cuda: bool) -> Binding:
        if not hasattr(os, "sched_setaffinity"):  # not Linux: nothing to bind with
            return cls(None, [])
        allowed = sorted(os.sched_getaffinity(0))
        return cls(choose(mode, env.local_rank, env.local_world, env.launcher, cuda, allowed),
                   allowed)

    def settle(self) -> None:
        """Bind the calling thread to ``cpu`` and spread every other thread of the process
        over ``allowed``. Threads that exit meanwhile are skipped."""
        if self.cpu is None:
            return
        me = threading.get_native_id()
        spread = set(self.allowed)
        for name in os.listdir("/proc/self/task"):
            tid = int(name)
            if tid == me:
                continue
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                os.sched_setaffinity(tid, spread)
        os.sched_setaffinity(0, {self.cpu})

    def facts(self) -> dict:
        """For run.json's hosts: where this rank's measuring thread ran."""
        return {"bound_cpu": self.cpu}
