"""Size grammar: ``8-64M,3M`` <-> byte counts.

Units are powers of 1024 whatever their spelling (``K``, ``KB`` and ``KiB`` all mean 1024), as in
nccl-tests, so a size written in a results table can be pasted back into ``--sizes`` unchanged.
A range ``A-B`` steps by a multiplicative factor from A while the value stays <= B (nccl-tests'
``for (size = min; size <= max; size *= factor)``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from commbench.core.errors import UsageError

UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
}
_FORMAT_UNITS = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_MAX_SIZES = 10_000


class SizeError(UsageError):
    """A --sizes string that does not follow the grammar."""


def parse_size(text: str) -> int:
    """Parse one size such as ``64K`` or ``1.5M`` into bytes (a whole, positive number)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise SizeError(f"bad size {text!r}: expected a number with an optional unit B, K, M or G")
    number, unit = match.groups()
    factor = UNITS.get(unit.upper())
    if factor is None:
        raise SizeError(f"bad size {text!r}: unknown unit {unit!r} (use B, K, M or G)")
    value = Fraction(number) * factor
    if value.denominator != 1:
        raise SizeError(f"bad size {text!r}: not a whole number of bytes")
    if value <= 0:
        raise SizeError(f"bad size {text!r}: sizes must be at least 1 byte")
    return int(value)


def parse_sizes(text: str, factor: float = 2.0) -> list[int]:
    """Parse a comma-separated list of sizes and ranges into sorted, unique byte counts."""
    if not factor > 1:
        raise SizeError(f"bad --factor {factor}: it must be greater than 1")
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise SizeError(f"bad sizes {text!r}: empty item")
    sizes: set[int] = set()
    for item in items:
        if "-" in item:
            low_text, _, high_text = item.partition("-")
            if not low_text.strip() or not high_text.strip():
                missing = "end" if low_text.strip() else "start"
                raise SizeError(f"bad range {item!r}: no {missing}; a range is START-END, "
                                "e.g. 8-64M")
            low, high = parse_size(low_text), parse_size(high_text)
            if low > high:
                raise SizeError(f"bad range {item!r}: the start is larger than the end")
            sizes.update(geometric(low, high, factor))
        else:
            sizes.add(parse_size(item))
        if len(sizes) > _MAX_SIZES:
            raise SizeError(f"bad sizes {text!r}: more than {_MAX_SIZES} sizes")
    return sorted(sizes)


def linear(low: int, high: int, step: int) -> list[int]:
    """nccl-tests' -i: low, low + step, ... while <= high."""
    if (high - low) // step + 1 > _MAX_SIZES:
        raise SizeError(f"bad range {low}-{high} by {step}: more than {_MAX_SIZES} sizes")
    return list(range(low, high + 1, step))


def geometric(low: int, high: int, factor: float) -> list[int]:
    """low, low x factor, ... while <= high (nccl-tests' -f)."""
    if not factor > 1:
        raise SizeError(f"bad --factor {factor}: it must be greater than 1")
    values = []
    size = low
    while size <= high:
        values.append(size)
        # A fractional factor on a tiny size could round to no progress at all.
        size = max(size + 1, int(size * factor))
        if len(values) > _MAX_SIZES:
            raise SizeError(f"bad range {low}-{high}: more than {_MAX_SIZES} sizes")
    return values


def format_size(nbytes: int) -> str:
    """Format bytes in the largest unit that stays exact, e.g. ``1M``, ``1.5K``, ``100``.

    The result always parses back to the same number, so tables and ``--sizes`` agree.
    """
    for unit, scale in _FORMAT_UNITS:
        if nbytes >= scale:
            text = f"{nbytes / scale:.3f}".rstrip("0").rstrip(".")
            if Fraction(text) * scale == nbytes:
                return f"{text}{unit}"
    return str(nbytes)
