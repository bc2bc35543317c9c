"""What ranks tell each other outside the measured traffic.

``Control`` carries block times and decisions over a gloo group with CPU tensors, whatever
backend is being measured. ``Watch`` keeps per-rank heartbeats, positions and errors in the
rendezvous store, so that when a rank hangs or dies the survivors (or the local launcher, which
hosts the store) can say which rank, in which op, at which size.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from commbench.core import compat

WATCH_PREFIX = "commbench/watch"
# How long one connection to a store that is already up may go unanswered before another is
# made (connect_running_store). A store answers in milliseconds; 6 ranks on 2 busy cores
# connect within a second or two.
CONNECT_ATTEMPT_S = 5.0
# The words a rank's log holds when a store connection was retried (bench/startup.py counts
# the starts that a retry rescued by them).
RETRY_WORDS = "connecting again"
STORE_ERROR_WAIT_S = 3.0  # torch ends its own connect retries up to a backoff delay late


class Control:
    """Small collectives on CPU tensors over a gloo group."""

    def __init__(self, group, world: int) -> None:
        self._group = group
        self._world = world
        # Bound now: fault injection may later wrap torch.distributed's functions, and the
        # control channel must keep working while the measured collective is broken.
        self._gather = compat.all_gather_single(dist)
        self._barrier = dist.barrier
        self._gather_object = dist.all_gather_object

    def barrier(self) -> None:
        self._barrier(group=self._group)

    def gather(self, values: list[float]) -> np.ndarray:
        """All-gather a few floats from every rank: world x len(values)."""
        mine = torch.tensor(values, dtype=torch.float64)
        out = torch.empty(self._world * len(values), dtype=torch.float64)
        self._gather(out, mine, group=self._group)
        return out.view(self._world, len(values)).numpy()

    def objects(self, value: object) -> list:
        out: list = [None] * self._world
        self._gather_object(out, value, group=self._group)
        return out


def heartbeat_interval(timeout: float) -> float:
    """Often enough to tell a stopped rank within the timeout's grace, rarely enough to be free."""
    return max(0.2, min(2.0, timeout / 10))


def connect(
    host: str, port: int, timeout: float, is_master: bool = False, world: int | None = None,
    store_is_up: bool = False,
):
    """A store connection. A master for a loopback address listens on loopback only (a
    TCPStore binds every interface unless handed a socket); for another address it must be
    reachable from the other nodes. ``store_is_up``: the store was started before this rank
    (a launcher's agent hosts it), so a connection it does not answer is tried again
    (connect_running_store) rather than waited on."""
    if is_master and host.startswith("127."):
        store, _ = compat.listening_store(dist, host, port, world, timeout,
                                          wait_for_workers=False)
        return store
    if store_is_up and not is_master:
        return connect_running_store(host, port, timeout)
    return dist.TCPStore(host, port, world, is_master, timedelta(seconds=timeout),
                         wait_for_workers=False)


def connect_running_store(host: str, port: int, timeout: float, attempt: float | None = None):
    """A client of a store that is up, made in attempts of ``attempt`` seconds until
    ``timeout``; every attempt after the first is said on stderr (the rank's log).

    A TCPStore client's constructor connects, then waits for the server's answer to its
    validation and ping with no time limit (torch 2.13: a server that accepts and never
    answers holds it in recv() for ever, whatever the timeout). A local rank was once caught
    stalled in this constructor, on what is not known (docs/reference/exit-codes.md); if it
    was a silent server, a fresh connection gets the answer. The constructor cannot be
    interrupted, so each attempt runs in a thread of its own (the call releases the GIL); one
    that has not answered in time is left behind, a daemon thread with one idle socket. An
    error the store raises itself (refused, timed out) ends the attempts as before.
    """
    attempt = CONNECT_ATTEMPT_S if attempt is None else attempt
    deadline = time.monotonic() + timeout
    tries = 0
    while True:
        tries += 1
        outcome: dict = {}

        def attempt_once(outcome: dict = outcome) -> None:
            try:
                outcome["store"] = dist.TCPStore(host, port, None, False,
                                                 timedelta(seconds=timeout),
                                                 wait_for_workers=False)
            except Exception as error:  # handed to the caller's thread
                outcome["error"] = error

        thread = threading.Thread(target=attempt_once, name=f"commbench-store-connect-{tries}",
                                  daemon=True)
        thread.start()
        thread.join(max(0.0, min(attempt, deadline - time.monotonic())))
        if not outcome and time.monotonic() >= deadline:
            thread.join(STORE_ERROR_WAIT_S)  # the store's own error, due at the same deadline
        if "store" in outcome:
            return outcome["store"]
        if "error" in outcome:
            raise outcome["error"]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the store at {host}:{port} did not answer any of {tries} "
                               f"connections within {timeout:g}s")
        print(f"commbench: the store at {host}:{port} did not answer connection {tries} "
              f"within {attempt:g}s; {RETRY_WORDS}", file=sys.stderr, flush=True)


