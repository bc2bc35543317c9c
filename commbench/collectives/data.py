"""Inputs whose results are exactly predictable, and the chunked fill / compare that use them.

Every value is a small integer, so sums, products, minima and maxima are exact in every dtype
whatever order a backend reduces in (float32 holds integers exactly up to 2**24, float16 up to
2**11, bfloat16 up to 2**8; integer dtypes wrap, which is exact too). Patterns are periodic in
the element index with a small odd period, so a shifted or misplaced chunk is caught.

Fills and checks run in chunks so that validation adds O(chunk) memory, not another buffer:
memory stays bounded by the largest message (SPEC §4). torch is imported inside the functions
to keep ``commbench --help`` free of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

CHUNK = 1 << 18  # elements: the check adds a few MiB, not a buffer
PLAIN_PERIOD = 97

# Largest integer each float dtype represents exactly (every partial sum must stay below it).
EXACT_LIMIT = {"float32": 1 << 24, "float64": 1 << 53, "float16": 1 << 11, "bfloat16": 1 << 8}
# Largest power of two each dtype holds: a product of 2s and 1s must not overflow (or wrap to 0).
MAX_EXPONENT = {"float32": 127, "float64": 1023, "float16": 15, "bfloat16": 127,
                "int8": 6, "uint8": 7, "int32": 30, "int64": 62}

Values = Callable[["torch.Tensor"], "torch.Tensor"]


def plain_values(rank: int) -> Values:
    """Data of ops that move but do not combine values: distinct per rank, never 0."""

    def values(index: torch.Tensor) -> torch.Tensor:
        return (index + rank * 7) % PLAIN_PERIOD + 1

    return values


@dataclass(frozen=True)
class ReducePattern:
    """Per-rank inputs (``table[rank][i % period]``) and their exact reduction."""

    table: torch.Tensor  # int64, world x period
    expected: torch.Tensor  # dtype, period

    def values(self, rank: int) -> Values:
        row = self.table[rank]
        period = row.numel()
        return lambda index: row.to(index.device)[index % period]

    def result(self) -> Values:
        period = self.expected.numel()
        return lambda index: self.expected.to(index.device)[index % period]


@functools.lru_cache(maxsize=16)
def reduce_pattern(reduce_op: str, dtype_name: str, world: int) -> ReducePattern:
    """Inputs for ``reduce_op`` over ``world`` ranks that reduce exactly in ``dtype_name``.

    Cached: prepare and check ask for the same pattern at every size.
    """
    import torch

    dtype = getattr(torch, dtype_name)
    limit = EXACT_LIMIT.get(dtype_name)  # None: integer dtype, wrap-around is exact
    ranks = torch.arange(world).unsqueeze(1)

    if reduce_op in ("sum", "avg"):
        # avg = sum / world: scaling every input by world keeps the quotient an integer.
        scale = world if reduce_op == "avg" else 1
        most = 5 if limit is None else min(5, limit // (world * scale))
        if most >= 1:
            index = torch.arange(most).unsqueeze(0)
            table = ((ranks + index) % most + 1) * scale
        else:
            # Too many ranks for even all-ones to sum exactly: one rank contributes per element.
            index = torch.arange(world).unsqueeze(0)
            table = ((ranks + index) % world == 0).long() * scale
    elif reduce_op == "prod":
        # Each element gets a factor 2 from every third rank, from at most MAX_EXPONENT ranks.
        index = torch.arange(3).unsqueeze(0)
        twos = ((ranks + index) % 3 == 0) & (ranks < 3 * MAX_EXPONENT[dtype_name])
        table = torch.where(twos, 2, 1)
    elif reduce_op in ("min", "max"):
        index = torch.arange(7).unsqueeze(0)
        table = (ranks * 3 + index) % 7 + 1
    else:
        raise ValueError(f"unknown reduce op {reduce_op!r}")

    table = table.long()
    if reduce_op == "avg":
        expected = (table.double().sum(0) / world).to(dtype)
    else:
        combine = {"sum": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}
        rows = table.to(dtype)
        expected = rows[0].clone()
        for row in rows[1:]:
            expected = combine[reduce_op](expected, row)
    return ReducePattern(table=table, expected=expected)


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
