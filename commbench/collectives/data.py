"""Inputs whose results are exactly predictable and cannot be mistaken for a wrong result.

For every op, dtype and world size n, the expected result

(a) varies between neighbouring elements (a result moved by one element is caught),
(b) differs from every rank's input (a collective that does nothing is caught),
(c) differs between the chunks of different ranks (a neighbour's chunk is caught), and
(d) is exact in the dtype whatever order a backend reduces in (every value and every partial
    sum, product, minimum or maximum is an integer the dtype holds exactly, within its range).

Where a dtype is too small to hold such a pattern at a world size (bfloat16 holds integers up
to 256 only), the pattern says which property it could not keep: a row's ``validation`` is then
``partial: <why>``, and ``off: <why>`` where nothing exact could be checked at all. It never
claims a check it did not make.

How. Element ``i`` takes column ``q = i mod Q`` of a per-rank table, with ``Q`` the smallest
period above n at which chunk s, starting at column ``s·L mod Q``, starts at a column of its
own, and when the expected values of the Q columns are all different (an alphabet of at least
Q values), (a) and (c) hold. Sums and averages use small non-negative integers from every
rank (or from two ranks per column when the dtype has no room for all n), except NCCL's float
average (a sum of x·(1/n) with 1/n rounded in the dtype), which gets one non-zero input per
column; products use powers of two, the same construction on their exponents; minima and
maxima give each column's extreme value to one rank, a different rank for neighbouring columns,
so no rank's input is the result on a whole chunk. Data ops (allgather, broadcast, ...) give
each (source, chunk) its own arithmetic progression modulo a prime P.

Fills and checks run in chunks of elements so that validation adds O(chunk) memory, not another
buffer (docs/reference/metrics-and-formulas.md#the-steps). torch is imported inside the functions to
keep ``commbench --help`` free of it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

CHUNK = 1 << 18  # elements: a check adds a few MiB, not a buffer

# Integers that every float dtype holds exactly: [-limit, limit].
FLOAT_EXACT = {"float32": 1 << 24, "float64": 1 << 53, "float16": 1 << 11, "bfloat16": 1 << 8}
INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(1 << 31), (1 << 31) - 1),
             "int64": (-(1 << 63), (1 << 63) - 1)}
# Largest power of two each dtype holds (products are powers of two), and the smallest
# normal one of each float dtype as 2^-e (no subnormals: a GPU may flush them to zero).
MAX_EXPONENT = {"float32": 127, "float64": 1023, "float16": 15, "bfloat16": 127,
                "int8": 6, "uint8": 7, "int32": 30, "int64": 62}
MIN_NORMAL_EXPONENT = {"float32": 126, "float64": 1022, "float16": 14, "bfloat16": 126}
# Values above this buy nothing (the alphabet needs at most ~n + Q values) and would make
# products of indices overflow int64 in the progressions.
CAP = 1 << 24

Values = Callable[["torch.Tensor"], "torch.Tensor"]


def value_range(dtype: str) -> tuple[int, int]:
    """The integers [lo, hi] that ``dtype`` holds exactly (capped at ±CAP)."""
    if dtype in FLOAT_EXACT:
        limit = min(FLOAT_EXACT[dtype], CAP)
        return -limit, limit
    lo, hi = INT_RANGE[dtype]
    return max(lo, -CAP), min(hi, CAP)


def is_prime(value: int) -> bool:
    if value < 2:
        return False
    return all(value % d for d in range(2, math.isqrt(value) + 1))


def period_for(world: int, chunk: int) -> int:
    """Q: the smallest period above ``world`` (and at least 3) at which the n chunks of
    ``chunk`` elements start at n different columns (d·chunk is no multiple of Q for 0 < d < n)
    and, for two ranks, even, so that the holder of each column's minimum or maximum can
    alternate all the way round the period."""
    q = max(3, world + 1)
    while (world == 2 and q % 2) or any(d * chunk % q == 0 for d in range(1, world)):
        q += 1
    return q


def _holders(world: int, period: int):
    """Who holds each column's minimum or maximum: neighbouring columns (cyclically) never the
    same rank, and never rank s at column s (a one-element chunk of reduce-scatter)."""
    import numpy as np

    holders = (np.arange(period) + 1) % world
    if holders[-1] == holders[0]:  # world >= 3 here: a third rank closes the cycle
        holders[-1] = next(r for r in range(world) if r not in (holders[-2], holders[0]))
    return holders


# ---- data ops: one progression per (source, chunk) --------------------------------------------

@functools.lru_cache(maxsize=16)
def progression_prime(dtype: str) -> int:
    """P: the largest prime whose values 1..P the dtype holds (CAP at most)."""
    p = value_range(dtype)[1]
    while not is_prime(p):
        p -= 1
    return p


def plain_values(key: int, dtype: str = "float32") -> Values:
    """Data of ops that move but do not combine values: ``((j + 1)·m + c) mod P + 1``.

    ``key`` names the source of a chunk (a rank, or a (sender, receiver) pair of alltoall);
    distinct keys below P·(P-1) have distinct (m, c), so their sequences differ in every pair of
    neighbouring elements and in every element when m is the same; the step m ≠ 0 makes
    neighbours differ; values are never 0, which outputs start from.
    """
    p = progression_prime(dtype)
    step = 1 + (key // p) % (p - 1)
    offset = key % p

    def values(index: torch.Tensor) -> torch.Tensor:
        return ((index + 1) * step + offset) % p + 1

    return values


def plain_status(keys: int, chunk: int, dtype: str) -> str:
    """Validation of a data op whose checked chunks come from ``keys`` distinct sources."""
    p = progression_prime(dtype)
    if keys > p * (p - 1):
        return f"partial: {dtype} holds {p * (p - 1)} distinct chunk patterns, {keys} needed"
    if chunk == 1 and keys > p:
        return f"partial: one-element chunks of {keys} sources share {p} {dtype} values"
    return "full"


# ---- reductions ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ReducePattern:
    """Per-rank inputs ``table[rank][i mod Q]`` and their exact reduction ``expected[i mod Q]``.

    ``holders[q]``: the rank whose input equals the result at column q (min/max), else -1.
    ``status``: full, or partial / off with the reason.
    """

    table: np.ndarray  # world x Q, exact values (int64, or float64 for float dtypes)
    expected: np.ndarray  # Q
    holders: np.ndarray  # Q
    status: str

    @property
    def period(self) -> int:
        return self.expected.size

    def values(self, rank: int) -> Values:
        return _periodic(self.table[rank])

    def result(self) -> Values:
        return _periodic(self.expected)


def _periodic(row: np.ndarray) -> Values:
    cache: dict = {}

    def values(index: torch.Tensor) -> torch.Tensor:
        import torch

        key = (index.device, row.dtype)
        if key not in cache:
            cache[key] = torch.from_numpy(row.copy()).to(index.device)
        column = cache[key]
        return column[index % column.numel()]

    return values


def _alphabet(low: int, high: int, period: int) -> tuple[np.ndarray, bool]:
    """``period`` values in [low, high] with neighbours (cyclically: the last is followed by
    the first in memory) different; True when all of them are different.

    With fewer values than the period the values must repeat, which the caller reports.
    """
    import numpy as np

    size = high - low + 1
    if size >= period:
        return np.arange(low, low + period, dtype=np.int64), True
    if size < 2:
        return np.full(period, low, dtype=np.int64), False
    for used in range(size, 2, -1):  # a cycle length that closes on a different value
        if (period - 1) % used:
            return low + np.arange(period, dtype=np.int64) % used, False
    return low + np.arange(period, dtype=np.int64) % 2, False  # one equal pair at the wrap


def _sum_table(world: int, period: int, total: int, scale: int):
    """Columns of integers whose sum ``expected`` stays within [-total, total] (all inputs of a
    column share a sign, so every partial sum does too); rank inputs are ``scale`` x table
    (avg: inputs are n·y, the expected average is Σy).

    Returns (table, expected, all_distinct) or None when not even a constant column fits.
    """
    import numpy as np

    table = np.zeros((world, period), dtype=np.int64)
    columns = np.arange(period)
    if total >= world + period:  # dense: every rank adds 1, one rank per column adds more
        expected = world + 1 + columns
        table[:, :] = 1
        table[(columns + 1) % world, columns] += columns + 1
        return table, expected.astype(np.int64), True
    if total < 2:
        if total < 1:
            return None
        table[columns % world, columns] = 1  # one rank per column: exact, but constant
        return table, np.ones(period, dtype=np.int64), False
    expected, distinct = _alphabet(2, total, period)
    return _two_ranks(world, expected, scale), expected, distinct


def _two_ranks(world: int, expected, scale: int):
    """Each column's ``expected`` (|value| >= 2) split between two neighbouring ranks, of its
    sign, so that neither rank's input (``scale`` x its share) is the result."""
    import numpy as np

    period = expected.size
    table = np.zeros((world, period), dtype=np.int64)
    for q in range(period):
        value = int(expected[q])
        sign, size = (1 if value > 0 else -1), abs(value)
        first, second = q % world, (q + 1) % world
        shares = [(size - size // 2, size // 2), (size - 1, 1), (size - 2, 2)]
        for a, b in shares + shares[:1]:  # the first split again when none is clean
            if a >= 1 and b >= 1 and scale * a != size and scale * b != size:
                break
        table[first, q], table[second, q] = sign * a, sign * b
    return table


def premultiplies_avg(backend: str, dtype: str) -> bool:
    """Whether ``backend`` averages ``dtype`` as a premultiplied sum. NCCL's ncclAvg on floating
    types is ncclPreMulSum with 1/n (src/enqueue.cc): every rank's input is multiplied by 1/n,
    rounded in the dtype, and the products are summed, so the average of n·y is not Σy unless n
    is a power of two; on integers NCCL sums then divides (SumPostDiv), and gloo sums then
    divides on every dtype, which the dense patterns predict exactly."""
    return backend == "nccl" and dtype in FLOAT_EXACT


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 ``values`` rounded (to nearest, ties to even) to ``dtype``, as float64. bfloat16
    keeps the top 16 bits of a float32, rounded; the values here are exact in float32."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    if dtype == "float64":
        return values
    if dtype == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return values.astype({"float32": np.float32, "float16": np.float16}[dtype]).astype(np.float64)


def avg_scale(dtype: str, world: int) -> float:
    """1/n as NCCL rounds it for its premultiplied average: computed in float (double for
    float64), then converted to the dtype (``__float2half(float(1.0/nRanks))``)."""
    import numpy as np

    if dtype == "float64":
        return 1.0 / world
    return float(round_to(np.array([float(np.float32(1.0 / world))]), dtype)[0])


def _premultiplied_avg(dtype: str, world: int, period: int, high: int):
    """avg as NCCL computes it for floats: one rank per column (neighbouring columns different
    ranks) gives a value x, the others 0, so the result, fl(x·fl(1/n)), is exact whatever the
    order of the sum (adding zeros is exact, and so is 0·(1/n)). The x are the smallest
    integers whose results all differ; the result is neither x nor 0, so no input is it.

    Returns (table, expected, all_distinct) or None when not even two results differ.
    """
    import numpy as np

    scale = avg_scale(dtype, world)
    candidates = np.arange(1, min(high, world * (4 * period + 8)) + 1, dtype=np.float64)
    results = round_to(candidates * scale, dtype)  # the product is exact in float64 first
    kept, first = np.unique(results, return_index=True)  # results rise with x: first x each
    if kept.size < 2:
        return None
    index, distinct = _alphabet(0, kept.size - 1, period)
    columns = np.arange(period)
    table = np.zeros((world, period), dtype=np.float64)
    table[(columns + 1) % world, columns] = candidates[first][index]
    return table, kept[index], distinct


@functools.lru_cache(maxsize=64)
def reduce_pattern(reduce_op: str, dtype: str, world: int, chunk: int = 1,
                   premultiplied: bool = False) -> ReducePattern:
    """Inputs for ``reduce_op`` over ``world`` ranks, exact in ``dtype``, for chunks of
    ``chunk`` elements (the share of the buffer each rank owns). ``premultiplied``: the
    backend averages as a sum of x·(1/n) (premultiplies_avg). Cached per size class."""
    import numpy as np

    period = period_for(world, chunk)
    lo, hi = value_range(dtype)
    reasons: list[str] = []
    holders = np.full(period, -1, dtype=np.int64)
    columns = np.arange(period)
    if world == 1:
        expected, _ = _alphabet(1, hi, period)
        table = expected[None, :].copy()
        if reduce_op == "prod":
            exponents, _ = _alphabet(1, MAX_EXPONENT[dtype], period)
            table = (2 ** exponents)[None, :]
            expected = table[0].copy()
        return ReducePattern(_as_dtype(table, dtype), _as_dtype(expected, dtype), holders,
                             "partial: one rank, whose result is its own input")
    if reduce_op == "avg" and premultiplied and world & (world - 1):
        # 1/n is inexact in the dtype (n no power of two): NCCL's products are not integers.
        made = _premultiplied_avg(dtype, world, period, hi)
        if made is None:
            return ReducePattern(np.zeros((world, period)), np.zeros(period), holders,
                                 f"off: {dtype} cannot average {world} ranks exactly")
        table, expected, distinct = made
        if not distinct:
            reasons.append(f"{dtype} holds too few exact averages for {world} ranks: the "
                           "result repeats within a period")
        if np.any(table == expected[None, :]):
            reasons.append("some input equals the result")
    elif reduce_op in ("sum", "avg"):
        scale = world if reduce_op == "avg" else 1
        total = hi // scale  # every partial sum of inputs stays within [0, hi]
        made = _sum_table(world, period, total, scale)
        if made is None:
            return ReducePattern(np.zeros((world, period)), np.zeros(period), holders,
                                 f"off: {dtype} cannot {reduce_op} {world} ranks exactly")
        table, expected, distinct = made
        table = table * scale
        if not distinct:
            reasons.append(f"{dtype} holds too few exact {reduce_op}s for {world} ranks: "
                           "the result repeats within a period")
        if np.any(table == expected[None, :]):
            reasons.append("some input equals the result")
    elif reduce_op == "prod":
        # Powers of two multiply exactly: the sum construction on exponents. Floats also hold
        # 2^-e (1/2, 1/4, ...): columns with negative exponents double the alphabet.
        most = MAX_EXPONENT[dtype]
        exponents, expected_exp, distinct = _sum_table(world, period, most, 1)
        least = MIN_NORMAL_EXPONENT.get(dtype, 0)
        if not distinct and dtype in FLOAT_EXACT and most + least - 2 >= period:
            signed = np.concatenate([np.arange(2, most + 1), -np.arange(least, 1, -1)])
            expected_exp = signed[:period]
            exponents, distinct = _two_ranks(world, expected_exp, 1), True
        if not distinct:
            reasons.append(f"{dtype} holds too few powers of two for {world} ranks: the "
                           "result repeats within a period")
        table = 2.0 ** exponents if dtype in FLOAT_EXACT else 2 ** exponents
        expected = 2.0 ** expected_exp if dtype in FLOAT_EXACT else 2 ** expected_exp
    elif reduce_op in ("min", "max"):
        # One rank per column holds the result; the others hold values beyond it (below for
        # max, above for min), never beyond the dtype's range. Positive values when they fit.
        sign = 1 if reduce_op == "max" else -1
        low, high = (lo + 2, hi) if sign > 0 else (lo, hi - 2)
        positive = max(low, 2)
        if high - positive + 1 >= period:
            low = positive
        expected, distinct = _alphabet(low, high, period)
        if not distinct:
            reasons.append(f"{dtype} holds too few values for {world} ranks: the result "
                           "repeats within a period")
        holders = _holders(world, period)
        ranks = np.arange(world)[:, None]
        others = expected[None, :] - sign * (1 + (ranks + columns[None, :]) % 2)
        table = np.where(ranks == holders[None, :], expected[None, :], others)
    else:
        raise ValueError(f"unknown reduce op {reduce_op!r}")
    return ReducePattern(_as_dtype(table, dtype), _as_dtype(expected, dtype), holders,
                         "partial: " + "; ".join(reasons) if reasons else "full")


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """Exact values as int64 (integer dtypes) or float64 (float dtypes)."""
    import numpy as np

    if dtype in FLOAT_EXACT:
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values, dtype=np.int64)


def holder_status(pattern: ReducePattern, owners: dict[int, tuple[int, int]]) -> str:
    """min/max: a rank whose own input equals the result over everything it checks cannot
    tell a collective that did nothing. ``owners``: checked rank -> (first element, count)."""
    if (pattern.holders < 0).all():
        return ""
    stuck = []
    for rank, (start, count) in owners.items():
        if count >= 2:
            continue  # neighbouring columns have different holders
        if pattern.holders[start % pattern.period] == rank:
            stuck.append(rank)
    if not stuck:
        return ""
    return f"rank {stuck[0]}'s input already is the result of its one element"


def combine(status: str, extra: str) -> str:
    """Add a reason to a status (full -> partial)."""
    if not extra or status.startswith("off"):
        return status
    if status == "full":
        return f"partial: {extra}"
    return f"{status}; {extra}"


# ---- fill and compare, chunk by chunk ----------------------------------------------------------

def fill(view: torch.Tensor, values: Values, start: int = 0) -> None:
    """Write ``values(start + i)`` into ``view[i]``, chunk by chunk."""
    import torch

    for offset in range(0, view.numel(), CHUNK):
        stop = min(offset + CHUNK, view.numel())
        index = torch.arange(start + offset, start + stop, device=view.device)
        view[offset:stop].copy_(values(index))


def count_wrong(view: torch.Tensor, values: Values, start: int = 0) -> int:
    """Count elements of ``view`` that differ from ``values(start + i)``."""
    import torch

    wrong = 0
    for offset in range(0, view.numel(), CHUNK):
        stop = min(offset + CHUNK, view.numel())
        index = torch.arange(start + offset, start + stop, device=view.device)
        expected = values(index).to(view.dtype)
        wrong += int((view[offset:stop] != expected).sum())
    return wrong
