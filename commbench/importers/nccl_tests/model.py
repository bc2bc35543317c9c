"""What a nccl-tests file holds, whichever format it came in: one section per run of one binary,
one result per size, two halves (out-of-place, in-place) per result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from commbench.importers.common import Timing

DTYPES = {
    "int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
    "uint32": "uint32", "int64": "int64", "uint64": "uint64", "half": "float16",
    "float": "float32", "double": "float64", "bfloat16": "bfloat16",
    "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
}
# nccl-tests -a: how the ranks' times combine (1, the mean, is the default).
AVERAGE = {0: "rank0", 1: "avg", 2: "min", 3: "max"}
HALF_NAMES = {False: "out-of-place", True: "in-place"}


@dataclass
class Half:
    """The out-of-place or in-place half of a row."""

    inplace: bool
    timing: Timing | None  # None: the tool printed no usable time (nan, 0)
    wrong: int | None  # None: not checked (N/A, null)


@dataclass
class Result:
    line: int | None  # the text's line; None in JSON, where ``where`` names the entry
    where: str
    size: int
    count: int
    type_name: str
    redop: str
    root: int
    halves: list[Half]


@dataclass
class Section:
    """One run of one nccl-tests binary (a log may hold several)."""

    line: int
    program: str = ""
    program_line: int = 0
    version: str = ""
    nccl: str = ""
    iters: int = 0
    agg_iters: int = 1
    validation: int | None = None
    graph: int = 0
    ranks: list[dict] = field(default_factory=list)
    ranks_complete: bool = True
    columns: tuple | None = None
    rank_time: str = "avg"
    timer: str = "host-sync"
    results: list[Result] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    config_seen: bool = False
    notes: list[str] = field(default_factory=list)
    # The tool's environment (-J JSON's "env"; the text does not print it): alltoallv_perf's
    # traffic pattern is set by environment variables (alltoallv.py)
    env: dict[str, str] = field(default_factory=dict)
    env_known: bool = False


def usable(time_us: float) -> bool:
    """A time a row can stand on: nccl-tests prints nan (and 0) when it measured nothing."""
    return math.isfinite(time_us) and time_us > 0


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE -> '2.28.3' (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    if code <= 0:
        return ""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
