"""The contention options of the measuring commands, parsed and checked before anything starts.

``--overlap KIND:SIZE`` runs a compute kernel beside the collective on every rank (KIND
``matmul``: square SIZE x SIZE matrices of the run's dtype, multiplied again and again; SIZE 0
disables the compute, a control run). ``--background SIZE`` runs another job's traffic beside
it: an allreduce of SIZE bytes per rank, continuously, on a second process group of the same
ranks (or of ``--background-ranks``). What the rows then report is defined in
docs/reference/metrics-and-formulas.md ("Overlap and contention").

Torch-free, like the rest of specs/: the CLI refuses bad input in milliseconds.
"""

from __future__ import annotations

from commbench.core.errors import UsageError

OVERLAP_KINDS = ("matmul",)
MAX_MATMUL = 65536  # a 64K x 64K float32 matrix is 16 GiB: beyond that a typo, not a load


def parse_overlap(text: str) -> str:
    """``--overlap matmul:1024`` -> ``'matmul:1024'`` (normalised: lower-case kind, integer
    size). SIZE is the side of the square matrices, in elements (not bytes)."""
    kind, colon, size = text.strip().lower().partition(":")
    if kind not in OVERLAP_KINDS:
        raise UsageError(f"bad --overlap {text!r}: unknown kind {kind!r} (choose from "
                         f"{', '.join(OVERLAP_KINDS)}; e.g. matmul:1024)")
    if not colon:
        raise UsageError(f"bad --overlap {text!r}: give KIND:SIZE, e.g. matmul:1024")
    try:
        side = int(size.strip())
    except ValueError:
        raise UsageError(f"bad --overlap {text!r}: {size!r} is not a whole number (the side "
                         "of the square matrices, e.g. matmul:1024)") from None
    if not 0 <= side <= MAX_MATMUL:
        raise UsageError(f"bad --overlap {text!r}: the side must be 0 (no compute) to "
                         f"{MAX_MATMUL}")
    return f"{kind}:{side}"


def overlap_side(overlap: str) -> int:
    """The matrix side of a normalised ``--overlap`` ('matmul:1024' -> 1024)."""
    return int(overlap.partition(":")[2])


def parse_background(text: str) -> int:
    """``--background SIZE``: bytes per rank of the load's allreduce (the --sizes grammar)."""
    from commbench.core.sizes import SizeError, parse_size

    try:
        return parse_size(text)
    except SizeError as error:
        raise UsageError(f"bad --background: {error}") from None


def parse_ranks(text: str) -> tuple[int, ...]:
    """``--background-ranks 0,1`` (or a range ``0-3``): the ranks of the load's group."""
    ranks: list[int] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        first, dash, last = item.partition("-")
        try:
            span = range(int(first), int(last) + 1) if dash else [int(first)]
        except ValueError:
            raise UsageError(f"bad --background-ranks {item!r}: use ranks such as 0,1 or "
                             "0-3") from None
        ranks.extend(span)
    if not ranks:
        raise UsageError("no --background-ranks given")
    if len(set(ranks)) != len(ranks):
        raise UsageError(f"bad --background-ranks {text!r}: a rank is named twice")
    return tuple(sorted(ranks))


def background_ranks(background: int, ranks: tuple[int, ...], world: int) -> tuple[int, ...]:
    """The load's group: the listed ranks, else the whole world; () without --background."""
    if not background:
        if ranks:
            raise UsageError("--background-ranks needs --background SIZE")
        return ()
    chosen = ranks or tuple(range(world))
    if len(chosen) > world:
        raise UsageError(f"--background-ranks names {len(chosen)} ranks, the run has {world}")
    outside = [rank for rank in chosen if not 0 <= rank < world]
    if outside:
        raise UsageError(f"bad --background-ranks: rank {outside[0]} is not in the run "
                         f"(ranks 0..{world - 1})")
    if len(chosen) < 2:
        raise UsageError("--background-ranks needs at least 2 ranks (an allreduce of one "
                         "rank moves nothing)")
    return chosen


def background_label(background: int, ranks: tuple[int, ...], world: int) -> str:
    """What a row's ``background`` column says: '64M' over the whole world, '64M@0,1' over
    some ranks; '' without a load."""
    if not background:
        return ""
    from commbench.core.sizes import format_size

    size = format_size(background).replace(" ", "")
    if not ranks or len(ranks) == world:
        return size
    return f"{size}@{','.join(map(str, ranks))}"


def refuse(overlap: str, background: int, ranks: tuple[int, ...], world: int,
           per_call: bool, ops_overlap: dict[str, bool]) -> None:
    """What cannot run together, before any process starts (one line, exit 2).
    ``ops_overlap``: op name -> whether its descriptor can be measured under contention."""
    if overlap or background:
        refused = [name for name, ok in ops_overlap.items() if not ok]
        if refused:
            flag = "--overlap" if overlap else "--background"
            raise UsageError(f"{refused[0]} lays out its own ranks and roles: {flag} does not "
                             "apply to it")
    if overlap and per_call:
        raise UsageError("--overlap times blocks of calls beside the compute: drop --per-call")
    background_ranks(background, ranks, world)
