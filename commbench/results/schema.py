"""One results row per (op, backend, group layout, size): the documented columns
(docs/reference/results-layout.md#csv-columns), then extras.

The Row dataclass is the schema: its field order is the CSV's column order, its annotations are
the types the loader checks, and its defaults fill what older or imported rows lack.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields

# run.json's format_version: a reader refuses a newer major version; a minor bump only adds.
# 1.2: the ps columns; 1.3: the alltoallv columns; 1.4: --per-call; 1.5: --overlap/--background
FORMAT_VERSION = "1.5"
# The validation of a row written as a run ended inside an op's rounds (measure.sweep): measured
# in fewer rounds than planned and never checked, so it does not make a run complete.
CUT_SHORT = "off: the run ended before this size was checked"


@dataclass
class Row:
    # ---- docs/reference/results-layout.md#csv-columns, in order ------------------------------
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
    # How per-rank times combine into the row's time (nccl-tests -a): avg, max, min, rank0.
    rank_time: str = "max"
    # full | partial: <why> | off: <why>  (what --check really verified)
    validation: str = ""
    mesh: str = ""  # "dp=2,tp=4"; "" = the whole world
    dim: str = ""  # the mesh dimension whose groups ran; "" = the whole world
    group_size: int = 0  # ranks per group (0 in rows written before groups existed)
    groups: int = 1  # groups that ran at once
    span: str = ""  # intra-node | inter-node | mixed
    source: str = "commbench"  # commbench | nccl-tests | osu
    # ---- extras -----------------------------------------------------------------------------
    pattern: str = ""
    root: int | None = None
    lat_us_p10: float = 0.0
    unstable: str = ""
    wall_s: float = 0.0  # seconds this size took in all (warm-up, calibration, timing, check)
    tail: str = "block"  # what min/p10/p90/p99/max/std are over: single calls or blocks
    group: int | None = None  # --per-group rows: the group's index; None = all groups
    group_ranks: str = ""  # --per-group rows: the group's global ranks, "0,2"
    group_hosts: str = ""
    peers: str = ""  # p2p pairs, "0:1,2:3"
    timer: str = ""  # host | host-sync | cuda-event | cuda-graph
    # p2p mbw_mr (osu_mbw_mr): messages per second over every pair at once (0 = not a rate)
    msg_rate: float = 0.0
    rounds: int = 1  # interleaved rounds the size was measured in (--rounds)
    launch: int = 0  # which of the run's --repeat launches measured the row
    # ps (collectives/ps/descriptor.py): the roles, and the bytes each role moved in one step,
    # as the implementation counted them while posting its sends and receives (0 = not counted)
    workers: int = 0
    servers: int = 0
    partition_bytes: int = 0  # --partition: the largest message of a push or a pull
    staleness_bound: int = -1  # --staleness of an async row; -1: none (sync, or unbounded)
    worker_tx_bytes: int = 0
    worker_rx_bytes: int = 0
    server_rx_bytes: int = 0
    server_tx_bytes: int = 0
    # ps --mode async: versions a push lagged its shard at most, pushes rejected as too stale,
    # steps per second of a worker, and the mean time a worker's pull waited per step
    max_staleness: int = 0
    rejected_pushes: int = 0
    steps_per_s: float = 0.0
    pull_wait_us: float = 0.0
    # ps (and its allreduce baseline): gradient bytes summed into the model per second, all
    # workers together, GB/s: W·n/t in sync and allreduce; in async W·n·steps_per_s less the
    # rejected pushes' bytes (collectives/ps/formulas.py: reduced_gbps)
    reduced_gbps: float = 0.0
    beside: str = ""  # the op label of this launch's baseline rows it is shown beside (ps)
    # alltoallv (collectives/alltoallv.py): bytes of the busiest rank (the most any rank sends
    # or receives), that over the mean a rank sends (1 = balanced; 0 = not an alltoallv row),
    # and the id of the routing's matrix, kept as splits-<id>.csv in the run folder
    max_rank_bytes: int = 0
    imbalance: float = 0.0
    split_id: str = ""
    # --per-call (core.percall), over single calls, each call's per-rank times combined as
    # rank_time says: calls kept per rank (0 = not run with --per-call), their p95 and
    # coefficient of variation, the calls over 1.5x the median, and per rank how many calls
    # the others waited for it ("1:37,0:3", the most first; results/calls.py keeps each call)
    calls: int = 0
    lat_us_p95: float = 0.0
    cv_pct: float = 0.0
    spikes: int = 0
    stragglers: str = ""
    # --overlap KIND:SIZE (measure.overlap_stats; docs/reference/metrics-and-formulas.md): the
    # row's latency columns are the collective beside the compute; lat_us_p50_alone is it
    # alone; the slowdowns are ratios of medians (beside / alone) with 95 % intervals; 0 = not
    # an overlap row
    overlap: str = ""
    comm_slowdown: float = 0.0
    comm_slowdown_lo: float = 0.0
    comm_slowdown_hi: float = 0.0
    compute_slowdown: float = 0.0
    compute_slowdown_lo: float = 0.0
    compute_slowdown_hi: float = 0.0
    compute_gflops_alone: float = 0.0
    compute_gflops_beside: float = 0.0
    overlap_efficiency: float = 0.0
    lat_us_p50_alone: float = 0.0
    # --background SIZE[@RANKS]: the load beside the row's measurement, and the busbw the
    # load's allreduce achieved meanwhile (GB/s)
    background: str = ""
    background_busbw: float = 0.0
    # Kept in results.jsonl only: the raw samples, for significance tests and re-analysis;
    # with rounds, how many samples each round took (samples_us in order) and its median.
    samples_us: list[float] = field(default_factory=list)
    round_samples: list[int] = field(default_factory=list)
    round_p50_us: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


_LAST_DOCUMENTED = "source"
_NAMES = [spec.name for spec in fields(Row)]
COLUMNS = tuple(_NAMES[: _NAMES.index(_LAST_DOCUMENTED) + 1])
RAW_COLUMNS = ("samples_us", "round_samples", "round_p50_us")
EXTRA_COLUMNS = tuple(n for n in _NAMES[len(COLUMNS):] if n not in RAW_COLUMNS)
# What makes two rows the same measurement (compare pairs rows on all of these).
KEY_COLUMNS = ("op", "pattern", "backend", "dtype", "reduce_op", "inplace", "device", "root",
               "rank_time", "mesh", "dim", "group_size", "group", "peers", "world_size",
               "servers", "partition_bytes", "staleness_bound", "overlap", "background",
               "size_bytes")
# What makes rows "the same op at the same size" whether or not the rest of the key agrees:
# rows that share these but differ in the rest are kept apart with a message.
IDENTITY_COLUMNS = ("op", "backend", "world_size", "size_bytes")

# What a row must have to be compared or reported; every other field may be absent.
REQUIRED = ("op", "backend", "size_bytes", "lat_us_p50")
_KINDS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


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
DEFAULTS = {
    spec.name: spec.default for spec in fields(Row) if spec.default is not MISSING
}


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
            return f"{name!r} is {value!r}, not {_TYPE_NAMES[types[-1]]}"
    if record["size_bytes"] < 0:
        return f"'size_bytes' is {record['size_bytes']}, below 0"
    return ""


def with_defaults(record: dict) -> dict:
    """A loaded row with every schema field present: what older rows lack takes its default
    (a row from before groups existed ran on the whole world: group_size = world_size)."""
    filled = {**DEFAULTS, **record}
    if not filled.get("group_size"):
        filled["group_size"] = filled.get("world_size", 0)
    return filled


def op_label(op: str, pattern: str | None) -> str:
    """How tables, plots and messages name a row's op: 'allreduce', 'p2p/pingpong'."""
    return f"{op}/{pattern}" if pattern else str(op)


def is_combined(row: dict) -> bool:
    """A row over every group (or the whole world), not a --per-group row. After a round trip
    through pandas a missing group reads NaN, not None."""
    group = row.get("group")
    return group is None or group != group
