"""ps's own options (declared as data, the CLI makes the flags) and what it refuses."""

from __future__ import annotations

from typing import Any

from commbench.collectives.base import OpOption
from commbench.core.dtypes import ITEMSIZE

MODES = ("sync", "async")
DEFAULT_PARTITION = "4M"  # BytePS's default partition bytes (BYTEPS_PARTITION_BYTES)


def _parse_size(text: str) -> int:
    from commbench.core.sizes import parse_size

    return parse_size(text)


def modes_of(text: str | None) -> tuple[str, ...]:
    """--mode: sync, async, or both (sync,async), measured in that order."""
    return tuple(dict.fromkeys(m.strip() for m in (text or "sync").split(",") if m.strip()))


OPTIONS = (
    OpOption("servers", ("--servers",), int, 1,
             "Server ranks: the last S of the world; the first W are workers."),
    OpOption("partition", ("--partition",), str, DEFAULT_PARTITION,
             "Largest message: every shard is cut into partitions of at most this size.",
             parse=_parse_size),
    OpOption("mode", ("--mode",), str, "sync",
             "sync (every worker ends each step with the full sum), async (versioned "
             "pushes, a staleness bound), or both: sync,async."),
    OpOption("staleness", ("--staleness",), int, None,
             "async: versions a push may lag its shard, and a worker lead the slowest "
             "(default: unbounded, recorded as staleness_bound -1)."),
    OpOption("baseline", ("--baseline/--no-baseline",), bool, True,
             "Also measure allreduce over the W workers at the same sizes."),
    OpOption("colocate", ("--colocate/--dedicated",), bool, False,
             "sync: a server on every worker (S = W, no server ranks): it moves what "
             "reduce-scatter + allgather move."),
)


def refuse(spec: Any, world: int) -> None:
    """What ps cannot run, refused in one line before any process starts (torch-free)."""
    from commbench.core.errors import UsageError

    chosen = dict(spec.op_options)
    servers = int(chosen.get("servers", 1))
    modes = modes_of(chosen.get("mode"))
    for mode in modes:
        if mode not in MODES:
            raise UsageError(f"unknown --mode {mode!r} (choose from {', '.join(MODES)}, "
                             "or both: sync,async)")
    if chosen.get("colocate"):
        if servers != 1:
            raise UsageError("--colocate puts a server on every worker (S = W): drop "
                             "--servers")
        if "async" in modes:
            raise UsageError("--colocate is measured in --mode sync only")
        servers = 0  # no server ranks
    if servers < 1 and not chosen.get("colocate"):
        raise UsageError(f"bad --servers {servers}: at least 1 server is needed")
    if servers >= world:
        raise UsageError(f"--servers {servers} leaves no worker: the run has {world} ranks "
                         f"(W workers then S servers); use --nproc {servers + 1} or more")
    if chosen.get("staleness") is not None and "async" not in modes:
        raise UsageError("--staleness bounds asynchronous training: add --mode async")
    if "async" in modes and "nccl" in spec.backends:
        raise UsageError("--mode async needs gloo: a server takes pushes in the order they "
                         "arrive, and NCCL has no receive from any source")
    if chosen.get("staleness") is not None and chosen["staleness"] < 0:
        raise UsageError(f"bad --staleness {chosen['staleness']}: it must not be negative")
    if spec.mesh or spec.split or spec.dims:
        raise UsageError("ps lays the ranks out itself (W workers then S servers): drop "
                         "--mesh, --dim and --split")
    partition = int(chosen.get("partition", _parse_size(DEFAULT_PARTITION)))
    itemsize = ITEMSIZE[spec.dtype]
    if partition < itemsize:
        raise UsageError(f"bad --partition {partition} B: smaller than one {spec.dtype} "
                         "element")
    smallest = min(spec.sizes) if spec.sizes else itemsize
    elements = max(1, smallest // itemsize)
    workers = world - servers
    if workers < 2 and chosen.get("baseline", True):
        # One worker has nobody to reduce with: its allreduce "baseline" is a copy, whose
        # busbw is 0 and whose ratio to ps means nothing (it used to be printed unremarked).
        raise UsageError(f"{workers} worker has no allreduce to compare with: use --nproc "
                         f"{servers + 2} or more, or --no-baseline")
    servers = servers or world  # colocated: one shard per rank
    if servers > elements:
        raise UsageError(f"--servers {servers}: the smallest size ({smallest} B, {elements} "
                         f"{spec.dtype} element(s)) has fewer partitions than servers; "
                         f"raise --sizes to at least {servers * itemsize} B or use fewer "
                         "servers")
