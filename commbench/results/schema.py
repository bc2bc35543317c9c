"""One results row per (op, backend, size): the columns of SPEC §5, then extras."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# run.json's format_version: a reader refuses a newer major version; a minor bump only adds.
FORMAT_VERSION = "1.0"

# SPEC §5, in order; extras follow.
COLUMNS = (
    "op",
    "backend",
    "device",
    "world_size",
    "nnodes",
    "dtype",
    "reduce_op",
    "inplace",
    "size_bytes",
    "count",
    "iters",
    "samples",
    "lat_us_p50",
    "lat_us_min",
    "lat_us_mean",
    "lat_us_p90",
    "lat_us_p99",
    "lat_us_max",
    "lat_us_std",
    "lat_us_ci_lo",
    "lat_us_ci_hi",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "slowest_rank",
    "skew_pct",
)
# wall_s: seconds this size took in all (warm-up, calibration, timing, check).
EXTRA_COLUMNS = ("pattern", "root", "lat_us_p10", "unstable", "wall_s")
# Kept in results.jsonl only: the raw samples, for significance tests and re-analysis.
RAW_COLUMNS = ("samples_us",)
# What identifies "the same measurement" across runs (compare joins on these).
KEY_COLUMNS = ("op", "pattern", "backend", "dtype", "world_size", "size_bytes")


@dataclass
class Row:
    op: str
    backend: str
    device: str
    world_size: int
    nnodes: int
    dtype: str
    reduce_op: str
    inplace: bool
    size_bytes: int
    count: int
    iters: int
    samples: int
    lat_us_p50: float
    lat_us_min: float
    lat_us_mean: float
    lat_us_p90: float
    lat_us_p99: float
    lat_us_max: float
    lat_us_std: float
    lat_us_ci_lo: float
    lat_us_ci_hi: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    slowest_rank: int
    skew_pct: float
    pattern: str = ""
    root: int | None = None
    lat_us_p10: float = 0.0
    unstable: str = ""
    wall_s: float = 0.0
    samples_us: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# What a row must have to be compared or reported; every other field may be absent.
REQUIRED = ("op", "backend", "size_bytes", "lat_us_p50")
_KINDS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _field_kinds() -> dict[str, tuple[tuple[type, ...], bool]]:
    """Row field -> (accepted types, may be null), read off the dataclass annotations."""
    kinds = {}
    for spec in fields(Row):
        text = str(spec.type)
        optional = "None" in text
        base = text.replace("| None", "").strip()
        if base in _KINDS:
            kinds[spec.name] = (_KINDS[base], optional)
    return kinds


FIELD_KINDS = _field_kinds()


def row_problem(record) -> str:
    """Why ``record`` is not a usable results row ('' when it is)."""
    if not isinstance(record, dict):
        return f"a row must be a JSON object, not {type(record).__name__}"
    for name in REQUIRED:
        if name not in record:
            return f"the row has no {name!r}"
    for name, (types, optional) in FIELD_KINDS.items():
        if name not in record:
            continue
        value = record[name]
        if value is None and optional:
            continue
        is_bool = isinstance(value, bool)
        if not isinstance(value, types) or (is_bool and bool not in types):
            return f"{name!r} is {value!r}, not {_NAMES[types[-1]]}"
    if record["size_bytes"] < 0:
        return f"'size_bytes' is {record['size_bytes']}, below 0"
    return ""
