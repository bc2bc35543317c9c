"""The frozen description of one run, and the checks that refuse bad input before anything starts.

Everything here is torch-free: the CLI validates a command line in milliseconds, and the same
object is pickled to every rank.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from commbench import collectives
from commbench.collectives.p2p import PATTERNS, WINDOW
from commbench.core.dtypes import INTEGER, ITEMSIZE, MEASURED  # noqa: F401 (re-exported)
from commbench.core.errors import UsageError
from commbench.specs import contention

DTYPES = MEASURED
INTEGER_DTYPES = INTEGER
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
RANK_TIMES = ("avg", "max", "min", "rank0")  # nccl-tests -a: 1 avg, 3 max, 2 min, 0 rank 0
BACKENDS = ("gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")

DEFAULT_SIZES = "8-64M"
DEFAULT_FACTOR = 2.0
DEFAULT_MIN_TIME = 1.5
DEFAULT_TIMEOUT = 300.0
# 5 interleaved rounds: on the 2-core VM, A/A pairs of allreduce 4K,64K,1M at the default
# budget gave 6 of 18 rows a false 'slower' with one round, 0 of 18 and 4 of 30 with 5, at the
# same wall time (7.9 s a run). One launch (--repeat 1): a plain run keeps one row per size,
# and with bound ranks it gated cleanly in a quiet hour (0 of 60); in a noisy one launches
# landed on levels 1.3x apart, so a CI gate adds --repeat 5 (README "Comparing in CI").
DEFAULT_ROUNDS = 5
ROUND_ORDERS = ("alternate", "shuffle")  # measure.sampling.round_order
BINDINGS = ("auto", "core", "none")  # engine.binding
DEFAULT_REPEAT = 1


def unsupported(backend: str, dtype: str, reduce_op: str, reduces: bool) -> str:
    """Why ``backend`` cannot run this combination, or '' if it can.

    Found by trying every combination on real process groups (tests/integration/
    test_capabilities.py keeps this table honest): gloo in torch 2.13 rejects avg on integer
    dtypes ("result type Float can't be cast to the desired output type"); NCCL >= 2.10 does all.
    """
    if backend == "gloo" and reduces and reduce_op == "avg" and dtype in INTEGER_DTYPES:
        return f"gloo cannot average {dtype} (avg works on float dtypes only); use --op sum"
    return ""


@dataclass(frozen=True)
class MeasureSpec:
    """What the ranks of one measuring command do. Frozen, torch-free, pickled to every rank.

    The defaults here are the only ones: the CLI shows them and builds the spec from what the
    user typed, leaving everything else to these values.
    """

    ops: tuple[str, ...]
    backends: tuple[str, ...] = ("auto",)
    device: str = "auto"
    nproc: int | None = None  # local ranks when commbench starts them (None: GPUs or 2)
    sizes: tuple[int, ...] = ()
    dtype: str = "float32"
    reduce_op: str = "sum"
    warmup: int | None = None
    iters: int | None = None
    min_time: float = DEFAULT_MIN_TIME
    check: bool = True
    inplace: bool = False
    both_places: bool = False  # out-of-place then in-place, where an op has both
    timeout: float = DEFAULT_TIMEOUT
    root: int = 0
    patterns: tuple[str, ...] = ("pingpong",)  # p2p is measured once per pattern
    blocking: bool = False
    cuda_graph: bool = False
    host_timer: bool = False  # CUDA: perf_counter around a synchronize, as nccl-tests does
    rank_time: str = "avg"  # how per-rank times combine (nccl-tests -a; its default is avg)
    peers: tuple[tuple[int, int], ...] = ()  # p2p pairs (sender, receiver); () = (0,1), (2,3)..
    window: int = WINDOW  # p2p unidir/bidir messages in flight (osu_bw's window)
    mesh: tuple[tuple[str, int], ...] = ()  # (("dp", 2), ("tp", 4)); () = the whole world
    dims: tuple[str, ...] = ()  # mesh dimensions measured in turn; ("all",) = every one
    split: str = ""  # nccl-tests' NCCL_TESTS_SPLIT, "mod:8" ...; becomes a mesh and a dim
    per_group: bool = False  # a row per group as well as the combined row
    # every call's time on every rank kept (results.calls), as
    # docs/reference/metrics-and-formulas.md#per-call-timing-per-call says
    per_call: bool = False
    rounds: int = DEFAULT_ROUNDS  # interleaved passes over an op's sizes (measure.sweep)
    order: str = "alternate"  # how a round visits the sizes (measure.sampling.round_order)
    seed: int = 0  # the shuffle of --order shuffle, the same on every rank and launch
    repeat: int = DEFAULT_REPEAT  # independent launches into one folder (commands.measure)
    bind: str = "auto"  # each rank's measuring thread on a core of its own (engine.binding)
    # Options one op declares itself (collectives.base.OpOption): ((name, value), ...).
    op_options: tuple[tuple[str, object], ...] = ()
    # Contention (specs.contention): a compute kernel beside the collective ('matmul:1024'),
    # another job's allreduce of this many bytes per rank, and that load's ranks (() = all).
    overlap: str = ""
    background: int = 0
    background_ranks: tuple[int, ...] = ()

    def device_for(self, backend: str) -> str:
        """Buffers live on the GPU for NCCL and on the CPU for gloo unless --device says so."""
        if self.device != "auto":
            return self.device
        return "cuda" if backend == "nccl" else "cpu"

    def uses_cuda(self) -> bool:
        return any(self.device_for(backend) == "cuda" for backend in self.backends)


@dataclass(frozen=True)
class OutputSpec:
    """Where a measuring command puts its results and how it shows them (rank 0 only)."""

    out: str = "results"
    name: str | None = None
    force: bool = False  # replace an existing --name folder
    json_rows: bool = False
    quiet: bool = False
    dry_run: bool = False  # print the plan of the sweep, launch nothing
    # a history store's URL: the run is added when it ends (docs/commands/history.md)
    history: str | None = None
    command_line: tuple[str, ...] = field(default_factory=tuple)


DEFAULTS = MeasureSpec(ops=())
OUTPUT_DEFAULTS = OutputSpec()


def parse_list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Split a comma-separated option value and refuse anything not in ``allowed``."""
    items = tuple(dict.fromkeys(item.strip().lower() for item in text.split(",") if item.strip()))
    if not items:
        raise UsageError(f"no {what} given")
    for item in items:
        if item not in allowed:
            raise UsageError(f"unknown {what} {item!r} (choose from {', '.join(allowed)})")
    return items


