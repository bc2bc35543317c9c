"""Point-to-point, in the four patterns of the OSU micro-benchmarks and nccl-tests.

- pingpong (osu_latency): rank 2k sends to 2k+1, which answers; one-way time = round trip / 2.
- unidir (osu_bw): a window of back-to-back sends, then a 1-element acknowledgement.
- bidir (osu_bibw): both ranks of a pair send a window to each other at once.
- ring (nccl-tests sendrecv): every rank sends to rank+1 and receives from rank-1.

Pairs are (0,1), (2,3), ...; with an odd world the last rank idles in the pair patterns.
A window holds ``min(64, 16 MiB / size)`` messages (at least 1), so a window of large messages
stays short enough for the time budget; OSU uses 64 at every size.
"""

from __future__ import annotations

from commbench.collectives import data
from commbench.collectives.base import Buffers, Collective, Layout, OpContext

PATTERNS = ("pingpong", "unidir", "bidir", "ring")
WINDOW_BYTES = 16 << 20
MAX_WINDOW = 64


def window_for(nbytes: int) -> int:
    return max(1, min(MAX_WINDOW, WINDOW_BYTES // max(1, nbytes)))


def peer_of(ctx: OpContext) -> int | None:
    """The partner in the pair patterns, or None for the odd rank out."""
    peer = ctx.rank ^ 1
    return peer if peer < ctx.world else None


def _idle() -> None:
    return None


class PointToPoint(Collective):
    name = "p2p"
    summary = "Time point-to-point transfers: --pattern pingpong|unidir|bidir|ring."
    min_world = 2
    factor_text = "1 (bidir: 2, both directions)"
    extra_options = frozenset({"pattern"})

    def variants(self, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return patterns

    def busbw_factor(self, world: int, pattern: str = "") -> float:
        return 2.0 if pattern == "bidir" else 1.0

    def layout(self, ctx: OpContext, count: int) -> Layout:
        return Layout(send=count, recv=count)

    def messages_per_iteration(self, ctx: OpContext, bufs: Buffers) -> int:
        if ctx.pattern == "pingpong":
            return 2  # a round trip is two one-way transfers
        if ctx.pattern in ("unidir", "bidir"):
            return window_for(bufs.send.nbytes)
        return 1

    def _source(self, ctx: OpContext) -> int | None:
        """The rank whose data this rank receives, or None if it receives nothing."""
        if ctx.pattern == "ring":
            return (ctx.rank - 1) % ctx.world
        peer = peer_of(ctx)
        if peer is None or (ctx.pattern == "unidir" and ctx.rank % 2 == 0):
            return None
        return peer

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        source = self._source(ctx)
        if source is None:
            return 0
        return data.count_wrong(bufs.recv, data.plain_values(source))

    def call(self, ctx: OpContext, bufs: Buffers):
        import torch.distributed as dist

        send, recv, group = bufs.send, bufs.recv, ctx.group
        if ctx.pattern == "ring":
            ops = [
                dist.P2POp(dist.isend, send, (ctx.rank + 1) % ctx.world, group),
                dist.P2POp(dist.irecv, recv, (ctx.rank - 1) % ctx.world, group),
            ]
            return _batch(dist, ops)
        peer = peer_of(ctx)
        if peer is None:
            return _idle
        if ctx.pattern == "pingpong":
            return _pingpong(dist, send, recv, peer, group, first=ctx.rank % 2 == 0)
        window = self.messages_per_iteration(ctx, bufs)
        if ctx.pattern == "bidir":
            ops = [dist.P2POp(dist.isend, send, peer, group) for _ in range(window)]
            ops += [dist.P2POp(dist.irecv, recv, peer, group) for _ in range(window)]
            return _batch(dist, ops)
        ack = send.new_zeros(1)
        if ctx.rank % 2 == 0:
            ops = [dist.P2POp(dist.isend, send, peer, group) for _ in range(window)]
            return _then(_batch(dist, ops), lambda: dist.recv(ack, peer, group))
        ops = [dist.P2POp(dist.irecv, recv, peer, group) for _ in range(window)]
        return _then(_batch(dist, ops), lambda: dist.send(ack, peer, group))


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
