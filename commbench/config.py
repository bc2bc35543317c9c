"""The frozen description of one run, and the checks that refuse bad input before anything starts.

Everything here is torch-free: the CLI validates a command line in milliseconds, and the same
object is pickled to every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commbench import collectives
from commbench.errors import UsageError

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64")
INTEGER_DTYPES = frozenset({"int8", "uint8", "int32", "int64"})
ITEMSIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
}
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
BACKENDS = ("gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")

DEFAULT_SIZES = "8-64M"
DEFAULT_FACTOR = 2.0
DEFAULT_MIN_TIME = 1.5
DEFAULT_TIMEOUT = 300.0


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
    timeout: float = DEFAULT_TIMEOUT
    root: int = 0
    patterns: tuple[str, ...] = ("pingpong",)  # p2p is measured once per pattern
    blocking: bool = False
    cuda_graph: bool = False
    host_timer: bool = False  # CUDA: perf_counter around a synchronize, as nccl-tests does

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
    names = tuple(collectives.REGISTRY)
    if text.strip().lower() == "all":
        return names
    return parse_list(text.replace("_", "-"), names, "op")


def parse_patterns(text: str) -> tuple[str, ...]:
    """``--pattern``: p2p patterns, a comma list, or ``all``."""
    from commbench.collectives.p2p import PATTERNS

    if text.strip().lower() == "all":
        return PATTERNS
    return parse_list(text, PATTERNS, "pattern")


def validate(config: MeasureSpec, world: int) -> None:
    """Refuse what cannot run, before any process starts (SPEC §7: exit 2, one line)."""
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
    if world < 1:
        raise UsageError(f"bad --nproc {world}: at least 1 rank is needed")
    if not 0 <= config.root < world:
        raise UsageError(f"bad --root {config.root}: the run has ranks 0..{world - 1}")
    for name in config.ops:
        op = collectives.get(name)
        if world < op.min_world:
            raise UsageError(f"{name} needs at least {op.min_world} ranks, the run has {world}")
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