def parse_ops(text: str) -> tuple[str, ...]:
    """``--ops``: a comma list of command names (``_`` for ``-`` is fine), or ``all``."""
    names = tuple(name for name, op in collectives.REGISTRY.items() if op.in_runs)
    if text.strip().lower() == "all":
        return names
    typed = [item.strip() for item in text.split(",") if item.strip()]
    for item in typed:
        name = item.lower().replace("_", "-")
        if name in collectives.REGISTRY and name not in names:  # ps: its own world layout
            raise UsageError(f"{name} lays out its own ranks: run it as `commbench {name}`")
        if name not in names:  # the name as typed, and the op it most looks like
            raise UsageError(f"unknown op {item!r}{_closest(name, names)} (choose from "
                             f"{', '.join(names)})")
    return parse_list(text.replace("_", "-"), names, "op")


def _closest(name: str, names: tuple[str, ...]) -> str:
    """': did you mean allreduce?' for all_reduce or allredcue; '' when nothing is close.
    Separators are left out of the likeness: torch spells ops all_reduce, commbench
    allreduce."""
    import difflib

    bare = {candidate.replace("-", ""): candidate for candidate in names}
    found = difflib.get_close_matches(name.replace("-", ""), list(bare), n=1, cutoff=0.6)
    return f": did you mean {bare[found[0]]}?" if found else ""


# nccl-tests' (-d) and OSU's type names for the dtypes torch.distributed moves.
DTYPE_ALIASES = {
    "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32",
    "double": "float64", "fp64": "float64", "bf16": "bfloat16", "char": "int8",
    "int": "int32", "long": "int64", "uchar": "uint8", "byte": "uint8",
}
UNSUPPORTED_DTYPES = {"uint32": "int32", "uint64": "int64", "short": "int32", "int16": "int32"}


def parse_dtype(text: str) -> str:
    """``--dtype``: a torch name, or nccl-tests' / OSU's name for it."""
    name = text.strip().lower()
    name = DTYPE_ALIASES.get(name, name)
    if name in DTYPES:
        return name
    if name in UNSUPPORTED_DTYPES:
        raise UsageError(f"--dtype {text}: torch.distributed has no {name} collectives here; "
                         f"use {UNSUPPORTED_DTYPES[name]}")
    raise UsageError(f"unknown dtype {text!r} (choose from {', '.join(DTYPES)}; nccl-tests' "
                     "half/float/double and OSU's char/int/float/double also work)")


