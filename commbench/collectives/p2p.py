"""Point-to-point, in the four patterns of the OSU micro-benchmarks and nccl-tests.

- pingpong (osu_latency): the first rank of a pair sends, the second answers; one-way time =
  round trip / 2.
- unidir (osu_bw): a window of back-to-back sends from the same buffer (64 by default, OSU's
  ``-W``), then a 1-element acknowledgement; the time is per message.
- bidir (osu_bibw): both ranks of a pair send a window to each other at once.
- ring (nccl-tests sendrecv): every rank sends to rank+1 and receives from rank-1.
- mbw_mr (osu_mbw_mr): the first half of the ranks each stream a window to a partner in the
  second half (rank r to r + n/2), all pairs at once; the row's ``msg_rate`` is messages per
  second over every pair, its time and bandwidth those of one pair's message.

Pairs are (0,1), (2,3), ... of the group unless ``--peers`` chose them; a rank in no pair idles
in the pair patterns and is left out of the row's time and skew.
"""

from __future__ import annotations

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext, backend_of

PATTERNS = ("pingpong", "unidir", "bidir", "ring", "mbw_mr")
STREAMING = ("unidir", "mbw_mr")  # a window one way, then an acknowledgement
WINDOW = 64  # osu_bw's window: messages in flight per iteration (--window)


def pairs_of(ctx: OpContext) -> tuple[tuple[int, int], ...]:
    """The (first, second) pairs of the pair patterns, in group ranks."""
    if ctx.pairs:
        return ctx.pairs
    if ctx.pattern == "mbw_mr":
        half = ctx.world // 2
        return tuple((r, r + half) for r in range(half))
    return tuple((r, r + 1) for r in range(0, ctx.world - 1, 2))


def partner(ctx: OpContext) -> tuple[int, bool] | None:
    """(the peer, whether this rank is the pair's first), or None for a rank in no pair."""
    for first, second in pairs_of(ctx):
        if ctx.rank == first:
            return second, True
        if ctx.rank == second:
            return first, False
    return None


def _idle() -> None:
    return None


class PointToPoint(Collective):
    name = "p2p"
    summary = "Time point-to-point transfers: --pattern pingpong|unidir|bidir|ring."
    min_world = 2
    factor_text = "1 (bidir: 2, both directions)"
    extra_options = frozenset({"pattern", "peers", "window"})

    def variants(self, patterns: tuple[str, ...], options=()) -> tuple[str, ...]:
        return patterns

    def busbw_factor(self, world: int, pattern: str = "") -> float:
        return 2.0 if pattern == "bidir" else 1.0

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=count, recv=count)

    def messages_per_iteration(self, ctx: OpContext, bufs: Buffers) -> int:
        if ctx.pattern == "pingpong":
            return 2  # a round trip is two one-way transfers
        if ctx.pattern in ("unidir", "bidir", "mbw_mr"):
            return ctx.window
        return 1

    def concurrent_messages(self, ctx: OpContext) -> int:
        return len(pairs_of(ctx)) if ctx.pattern == "mbw_mr" else 0

    def active(self, ctx: OpContext) -> bool:
        return ctx.pattern == "ring" or partner(ctx) is not None

    def _source(self, ctx: OpContext) -> int | None:
        """The group rank whose data this rank receives, or None if it receives nothing."""
        if ctx.pattern == "ring":
            return (ctx.rank - 1) % ctx.world
        found = partner(ctx)
        if found is None or (ctx.pattern in STREAMING and found[1]):
            return None
        return found[0]

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        source = self._source(ctx)
        if source is None:
            return 0
        return data.count_wrong(bufs.recv, data.plain_values(source, ctx.dtype))

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        send, recv, group = bufs.send, bufs.recv, ctx.group
        if ctx.pattern != "pingpong" and backend_of(ctx) == "nccl":
            _open_communicator(dist, send, group)
        if ctx.pattern == "ring":
            ops = [
                dist.P2POp(dist.isend, send, ctx.global_rank((ctx.rank + 1) % ctx.world), group),
                dist.P2POp(dist.irecv, recv, ctx.global_rank((ctx.rank - 1) % ctx.world), group),
            ]
            return _batch(dist, ops)
        found = partner(ctx)
        if found is None:
            return _idle
        peer, first = ctx.global_rank(found[0]), found[1]
        if ctx.pattern == "pingpong":
            return _pingpong(dist, send, recv, peer, group, first)
        window = ctx.window
        if ctx.pattern == "bidir":
            ops = [dist.P2POp(dist.isend, send, peer, group) for _ in range(window)]
            ops += [dist.P2POp(dist.irecv, recv, peer, group) for _ in range(window)]
            return _batch(dist, ops)
        ack = send.new_zeros(1)
        if first:
            ops = [dist.P2POp(dist.isend, send, peer, group) for _ in range(window)]
            return _then(_batch(dist, ops), lambda: dist.recv(ack, peer, group))
        ops = [dist.P2POp(dist.irecv, recv, peer, group) for _ in range(window)]
        return _then(_batch(dist, ops), lambda: dist.send(ack, peer, group))


def _open_communicator(dist, like, group) -> None:
    """A barrier every rank of the group makes, idle ones included, before the first batched
    call. NCCL makes a group's communicator on its first call, and torch requires every rank
    of the group to take part when that first call is a ``batch_isend_irecv``: a batch between
    a pair of a mesh group (or of the world, on older torch) hangs the pair until --timeout.
    The ranks bind the call together (outside the timed loop), so they all get here; a barrier
    is not wrapped by fault injection, so a broken collective cannot skip it."""
    device_ids = [like.device.index] if like.is_cuda else None
    dist.barrier(group=group, device_ids=device_ids)


def _batch(dist, ops):
    batch = dist.batch_isend_irecv

    def iteration() -> None:
        for work in batch(ops):
            work.wait()

    return iteration


def _then(first, second):
    def iteration() -> None:
        first()
        second()

    return iteration


def _pingpong(dist, send, recv, peer, group, first: bool):
    send_, recv_ = dist.send, dist.recv
    if first:

        def iteration() -> None:
            send_(send, peer, group)
            recv_(recv, peer, group)

    else:

        def iteration() -> None:
            recv_(recv, peer, group)
            send_(send, peer, group)

    return iteration


COLLECTIVE = PointToPoint()
