"""The one dtype table: which element types commbench measures, and every type's size in bytes.

Three tables used to drift apart (the measuring commands', the trace format's, the importers'),
so a dtype a trace or an nccl-tests log names but commbench cannot measure (float8, uint64)
still has one size here. ``MEASURED`` are the types a rank can fill and check exactly;
``ITEMSIZE`` covers every name a recorded trace or an imported file may carry.
"""

from __future__ import annotations

MEASURED = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64")
INTEGER = frozenset({"int8", "uint8", "int32", "int64"})
FLOATING = ("bfloat16", "float16", "float32", "float64")

ITEMSIZE: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
    # Named by traces and imported files, never measured:
    "bool": 1,
    "int16": 2,
    "uint32": 4,
    "uint64": 8,
    "complex64": 8,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
}