NCCL_TESTS_AVERAGE = {"0": "rank0", "1": "avg", "2": "min", "3": "max"}


def parse_rank_time(text: str) -> str:
    """``--rank-time`` / ``-a``: avg, max, min, rank0, or nccl-tests' -a number."""
    name = text.strip().lower()
    name = NCCL_TESTS_AVERAGE.get(name, name)
    if name not in RANK_TIMES:
        raise UsageError(f"unknown --rank-time {text!r} (choose from {', '.join(RANK_TIMES)}, "
                         "or nccl-tests' -a 0-3)")
    return name


def parse_peers(text: str) -> tuple[tuple[int, int], ...]:
    """``--peers 0:8,1:9``: p2p pairs, sender first."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        sender, colon, receiver = item.partition(":")
        try:
            pairs.append((int(sender), int(receiver)))
        except ValueError:
            raise UsageError(f"bad --peers {item!r}: use SENDER:RECEIVER, e.g. 0:8,1:9") from None
        if not colon:
            raise UsageError(f"bad --peers {item!r}: use SENDER:RECEIVER, e.g. 0:8,1:9")
    if not pairs:
        raise UsageError("no --peers given")
    return tuple(pairs)


_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_mesh(text: str) -> tuple[tuple[str, int], ...]:
    """``--mesh dp=2,tp=4``: named dimensions, row-major, the last one contiguous."""
    dims = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, size = item.partition("=")
        name = name.strip()
        if not equals or not _DIM_NAME.fullmatch(name) or name == "all":
            raise UsageError(f"bad --mesh {item!r}: use NAME=SIZE, e.g. dp=2,tp=4")
        try:
            value = int(size)
        except ValueError:
            raise UsageError(f"bad --mesh {item!r}: {size!r} is not a whole number") from None
        if value < 1:
            raise UsageError(f"bad --mesh {item!r}: a dimension needs at least 1 rank")
        if name in (known for known, _ in dims):
            raise UsageError(f"bad --mesh {text!r}: dimension {name!r} is repeated")
        dims.append((name, value))
    if not dims:
        raise UsageError("no --mesh dimensions given")
    return tuple(dims)


def parse_dims(text: str) -> tuple[str, ...]:
    """``--dim tp``, ``--dim tp,dp`` or ``--dim all``."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise UsageError("no --dim given")
    return names


SPLIT_KINDS = ("mod", "div", "and", "or")


def parse_split(text: str) -> str:
    """``--split mod:8|div:8|and:0x7|or:0x7``, normalised to ``mod:8`` / ``div:8``.

    nccl-tests colours rank r with r % K (MOD), r / K (DIV), r & MASK (AND) or r | MASK (OR)
    and runs one communicator per colour. MOD K = dim 0 of an (N/K, K) mesh, DIV K = dim 1;
    AND MASK and OR MASK are the same splits when MASK + 1 is a power of two K.
    """
    kind, colon, value = text.strip().lower().partition(":")
    if kind not in SPLIT_KINDS or not colon:
        raise UsageError(f"bad --split {text!r}: use mod:K, div:K, and:MASK or or:MASK")
    try:
        number = int(value, 0)
    except ValueError:
        raise UsageError(f"bad --split {text!r}: {value!r} is not a number") from None
    if kind in ("and", "or"):
        size = number + 1
        if number < 0 or size & (size - 1):
            raise UsageError(f"--split {text}: only masks of low bits (0x1, 0x3, 0x7, ...) map "
                             "onto a mesh; use --mesh for other layouts")
        kind, number = ("mod" if kind == "and" else "div"), size
    if number < 1:
        raise UsageError(f"bad --split {text!r}: K must be at least 1")
    return f"{kind}:{number}"