class Watch:
    """Heartbeats, positions and error reports of one rank, kept in the shared store."""

    def __init__(self, store, rank: int, world: int, interval: float) -> None:
        self._store = dist.PrefixStore(WATCH_PREFIX, store)
        self.rank = rank
        self.world = world
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start_heartbeat(self, beat_store) -> None:
        """Beat from a thread with its own store connection (a client is not thread-safe)."""
        beats = dist.PrefixStore(WATCH_PREFIX, beat_store)
        key = f"hb/{self.rank}"

        def beat() -> None:
            while not self._stop.wait(self.interval):
                try:
                    beats.add(key, 1)
                except Exception:  # the store is gone: the run is ending anyway
                    return

        beats.add(key, 1)
        self._thread = threading.Thread(target=beat, name="commbench-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def await_arrivals(self, seconds: float, poll: float = 0.05) -> list[int]:
        """Wait up to ``seconds`` for every rank's first heartbeat; returns the ranks still
        missing (the caller goes on: its rendezvous then names them)."""
        deadline = time.monotonic() + seconds
        while True:
            missing = [r for r in range(self.world) if self._store.add(f"hb/{r}", 0) == 0]
            if not missing or time.monotonic() >= deadline:
                return missing
            time.sleep(poll)

    def at(self, where: str) -> None:
        self._store.set(f"where/{self.rank}", where)

    def report(self, kind: str, message: str) -> None:
        record = {"rank": self.rank, "kind": kind, "message": message, "time": time.time()}
        with contextlib.suppress(Exception):
            self._store.set(f"error/{self.rank}", json.dumps(record))

    def lagging(self, position: str) -> list[tuple[int, str]]:
        """Ranks whose last reported position is not ``position`` (they never got there)."""
        found = []
        for rank in range(self.world):
            key = f"where/{rank}"
            if self._store.check([key]):
                where = self._store.get(key).decode()
                if where != position:
                    found.append((rank, where))
        return found

    def silent_ranks(self) -> tuple[list[int], list[int]]:
        """Ranks whose heartbeat stands still over two intervals, and ranks that never beat."""
        return silent_ranks(self._store, self.world, self.interval)


def silent_ranks(store, world: int, interval: float) -> tuple[list[int], list[int]]:
    """(stopped, never arrived): ``store`` is the watch-prefixed store."""
    before = [store.add(f"hb/{rank}", 0) for rank in range(world)]
    time.sleep(2.5 * interval)
    after = [store.add(f"hb/{rank}", 0) for rank in range(world)]
    missing = [rank for rank in range(world) if after[rank] == 0]
    stopped = [r for r in range(world) if after[r] and after[r] == before[r]]
    return stopped, missing


def read_reports(store, world: int) -> tuple[dict[int, dict], dict[int, str]]:
    """Error records and last positions of every rank (``store`` is the raw store)."""
    watch = dist.PrefixStore(WATCH_PREFIX, store)
    errors: dict[int, dict] = {}
    positions: dict[int, str] = {}
    for rank in range(world):
        if watch.check([f"error/{rank}"]):
            errors[rank] = json.loads(watch.get(f"error/{rank}"))
        if watch.check([f"where/{rank}"]):
            positions[rank] = watch.get(f"where/{rank}").decode()
    return errors, positions
