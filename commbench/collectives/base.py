"""What every collective declares: buffers, exact inputs and result, bus-bandwidth factor, call.

A collective is data, not a branch in the engine (nccl-tests keeps one small file per op the
same way). Sizes follow the nccl-tests convention: ``count`` is the number of elements of the
**largest** buffer a rank holds (the gathered output of allgather, the input of
reduce-scatter, the send buffer of alltoall).

A descriptor works in the ranks of the group it runs in (the whole world, or one group of a
mesh dimension): ``ctx.rank`` and ``ctx.world`` are the rank within the group and its size;
torch.distributed wants global ranks for roots and peers, which ``ctx.global_rank`` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from commbench.collectives import data

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Layout:
    """Elements per buffer for one size; ``send == 0`` means the op works in place on ``recv``."""

    send: int
    recv: int


@dataclass
class Buffers:
    """Views of the preallocated buffers for one size (``send`` may alias ``recv``)."""

    send: torch.Tensor
    recv: torch.Tensor
    count: int = 0  # elements of the largest buffer (the size)


@dataclass(frozen=True)
class OpContext:
    """Everything a descriptor needs to know about the rank it runs on."""

    rank: int  # within the group
    world: int  # the group's size
    group: Any  # torch.distributed.ProcessGroup
    dtype: str
    reduce_op: str
    torch_op: Any  # torch.distributed.ReduceOp for reduce_op
    root: int = 0  # within the group
    inplace: bool = False
    pattern: str = ""
    ranks: tuple[int, ...] = ()  # the group's global ranks in group order; () = the world
    pairs: tuple[tuple[int, int], ...] = ()  # p2p: chosen (sender, receiver) group ranks
    window: int = 64  # p2p unidir/bidir: messages in flight (p2p.WINDOW, OSU's -W)
    backend: str = ""  # the group's backend (nccl, gloo); '' = ask the group, see backend_of
    options: tuple[tuple[str, Any], ...] = ()  # the op's own options (Collective.options)
    # The groups of Collective.subgroups, made before anything was timed: (ranks, group)
    subgroups: tuple[tuple[tuple[int, ...], Any], ...] = ()

    def global_rank(self, rank: int) -> int:
        return self.ranks[rank] if self.ranks else rank

    def subgroup(self, ranks: tuple[int, ...]) -> Any:
        """The group of these global ranks that the sweep made up front (Collective.subgroups).
        Never made here: new_group is collective over the world, and one made at a call's
        bind would be made while other ops' sizes are being timed."""
        for members, group in self.subgroups:
            if members == tuple(ranks):
                return group
        raise LookupError(f"no group of ranks {list(ranks)} was made before the sweep: "
                          "declare it in the op's subgroups()")

    def option(self, name: str, default: Any = None) -> Any:
        """The value of one of the op's own options (``OpOption.name``)."""
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class OpOption:
    """An option that one op takes beyond the shared ones, declared as data by its
    descriptor: the CLI makes a flag of it and hands the value to the ranks in
    ``OpContext.options``, so neither learns what the option means."""

    name: str  # the value's key in OpContext.options / MeasureSpec.op_options
    flags: tuple[str, ...]  # "--servers", or "--baseline/--no-baseline" for a switch
    kind: type  # int, str, float or bool
    default: Any
    help: str
    parse: Callable[[Any], Any] | None = None  # the typed text -> the value the ranks get


def backend_of(ctx: OpContext) -> str:
    """The backend of the group an op runs in: ``ctx.backend``, else torch's answer for the
    group, else '' (no group: a memory estimate). What a backend computes differs (NCCL's
    float average, below) and so does what it requires (NCCL's first batched p2p call)."""
    if ctx.backend or ctx.group is None:
        return ctx.backend
    try:
        import torch.distributed as dist

        return str(dist.get_backend(ctx.group)).lower()
    except Exception:  # a fake group in a test, or torch without the group any more
        return ""