def split_mesh(split: str, world: int) -> tuple[tuple[tuple[str, int], ...], str]:
    """The mesh and dimension of a normalised split: mod:K -> dim 'mod' of (mod=N/K, div=K)."""
    kind, _, value = split.partition(":")
    size = int(value)
    if world % size:
        raise UsageError(f"--split {split}: {size} does not divide the {world} ranks")
    return (("mod", world // size), ("div", size)), kind


def sweep_sizes(sizes: str | None, minbytes: str | None, maxbytes: str | None,
                factor: float = DEFAULT_FACTOR, step: str | None = None,
                osu_range: str | None = None) -> list[int]:
    """The sweep from --sizes, nccl-tests' -b/-e/-f/-i and OSU's -m, together (a union).

    -b alone runs up to the default top (64M), -e alone from the default bottom (8); -i steps
    by a number of bytes instead of -f's factor. OSU's -m MIN:MAX doubles from MIN; -m MAX
    starts at 1.
    """
    from commbench.core.sizes import geometric, linear, parse_size, parse_sizes

    chosen: set[int] = set()
    if sizes is not None:
        chosen.update(parse_sizes(sizes, factor))
    if minbytes is not None or maxbytes is not None:
        bottom, top = (parse_size(v) for v in DEFAULT_SIZES.split("-"))
        low = parse_size(minbytes) if minbytes is not None else bottom
        high = parse_size(maxbytes) if maxbytes is not None else max(top, low)
        if low > high:
            raise UsageError(f"bad -b/-e: {minbytes} is larger than {maxbytes}")
        if step is not None:
            chosen.update(linear(low, high, parse_size(step)))
        else:
            chosen.update(geometric(low, high, factor))
    elif step is not None:
        raise UsageError("-i/--step needs a range: give -b and -e (-i is nccl-tests' additive "
                         "size step; OSU's -i, iterations, is -n/--iters here)")
    if osu_range is not None:
        low_text, colon, high_text = osu_range.partition(":")
        low, high = (parse_size(low_text), parse_size(high_text)) if colon else (
            1, parse_size(low_text))
        if low > high:
            raise UsageError(f"bad -m {osu_range}: the start is larger than the end")
        chosen.update(geometric(low, high, 2.0))
    if not chosen:
        chosen.update(parse_sizes(DEFAULT_SIZES, factor))
    return sorted(chosen)


def parse_patterns(text: str) -> tuple[str, ...]:
    """``--pattern``: p2p patterns, a comma list, or ``all``."""
    if text.strip().lower() == "all":
        return PATTERNS
    return parse_list(text, PATTERNS, "pattern")


def resolve_layout(spec: MeasureSpec, world: int) -> MeasureSpec:
    """--split becomes its mesh and dimension; --dim all (or none, with a mesh) every one."""
    from dataclasses import replace

    if spec.split and spec.mesh:
        raise UsageError("--mesh and --split cannot be combined: --split mod:K is --mesh "
                         "mod=N/K,div=K --dim mod")
    if spec.split:
        mesh, dim = split_mesh(spec.split, world)
        if spec.dims:
            raise UsageError("--split chooses the groups itself: drop --dim")
        return replace(spec, mesh=mesh, dims=(dim,))
    if not spec.mesh:
        if spec.dims:
            raise UsageError("--dim needs --mesh (e.g. --mesh dp=2,tp=4 --dim tp) or --split")
        if spec.per_group:
            raise UsageError("--per-group needs groups: give --mesh and --dim, or --split")
        return spec
    product = math.prod(size for _, size in spec.mesh)
    if product != world:
        shape = ",".join(f"{name}={size}" for name, size in spec.mesh)
        raise UsageError(f"--mesh {shape} has {product} ranks, the run has {world}")
    names = tuple(name for name, _ in spec.mesh)
    dims = names if not spec.dims or spec.dims == ("all",) else spec.dims
    for dim in dims:
        if dim not in names:
            raise UsageError(f"--dim {dim} is not a dimension of the mesh ({', '.join(names)})")
    return replace(spec, dims=dims)


def validate(config: MeasureSpec, world: int) -> None:
    """Refuse what cannot run, before any process starts (exit 2, one line:
    docs/reference/exit-codes.md#bad-input)."""
    if config.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {config.dtype!r} (choose from {', '.join(DTYPES)})")
    if config.reduce_op not in REDUCE_OPS:
        raise UsageError(f"unknown op {config.reduce_op!r} (choose from {', '.join(REDUCE_OPS)})")
    if config.device not in DEVICES:
        raise UsageError(f"unknown device {config.device!r} (choose from {', '.join(DEVICES)})")
    if config.iters is not None and config.iters < 1:
        raise UsageError(f"bad --iters {config.iters}: it must be at least 1")
    if config.warmup is not None and config.warmup < 0:
        raise UsageError(f"bad --warmup {config.warmup}: it must not be negative")
    if not config.min_time > 0:
        raise UsageError(f"bad --min-time {config.min_time}: it must be positive")
    if not config.timeout > 0:
        raise UsageError(f"bad --timeout {config.timeout}: it must be positive")
    if config.rounds < 1:
        raise UsageError(f"bad --rounds {config.rounds}: it must be at least 1")
    if config.repeat < 1:
        raise UsageError(f"bad --repeat {config.repeat}: it must be at least 1")
    if config.bind not in BINDINGS:
        raise UsageError(f"unknown --bind {config.bind!r} (choose from "
                         f"{', '.join(BINDINGS)})")
    if config.order not in ROUND_ORDERS:
        raise UsageError(f"unknown --order {config.order!r} (choose from "
                         f"{', '.join(ROUND_ORDERS)})")
    if config.order == "shuffle" and config.rounds < 2:
        raise UsageError("--order shuffle needs --rounds 2 or more (one round visits the "
                         "sizes in order)")
    if world < 1:
        raise UsageError(f"bad --nproc {world}: at least 1 rank is needed")
    if not 0 <= config.root < world:
        raise UsageError(f"bad --root {config.root}: the run has ranks 0..{world - 1}")
    if config.rank_time not in RANK_TIMES:
        raise UsageError(f"unknown --rank-time {config.rank_time!r} (choose from "
                         f"{', '.join(RANK_TIMES)})")
    if config.window < 1:
        raise UsageError(f"bad --window {config.window}: it must be at least 1")
    seen: set[int] = set()
    for sender, receiver in config.peers:
        if sender == receiver:
            raise UsageError(f"bad --peers {sender}:{receiver}: a rank cannot pair with itself")
        for rank in (sender, receiver):
            if not 0 <= rank < world:
                raise UsageError(f"bad --peers {sender}:{receiver}: the run has ranks "
                                 f"0..{world - 1}")
            if rank in seen:
                raise UsageError(f"bad --peers: rank {rank} is in two pairs")
            seen.add(rank)
    ops = [collectives.get(name) for name in config.ops]
    if config.inplace and not any(op.has_in_place for op in ops):
        raise UsageError("--inplace means something for allgather and reduce-scatter only")
    if config.both_places and config.inplace:
        raise UsageError("--both-places measures in-place and out-of-place already: drop "
                         "--inplace")
    if config.both_places and not any(op.has_in_place for op in ops):
        raise UsageError("--both-places means something for allgather and reduce-scatter "
                         "only")
    if config.peers and config.mesh:
        raise UsageError("--peers names global ranks; with --mesh, p2p pairs neighbours along "
                         "the dimension: drop one of them")
    sizes = dict(config.mesh)
    for dim in config.dims:
        for op in ops:
            if sizes[dim] < op.min_world:
                raise UsageError(f"{op.name} needs at least {op.min_world} ranks per group; "
                                 f"dim {dim} has groups of {sizes[dim]}")
            if op.rooted and config.root >= sizes[dim]:
                raise UsageError(f"bad --root {config.root}: with --dim {dim} the root is a rank "
                                 f"within each group of {sizes[dim]} (0..{sizes[dim] - 1})")
    contention.refuse(config.overlap, config.background, config.background_ranks, world,
                      config.per_call, {op.name: op.contended for op in ops})
    for name in config.ops:
        op = collectives.get(name)
        if world < op.min_world:
            raise UsageError(f"{name} needs at least {op.min_world} ranks, the run has {world}")
        op.refuse(config, world)
        for backend in config.backends:
            reason = unsupported(backend, config.dtype, config.reduce_op, op.reduces)
            if reason:
                raise UsageError(reason)
            on_cuda = config.device_for(backend) == "cuda"
            if backend == "nccl" and not on_cuda:
                raise UsageError("nccl moves CUDA tensors only: drop --device cpu or use gloo")
            if config.cuda_graph and (backend != "nccl" or not on_cuda):
                raise UsageError("--cuda-graph needs nccl with CUDA buffers (gloo cannot capture)")
            if backend == "gloo" and on_cuda and not op.gloo_cuda:
                movable = sorted(o.name for o in collectives.REGISTRY.values() if o.gloo_cuda)
                raise UsageError(
                    f"gloo cannot run {name} on CUDA tensors (it can: "
                    f"{', '.join(movable)}); use --backend nccl or --device cpu"
                )
