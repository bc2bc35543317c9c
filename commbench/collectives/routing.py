"""Who sends how much to whom in an MoE layer's all-to-all: a routing, drawn as data.

Pure, seeded and torch-free, so the CLI checks a routing in milliseconds, the tests pin its
numbers without a process, and every rank draws the same matrix without talking to the others.

An expert-parallel group of W ranks hosts E experts, contiguously (expert e on rank e·W // E,
the layout of Megatron's and DeepSpeed's expert parallelism). Every rank routes ``tokens``
tokens; the gate sends each to ``topk`` distinct experts, and a token goes to the rank hosting
each expert it picked (one copy per expert, as the dispatchers that permute tokens by expert
send them). The routing's **weights** ``weights[i][j]`` are the token copies rank i sends to
rank j:

- ``uniform``: every pair the same share (weight 1): the even split, as alltoall makes;
- ``zipf:S``: expert popularity ~ 1/r^S, r the expert's place in a seeded shuffle of the
  experts; each token draws its k experts without replacement, weighted by popularity;
- ``hot:K:F``: K experts (seeded) take a share F of the gate's weight, the others share 1-F;
  drawn the same way (with k > 1 a token picks a hot expert once at most, so the hot experts
  get less than F of the copies when F > 1/k);
- ``file:PATH``: a W x W matrix of bytes from rank i (row) to rank j (column), whitespace or
  comma separated, ``#`` comments skipped (nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_FILE, as CSV).

A size scales the weights: ``split_matrix`` apportions the W·count elements that a size moves
(``count``: the mean a rank sends) in proportion to them, rows first, then within each row, by
largest remainders, in units of whole tokens of ``hidden`` elements when --hidden is given.
So every size has the routing's shape; a uniform routing at a count divisible by W is exactly
alltoall's even split; and a file's bytes come back exactly at --sizes = its mean row sum.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from commbench.core.errors import UsageError

KINDS = ("uniform", "zipf", "hot", "file")
USAGE = "use uniform, zipf:S, hot:K:F or file:PATH"
TOKEN_BLOCK = 4096  # tokens drawn at once: the draw holds TOKEN_BLOCK x E numbers, not T x E

Matrix = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Routing:
    """A parsed ``--routing``: what the gate does, or the matrix a file holds."""

    kind: str
    exponent: float = 0.0  # zipf:S
    hot: int = 0  # hot:K:F, K
    share: float = 0.0  # hot:K:F, F
    path: str = ""  # file:PATH
    matrix: Matrix = ()  # file: bytes from rank i (row) to rank j (column)

    @property
    def text(self) -> str:
        """The routing as the option is written (the same text parses back to it)."""
        if self.kind == "zipf":
            return f"zipf:{self.exponent:g}"
        if self.kind == "hot":
            return f"hot:{self.hot}:{self.share:g}"
        if self.kind == "file":
            return f"file:{self.path}"
        return self.kind


def parse_routing(text: str) -> Routing:
    """``--routing``: uniform, zipf:S, hot:K:F or file:PATH; bad input is one UsageError."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind == "uniform" and not rest:
        return Routing("uniform")
    if kind == "zipf":
        exponent = _number(rest, text, "S")
        if not exponent >= 0 or math.isinf(exponent):
            raise UsageError(f"bad --routing {text!r}: zipf's exponent S must be 0 or more")
        return Routing("zipf", exponent=exponent)
    if kind == "hot":
        hot_text, colon, share_text = rest.partition(":")
        if not colon:
            raise UsageError(f"bad --routing {text!r}: use hot:K:F, e.g. hot:2:0.5 (2 hot "
                             "experts take half the tokens)")
        try:
            hot = int(hot_text)
        except ValueError:
            raise UsageError(f"bad --routing {text!r}: K must be a whole number of experts"
                             ) from None
        share = _number(share_text, text, "F")
        if hot < 1:
            raise UsageError(f"bad --routing {text!r}: K must be at least 1 expert")
        if not 0 < share <= 1:
            raise UsageError(f"bad --routing {text!r}: F is a share of the tokens, in (0, 1]")
        return Routing("hot", hot=hot, share=share)
    if kind == "file" and rest:
        return Routing("file", path=rest, matrix=read_matrix(rest))
    raise UsageError(f"unknown --routing {text!r}: {USAGE}")


