"""ps --mode sync on the wire: shards, partitions, the counted batches, and the two steps.

A worker pushes every partition of shard j to server j and receives the sums back in the same
batch; a server receives every worker's partitions of its shard, sums them, and sends the sum
to every worker. Tags number the partitions of a shard, so a partition can only land where it
belongs (NCCL ignores tags and matches in posting order, which is the same order).
"""

from __future__ import annotations


def shard_bounds(count: int, servers: int) -> list[tuple[int, int]]:
    """[start, stop) of each server's shard: as even as whole elements allow."""
    base, extra = divmod(count, servers)
    bounds, start = [], 0
    for shard in range(servers):
        stop = start + base + (1 if shard < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def partitions(start: int, stop: int, per_partition: int) -> list[tuple[int, int]]:
    """[start, stop) of each partition of a shard, at most ``per_partition`` elements each."""
    return [(a, min(a + per_partition, stop)) for a in range(start, stop, per_partition)]


class Counted:
    """One step's traffic of this rank, counted from the sends and receives it posts."""

    def __init__(self) -> None:
        self.tx = 0
        self.rx = 0

    def reset(self) -> None:
        self.tx = self.rx = 0

    def count(self, dist, ops: list) -> None:
        """Add the bytes of ``ops`` (P2POps about to be posted) to this step's traffic."""
        for op in ops:
            nbytes = op.tensor.numel() * op.tensor.element_size()
            if op.op is dist.isend:
                self.tx += nbytes
            else:
                self.rx += nbytes

    def post(self, dist, ops: list, control: list = ()) -> None:
        """Post ``control`` (small headers, not counted) and ``ops`` (P2POps) as one batch,
        count the bytes of ``ops``, wait for all of them."""
        self.count(dist, ops)
        post(dist, [*control, *ops])


def post(dist, ops: list) -> None:
    """One batch, then wait for all of it. A batch, not loose isend/irecv: NCCL batches them
    into one group launch, and the fault injection of the tests (engine/faults.py) wraps
    batch_isend_irecv."""
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def worker(dist, counted: Counted, gradient, result, servers: list[int], per_partition: int,
           group):
    """A worker's step: ``servers`` are the servers' global ranks, shard j's to server j."""
    P2POp = dist.P2POp
    ops, pulls = [], []
    for server, (start, stop) in zip(servers, shard_bounds(gradient.numel(), len(servers)),
                                     strict=True):
        for tag, (a, b) in enumerate(partitions(start, stop, per_partition)):
            ops.append(P2POp(dist.isend, gradient[a:b], server, group, tag))
            pulls.append(P2POp(dist.irecv, result[a:b], server, group, tag))
    ops += pulls

    def step() -> None:
        counted.reset()
        counted.post(dist, ops)

    return step


def server(dist, counted: Counted, total, slots, peers: list[int], per_partition: int, group):
    """A server's step: ``slots`` holds one shard-sized view per worker (``peers``: their
    global ranks); ``total`` receives the sum that goes back to every worker."""
    P2POp = dist.P2POp
    parts = list(enumerate(partitions(0, total.numel(), per_partition)))
    receives = [P2POp(dist.irecv, slot[a:b], peer, group, tag)
                for slot, peer in zip(slots, peers, strict=True) for tag, (a, b) in parts]
    replies = [P2POp(dist.isend, total[a:b], peer, group, tag)
               for peer in peers for tag, (a, b) in parts]

    def step() -> None:
        counted.reset()
        counted.post(dist, receives)
        total.copy_(slots[0])
        for slot in slots[1:]:
            total.add_(slot)  # small integers: exact in any order
        counted.post(dist, replies)

    return step


def colocated(dist, as_worker: Counted, as_server: Counted, gradient, result, total, slots,
              me: int, ranks: list[int], per_partition: int, group):
    """A rank that is worker ``me`` and the server of shard ``me`` at once (S = W): its own
    shard never leaves it, so it sends (W-1)/W of n as a worker and (W-1)·n/W as a server,
    what reduce-scatter + allgather send. ``slots``: other worker -> its view of my shard;
    ``ranks``: global ranks. Pushes and the sums back have their own tags (2k, 2k+1): one
    pair of ranks carries both directions of both roles."""
    P2POp = dist.P2POp
    bounds = shard_bounds(gradient.numel(), len(ranks))
    own = slice(*bounds[me])
    pushes, pulls, receives, replies = [], [], [], []
    for peer, (start, stop) in enumerate(bounds):
        if peer == me:
            continue
        for k, (a, b) in enumerate(partitions(start, stop, per_partition)):
            pushes.append(P2POp(dist.isend, gradient[a:b], ranks[peer], group, 2 * k))
            pulls.append(P2POp(dist.irecv, result[a:b], ranks[peer], group, 2 * k + 1))
        for k, (a, b) in enumerate(partitions(0, total.numel(), per_partition)):
            receives.append(P2POp(dist.irecv, slots[peer][a:b], ranks[peer], group, 2 * k))
            replies.append(P2POp(dist.isend, total[a:b], ranks[peer], group, 2 * k + 1))

    def step() -> None:
        as_worker.reset()
        as_server.reset()
        as_worker.count(dist, pushes)
        as_server.count(dist, receives)
        post(dist, pushes + receives)  # one batch: every rank sends and receives at once
        total.copy_(gradient[own])
        for slot in slots.values():
            total.add_(slot)
        as_worker.count(dist, pulls)
        as_server.count(dist, replies)
        post(dist, pulls + replies)
        result[own].copy_(total)

    return step
