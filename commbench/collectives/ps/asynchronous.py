"""ps --mode async: versioned pushes under a staleness bound (stale synchronous parallel).

Every push carries the version it was computed from: the worker's clock, the number of steps
it has finished at this size. Server j keeps, for its shard, each worker's clock and the newest
version it applied; a push ``newest - version`` versions behind is applied when that lag is at
most ``s`` and rejected (and counted) otherwise: optimistic, no lock is taken, a late push is
refused rather than waited for. A worker's pull waits while it is more than ``s`` versions ahead
of the slowest worker: the server holds the reply until the slowest catches up (SSP, Ho et al.
2013), which is what keeps every push within the bound; a rejected push means the bound broke.

A server takes the pushes in the order they arrive (a receive from any source: gloo only,
NCCL has none), W per call, so over a block of k calls every rank handles k steps and the
ranks meet at the block's end as for any op. The stats of a size (steps, step time, pull
wait, the largest lag seen, rejections) run over every step at that size; the byte counters
are those of the last step. Validation: after a reset every push is version 0, so the check's
step applies all of them: the server's shard is the exact sum, and each worker's pull is the
exact sum of the pushes the server had applied when it answered (their mask is in the reply).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from commbench.collectives.ps.synchronous import partitions, shard_bounds

HEADER_TAG = 0  # pushes and replies: a small float64 header first, the partitions after
DATA_TAG = 1  # partition k of a shard travels with tag DATA_TAG + k


@dataclass
class VersionBook:
    """One server's versions of its shard: pure bookkeeping, no torch (unit-tested alone)."""

    workers: int
    staleness: float  # s; inf = unbounded
    clocks: list[int] = field(default_factory=list)
    newest: int = -1
    applied: int = 0  # bitmask of the workers whose pushes since the reset were applied
    held: list[int] = field(default_factory=list)  # workers whose reply waits
    max_lag: int = 0  # the largest lag of any push received at this size (never reset)
    rejected: int = 0  # pushes refused as too stale at this size (never reset)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A fresh start (before a size's first step and before the check's): versions only."""
        self.clocks = [0] * self.workers
        self.newest, self.applied, self.held = -1, 0, []

    def push(self, worker: int, version: int) -> bool:
        """A push from ``worker`` computed from ``version``: True when it is applied."""
        lag = max(0, self.newest - version)
        self.max_lag = max(self.max_lag, lag)
        self.clocks[worker] = version + 1
        self.held.append(worker)
        if lag > self.staleness:
            self.rejected += 1
            return False
        self.newest = max(self.newest, version)
        self.applied |= 1 << worker
        return True

    def releasable(self) -> list[int]:
        """The held workers that are now at most s versions ahead of the slowest."""
        slowest = min(self.clocks)
        ready = [w for w in self.held if self.clocks[w] - slowest <= self.staleness]
        self.held = [w for w in self.held if w not in ready]
        return ready


@dataclass
class WorkerStats:
    """A worker's steps at one size: their count, their time and the pull waits in them."""

    clock: int = 0  # steps since the reset: the version of the next push
    steps: int = 0
    step_s: float = 0.0
    wait_s: float = 0.0
    masks: list[int] = field(default_factory=list)  # per server: the pushes in its last reply


def source_of(work) -> int:
    """The rank a receive from any source got its message from (public name first)."""
    source = getattr(work, "source_rank", None) or work._source_rank
    return int(source())


def worker(dist, counted, stats: WorkerStats, gradient, result, servers: list[int],
           per_partition: int, group):
    """A worker's async step: to each server (global ranks ``servers``, shard j to server j)
    a version header and the shard's partitions; then each server's header and shard."""
    import torch

    P2POp = dist.P2POp
    headers_out = [torch.zeros(2, dtype=torch.float64) for _ in servers]
    headers_in = [torch.zeros(2, dtype=torch.float64) for _ in servers]
    push_heads = [P2POp(dist.isend, h, s, group, HEADER_TAG) for h, s in zip(
        headers_out, servers, strict=True)]
    pull_heads = [P2POp(dist.irecv, h, s, group, HEADER_TAG) for h, s in zip(
        headers_in, servers, strict=True)]
    pushes, pulls = [], []
    for server_rank, (start, stop) in zip(servers, shard_bounds(gradient.numel(),
                                                                len(servers)), strict=True):
        for k, (a, b) in enumerate(partitions(start, stop, per_partition)):
            pushes.append(P2POp(dist.isend, gradient[a:b], server_rank, group, DATA_TAG + k))
            pulls.append(P2POp(dist.irecv, result[a:b], server_rank, group, DATA_TAG + k))
    clock = time.perf_counter
    # One batch a step, pushes first, as in sync (a straggler's delay fault, which wraps
    # batch_isend_irecv, then costs both modes alike); the pull's wait is what follows the
    # pushes' completion.
    ops = [*push_heads, *pushes, *pull_heads, *pulls]
    first_pull = len(push_heads) + len(pushes)

    def step() -> None:
        started = clock()
        counted.reset()
        for header in headers_out:
            header[0] = stats.clock
        counted.count(dist, pushes + pulls)
        works = dist.batch_isend_irecv(ops)
        split = first_pull if len(works) == len(ops) else len(works)  # one work per op: gloo
        for work in works[:split]:
            work.wait()
        pushed = clock()
        for work in works[split:]:
            work.wait()
        done = clock()
        stats.clock += 1
        stats.steps += 1
        stats.step_s += done - started
        stats.wait_s += done - pushed
        stats.masks = [int(header[1]) for header in headers_in]

    return step


def server(dist, counted, book: VersionBook, params, incoming, peers: list[int],
           per_partition: int, group):
    """A server's async call: W pushes, in the order they arrive, each applied or rejected,
    and every reply the bound lets go sent with the shard as it is now."""
    import torch

    P2POp = dist.P2POp
    parts = list(enumerate(partitions(0, params.numel(), per_partition)))
    receives = [[P2POp(dist.irecv, incoming[a:b], peer, group, DATA_TAG + k)
                 for k, (a, b) in parts] for peer in peers]
    replies = []
    for peer in peers:
        header = torch.zeros(2, dtype=torch.float64)
        replies.append((header, P2POp(dist.isend, header, peer, group, HEADER_TAG),
                        [P2POp(dist.isend, params[a:b], peer, group, DATA_TAG + k)
                         for k, (a, b) in parts]))
    header_in = torch.zeros(2, dtype=torch.float64)
    index = {peer: worker for worker, peer in enumerate(peers)}

    def step() -> None:
        counted.reset()
        for _ in peers:
            work = dist.irecv(header_in, group=group, tag=HEADER_TAG)  # from any worker
            work.wait()
            worker = index[source_of(work)]
            counted.post(dist, receives[worker])
            if book.push(worker, int(header_in[0])):
                params.add_(incoming)
            for ready in book.releasable():
                header, header_op, ops = replies[ready]
                header[0], header[1] = book.newest, book.applied
                counted.post(dist, ops, control=[header_op])

    return step