def _number(value: str, text: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"bad --routing {text!r}: {name} must be a number") from None


def read_matrix(path: str) -> Matrix:
    """A square matrix of whole, non-negative byte counts from a file (CSV or whitespace)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise UsageError(f"cannot read --routing file:{path}: {error.strerror or error}"
                         ) from None
    rows: list[tuple[int, ...]] = []
    for number, line in enumerate(lines, start=1):
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        try:
            values = tuple(int(value) for value in line.split())
        except ValueError:
            raise UsageError(f"file:{path}:{number}: not whole numbers of bytes: "
                             f"{line[:40]!r}") from None
        if any(value < 0 for value in values):
            raise UsageError(f"file:{path}:{number}: a negative byte count; every entry is "
                             "bytes sent from rank i (row) to rank j (column), 0 or more")
        rows.append(values)
    if not rows:
        raise UsageError(f"file:{path} holds no matrix")
    if any(len(row) != len(rows) for row in rows):
        widths = sorted({len(row) for row in rows})
        raise UsageError(f"file:{path} is not square: {len(rows)} rows of "
                         f"{'/'.join(map(str, widths))} entries (W rows of W, W = ranks)")
    if not any(map(any, rows)):
        raise UsageError(f"file:{path}: every entry is 0, nothing would move")
    return tuple(rows)


def refuse(routing: Routing, experts: int, topk: int, tokens: int, world: int) -> None:
    """Raise UsageError for a routing that cannot be drawn for a group of ``world`` ranks."""
    if routing.kind == "file":
        size = len(routing.matrix)
        if size != world:
            raise UsageError(f"--routing file:{routing.path} is a {size} x {size} matrix, the "
                             f"groups have {world} ranks: it needs {world} x {world}")
        return
    if experts < 1 or topk < 1 or tokens < 1:
        raise UsageError("--experts, --topk and --tokens must be at least 1")
    if topk > experts:
        raise UsageError(f"bad --topk {topk}: a token picks {topk} distinct experts, there are "
                         f"--experts {experts}")
    if experts < world:
        raise UsageError(f"--experts {experts} on groups of {world} ranks: every rank hosts at "
                         f"least one expert; use --experts {world} or more")
    if routing.kind == "hot":
        if routing.hot > experts:
            raise UsageError(f"--routing {routing.text}: {routing.hot} hot experts, there are "
                             f"--experts {experts}")
        if routing.share == 1 and routing.hot < topk:
            raise UsageError(f"--routing {routing.text}: with F = 1 only {routing.hot} experts "
                             f"take tokens, fewer than --topk {topk}")
        if routing.hot == experts and routing.share < 1:
            raise UsageError(f"--routing {routing.text}: every expert is hot, so F must be 1 "
                             "(or use uniform)")


def owner(expert: int, experts: int, world: int) -> int:
    """The rank hosting ``expert``: contiguous blocks, as expert parallelism places them."""
    return expert * world // experts


def popularity(routing: Routing, experts: int, rng) -> list[float]:
    """The gate's weight on each expert (summing to 1), with a seeded order of the experts."""
    order = rng.permutation(experts)  # order[r] = the expert at popularity place r
    weights = [0.0] * experts
    if routing.kind == "zipf":
        for place, expert in enumerate(order):
            weights[int(expert)] = 1.0 / (place + 1) ** routing.exponent
    elif routing.kind == "hot":
        cold = experts - routing.hot
        for place, expert in enumerate(order):
            hot = place < routing.hot
            weights[int(expert)] = (routing.share / routing.hot if hot
                                    else (1 - routing.share) / cold)
    else:
        weights = [1.0] * experts
    total = sum(weights)
    return [w / total for w in weights]