class Collective:
    """Base descriptor. Subclasses set the class attributes and override what differs."""

    name: str = ""
    summary: str = ""
    reduces: bool = False  # takes --op
    rooted: bool = False  # takes --root
    splits: bool = False  # the largest buffer is cut into one chunk per rank
    sized: bool = True  # barrier is not
    in_place_only: bool = False  # torch offers only the in-place form (all_reduce, broadcast)
    has_in_place: bool = False  # torch offers both forms
    min_world: int = 1
    gloo_cuda: bool = False  # gloo moves CUDA tensors for this op (torch's backend table)
    graph_capturable: bool = True  # can run inside a CUDA graph capture
    # Command-line options that mean something for this op only (beyond the shared ones).
    extra_options: frozenset[str] = frozenset()
    # Options only this op has, declared as data (its command offers them; see OpOption).
    options: tuple[OpOption, ...] = ()
    # Shared options whose default differs for this op's command: (option name, default).
    option_defaults: tuple[tuple[str, Any], ...] = ()
    # False: its options shape the world (ps: workers then servers), so `run --ops all`
    # leaves it out and only its own command measures it.
    in_runs: bool = True
    # False: --overlap and --background do not apply (ps: its own roles and groups).
    contended: bool = True
    # busbw = algbw x factor(n), nccl-tests doc/PERFORMANCE.md; factor_text as the docs print it.
    factor: Callable[[int], float] = staticmethod(lambda world: 1.0)
    factor_text: str = "1"

    def busbw_factor(self, world: int, pattern: str = "") -> float:
        return self.factor(world)

    def busbw_factor_in(self, ctx: OpContext) -> float:
        """The factor of a row measured in ``ctx``: an op whose factor depends on its own
        options (ps: max(1, W/S)) overrides this; the others' depends on the group alone."""
        return self.busbw_factor(ctx.world, ctx.pattern)

    def refuse(self, spec: Any, world: int) -> None:
        """Raise UsageError for what this op cannot run (``spec``: the MeasureSpec), before
        any process starts; torch-free. The shared checks are config.validate's."""

    def concurrent_messages(self, ctx: OpContext) -> int:
        """Transfers in flight side by side while one is timed, for a message rate (p2p
        mbw_mr: one per pair, as osu_mbw_mr counts); 0 = the row reports no rate."""
        return 0

    def row_extras(self, ctx: OpContext, count: int) -> dict[str, Any]:
        """Extra row fields (schema.Row names) that follow from the size alone, not from
        anything counted while it ran (alltoallv: its busiest rank's bytes and its split
        matrix's id), so every row of the size carries them, --per-group ones included;
        {} = none."""
        return {}

    def busbw_factor_at(self, ctx: OpContext, count: int) -> float:
        """The factor of a row at ``count`` elements: an op whose traffic's shape changes with
        the size overrides this (alltoallv: (n-1)/n x its busiest rank's bytes over the mean,
        which whole elements move a little from size to size); the others' is
        ``busbw_factor_in``'s."""
        return self.busbw_factor_in(ctx)

    def run_files(self, spec: Any, world: int) -> dict[str, str]:
        """Files this op keeps in the run folder beside its rows (name -> text), written when
        the folder is made, before any rank starts (alltoallv: every split matrix its rows
        will name); torch-free like ``refuse``. {} = none."""
        return {}

    def count_for(self, size_bytes: int, itemsize: int, world: int) -> int:
        """Round a requested size down to whole elements (whole chunks where the op splits)."""
        count = size_bytes // itemsize
        if self.splits:
            return max(world, count - count % world)
        return max(1, count)

    def variants(self, patterns: tuple[str, ...],
                 options: tuple[tuple[str, Any], ...] = ()) -> tuple[str, ...]:
        """The variants a run measures one after the other (p2p: its patterns, ps: its mode
        and the allreduce baseline); '' = one."""
        return ("",)

    def bytes_needed(self, ctx: OpContext, count: int, itemsize: int) -> int:
        """Bytes of buffers this rank allocates at ``count`` (both memory checks use it)."""
        layout = self.layout(ctx, count)
        return (layout.send + layout.recv) * itemsize

    def messages_per_iteration(self, ctx: OpContext, bufs: Buffers) -> int:
        """How many transfers one call makes; a row reports the time of one transfer."""
        return 1

    def active(self, ctx: OpContext) -> bool:
        """Whether this rank takes part (the odd rank out of a p2p pairing does not); idle
        ranks are left out of the row's time, slowest rank and skew."""
        return True

    def is_in_place(self, ctx: OpContext) -> bool:
        return self.in_place_only or (ctx.inplace and self.has_in_place)

    def layout(self, ctx: OpContext, count: int) -> Layout:
        """Default: one buffer, used in place."""
        return Layout(send=0, recv=count)

    def views(self, ctx: OpContext, send: torch.Tensor, recv: torch.Tensor, count: int) -> Buffers:
        """Cut this size's buffers out of the ones allocated for the largest size."""
        layout = self.layout(ctx, count)
        recv_view = recv[: layout.recv]
        send_view = send[: layout.send] if layout.send else recv_view
        return Buffers(send=send_view, recv=recv_view, count=count)

    # ---- exact inputs and results ----------------------------------------------------------
    def chunk(self, ctx: OpContext, count: int) -> int:
        """Elements each rank owns of the largest buffer (the ring's chunk for allreduce)."""
        return max(1, count // ctx.world)

    def pattern(self, ctx: OpContext, count: int) -> data.ReducePattern:
        """The reduce pattern for this size; an average is predicted the way the group's
        backend computes it (NCCL premultiplies floats by 1/n: data.premultiplies_avg)."""
        premultiplied = (ctx.reduce_op == "avg"
                         and data.premultiplies_avg(backend_of(ctx), ctx.dtype))
        return data.reduce_pattern(ctx.reduce_op, ctx.dtype, ctx.world, self.chunk(ctx, count),
                                   premultiplied)

    def input_values(self, ctx: OpContext, count: int) -> data.Values:
        """This rank's input: its row of the reduce pattern, or its own progression."""
        if self.reduces:
            return self.pattern(ctx, count).values(ctx.rank)
        return data.plain_values(ctx.rank, ctx.dtype)

    def prepare(self, ctx: OpContext, bufs: Buffers) -> None:
        """Fill inputs with this rank's pattern and outputs with 0, which no pattern produces."""
        bufs.recv.zero_()
        data.fill(bufs.send, self.input_values(ctx, bufs.count))

    def wrong(self, ctx: OpContext, bufs: Buffers) -> int:
        """Elements of this rank's result that differ from the exact expectation."""
        raise NotImplementedError

    def validation(self, ctx: OpContext, count: int) -> str:
        """What ``wrong`` really verifies at this size: full, partial: <why>, or off: <why>."""
        if self.reduces:
            pattern = self.pattern(ctx, count)
            return data.combine(pattern.status, data.holder_status(pattern, self.checked(ctx,
                                                                                        count)))
        return data.plain_status(self.sources(ctx), self.chunk(ctx, count), ctx.dtype)

    def checked(self, ctx: OpContext, count: int) -> dict[int, tuple[int, int]]:
        """Reductions: the ranks whose result is checked -> (first element, elements)."""
        return {rank: (0, count) for rank in range(ctx.world)}

    def sources(self, ctx: OpContext) -> int:
        """Data ops: how many distinct chunk sources one rank's check tells apart."""
        return ctx.world

    def call(self, ctx: OpContext, bufs: Buffers) -> Callable[[], Any]:
        """A zero-argument callable doing one iteration; bound once, outside the timed loop."""
        raise NotImplementedError


def ring_factor(world: int) -> float:
    """(n-1)/n: each rank sends (and receives) all but its own share."""
    return (world - 1) / world