@functools.lru_cache(maxsize=32)
def routing_weights(routing: Routing, experts: int, topk: int, tokens: int, world: int,
                    seed: int) -> Matrix:
    """The W x W weights of a routing: token copies (or a file's bytes) from rank i to rank j.

    Sampled routings draw, for every rank in turn from one generator seeded with ``seed``,
    each token's ``topk`` experts without replacement (Gumbel top-k: the k largest of
    log p + Gumbel noise is a draw of k experts in proportion to p, one after another), so
    each row sums to tokens x topk and the same arguments give the same matrix everywhere.
    """
    if routing.kind == "file":
        return routing.matrix
    if routing.kind == "uniform":
        return tuple(tuple(1 for _ in range(world)) for _ in range(world))
    import numpy as np

    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore"):
        log_p = np.log(np.asarray(popularity(routing, experts, rng)))
    owners = np.asarray([owner(e, experts, world) for e in range(experts)])
    rows = []
    for _sender in range(world):
        sent = np.zeros(world, dtype=np.int64)
        for start in range(0, tokens, TOKEN_BLOCK):
            block = min(TOKEN_BLOCK, tokens - start)
            keys = log_p[None, :] + rng.gumbel(size=(block, experts))
            picked = np.argpartition(-keys, topk - 1, axis=1)[:, :topk]
            sent += np.bincount(owners[picked].ravel(), minlength=world)
        rows.append(tuple(int(v) for v in sent))
    return tuple(rows)


def _apportion(total: int, weights: tuple[int, ...]) -> list[int]:
    """``total`` split in proportion to integer ``weights`` by largest remainders (ties to the
    lower index): each share is its exact quota rounded down or up, and they sum to total."""
    whole = sum(weights)
    if whole == 0:
        return [0] * len(weights)
    shares = [total * w // whole for w in weights]
    left = total - sum(shares)
    by_remainder = sorted(range(len(weights)), key=lambda j: (-(total * weights[j] % whole), j))
    for j in by_remainder[:left]:
        shares[j] += 1
    return shares


@functools.lru_cache(maxsize=256)
def split_matrix(weights: Matrix, count: int, unit: int = 1) -> Matrix:
    """Elements from rank i to rank j at a size whose ranks send ``count`` elements on
    average: the W·count elements apportioned to the rows by their weight, then within each
    row, in whole units of ``unit`` elements (a token of --hidden elements)."""
    world = len(weights)
    units = world * count // unit
    row_units = _apportion(units, tuple(sum(row) for row in weights))
    return tuple(tuple(unit * share for share in _apportion(row_total, row))
                 for row_total, row in zip(row_units, weights, strict=True))


def transpose(matrix: Matrix) -> Matrix:
    """The way back (MoE combine): what rank j received from i returns from j to i."""
    return tuple(zip(*matrix, strict=True)) if matrix else ()


def busiest(matrix: Matrix) -> int:
    """Elements of the busiest rank: the most any rank sends or receives (nccl-tests 2.19
    alltoallv's max(send, recv) over ranks)."""
    sent = [sum(row) for row in matrix]
    received = [sum(column) for column in zip(*matrix, strict=True)]
    return max(sent + received, default=0)


def imbalance(matrix: Matrix) -> float:
    """The busiest rank's elements over the mean a rank sends: 1 = perfectly balanced."""
    world = len(matrix)
    total = sum(map(sum, matrix))
    return busiest(matrix) * world / total if total else 1.0


def matrix_text(matrix: Matrix) -> str:
    """The matrix as CSV rows, the form ``file:PATH`` reads back."""
    return "".join(",".join(str(v) for v in row) + "\n" for row in matrix)


def matrix_id(matrix: Matrix) -> str:
    """A short name for a matrix (its CSV's SHA-256): rows with the same id moved the same
    routing, and ``splits-<id>.csv`` in the run folder holds it."""
    return hashlib.sha256(matrix_text(matrix).encode()).hexdigest()[:10]
