"""OSU micro-benchmark output (osu_allreduce, osu_latency, osu_bw, ...) -> commbench rows.

What the OSU benchmarks print (5.x to 7.x, from ``c/util/osu_util*.c``):

- ``# OSU MPI[-CUDA] Allreduce Latency Test v7.4``: library (MPI, or NCCL/RCCL for the xccl
  builds), where the buffers live, the benchmark, the version. The only line naming the op: a
  table pasted without it needs ``--op`` (a ``Latency (us)`` table can only be osu_latency);
- since 7.x, ``# Datatype: MPI_CHAR.`` before each table (``-T`` may run several); older
  versions reduce MPI_FLOAT and move MPI_CHAR;
- p2p with device buffers: ``# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)``;
- the column header: ``# Size`` then ``Avg Latency(us)`` (collectives), ``Latency (us)``
  (osu_latency: one-way, round trip / 2) or ``Bandwidth (MB/s)`` (osu_bw, osu_bibw; MB/s =
  1e6 B/s, osu_bibw counting both directions); with ``-f`` also ``Min Latency(us)``, ``Max
  Latency(us)`` (the fastest and slowest rank's mean) and ``Iterations``; with ``-c``
  ``Validation`` (Pass/Fail); with ``-z`` (7.x) ``P50 Tail Lat(us)`` ... (percentiles over
  iterations; ``P50 Tail BW(MB/s)`` for the bandwidth tests); with DDT ``Transmit Size``.

Sizes: OSU's allgather, alltoall, gather and scatter print the bytes each rank sends to one peer
(the per-rank input), commbench the largest buffer (the gathered output, the whole send
buffer): size x world size. osu_reduce_scatter prints the send buffer (its recvcounts split it
over the ranks), which is already commbench's size. OSU never prints the number of ranks, so the
collectives need ``--world-size`` unless the file holds the launch line (``mpirun -np 8
osu_allgather``); the p2p tests run on exactly 2 ranks.

The bandwidth tests give MB/s, not a time: the time of one message is size / bandwidth (twice
that for osu_bibw, whose bandwidth counts both directions), so algbw = size / time and busbw =
algbw x 1 (unidir) or x 2 (bidir), as commbench's p2p rows.
"""

from __future__ import annotations

from commbench import collectives
from commbench.core.errors import UsageError
from commbench.importers.common import (
    Imported,
    Measured,
    Timing,
    build_rows,
    fail,
    normalized_op,
    skew_pct,
    to_float,
    to_int,
)
from commbench.importers.osu_text import Bench, Table, read_tables

SOURCE = "osu"
# --op: OSU's binary names and commbench's names.
OP_NAMES = {
    "allreduce": ("allreduce", ""), "allgather": ("allgather", ""),
    "bcast": ("broadcast", ""), "broadcast": ("broadcast", ""), "alltoall": ("alltoall", ""),
    "reducescatter": ("reduce_scatter", ""), "reducescatterblock": ("reduce_scatter", ""),
    "reduce": ("reduce", ""), "gather": ("gather", ""), "scatter": ("scatter", ""),
    "barrier": ("barrier", ""), "latency": ("p2p", "pingpong"), "pingpong": ("p2p", "pingpong"),
    "bw": ("p2p", "unidir"), "unidir": ("p2p", "unidir"), "bibw": ("p2p", "bidir"),
    "bidir": ("p2p", "bidir"),
}
# OSU prints the per-rank chunk for these; commbench's size is the whole buffer (x ranks).
PER_PEER_SIZE = frozenset({"allgather", "alltoall", "gather", "scatter"})


def _pairwise(op: str) -> bool:
    """An op of pairs of ranks (commbench's p2p), as its descriptor declares."""
    return "pattern" in collectives.get(op).extra_options
MPI_DTYPES = {
    "MPI_CHAR": "int8", "MPI_SIGNED_CHAR": "int8", "MPI_UNSIGNED_CHAR": "uint8",
    "MPI_BYTE": "uint8", "MPI_INT": "int32", "MPI_UNSIGNED": "uint32", "MPI_LONG": "int64",
    "MPI_LONG_LONG": "int64", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64",
}
ACCELERATORS = {"": "cpu", "CUDA": "cuda", "ROCM": "rocm", "OPENACC": "openacc",
                "MANAGED": "cuda-managed", "CUDA MANAGED": "cuda-managed"}
UNCHECKED = "off: OSU checks nothing without -c"
CHECKED = "OSU -c: Pass/Fail as the file printed it (wrong = 1 means Fail)"

_BUFFER_PLACES = {"HOST": "cpu", "DEVICE": "cuda", "MANAGED": "cuda-managed"}


def parse(text: str, source: str, op: str | None = None,
          world_size: int | None = None) -> Imported:
    """OSU output -> rows (``op`` where the file does not name the benchmark)."""
    wanted = _op_option(op) if op else None
    if world_size is not None and world_size < 1:
        raise UsageError(f"bad --world-size {world_size}: it must be at least 1")
    tables = read_tables(text, source)
    if not any(table.rows for table in tables):
        raise fail(source, None, "no OSU results found (expected a '# Size  Avg Latency(us)', "
                                 "'# Size  Latency (us)' or '# Size  Bandwidth (MB/s)' header "
                                 "and rows under it)")
    # --world-size is for the collectives; in a log that also has them, the p2p tables (always
    # 2 ranks) do not contradict it.
    named = [(t.bench.op or wanted or ("", ""))[0] for t in tables if t.rows]
    collectives_too = any(op and not _pairwise(op) for op in named)
    measured, notes, benches = [], [], []
    for table in tables:
        if not table.rows:
            continue
        items, table_notes, description = _measure(table, source, wanted, world_size,
                                                   collectives_too)
        measured += items
        notes += table_notes
        if description not in benches:
            benches.append(description)
    rows, merge_notes = build_rows(measured)
    notes += merge_notes
    if not rows:
        raise fail(source, None, "no OSU rows with a size above 0")
    versions = sorted({b["version"] for b in benches if b["version"]})
    meta = {
        "format": "text",
        "world_size": benches[0]["world_size"],
        "hosts": [],
        "backends": sorted({row["backend"] for row in rows}),
        "versions": {"osu": versions[0] if len(versions) == 1 else (versions or None)},
        "benchmarks": benches,
        "notes": notes,
    }
    return Imported(rows=rows, meta=meta, notes=notes)


def _op_option(op: str) -> tuple[str, str]:
    wanted = OP_NAMES.get(normalized_op(op))
    if wanted is None:
        raise UsageError(f"unknown --op {op!r} for OSU (choose from {', '.join(OP_NAMES)})")
    return wanted


# ---- rows ------------------------------------------------------------------------------------


def _measure(table: Table, source: str, wanted: tuple[str, str] | None,
             world_size: int | None, collectives_too: bool):
    bench = table.bench
    kinds = {name for name, _ in table.columns}
    op, pattern = _table_op(table, kinds, source, wanted)
    descriptor = collectives.get(op)
    given = None if _pairwise(op) and collectives_too else world_size
    world = _world(op, source, table, given)
    dtype = _dtype(table, op, source)
    if "size" not in kinds and descriptor.sized:
        raise fail(source, table.line, "the table has no Size column")
    multiplier = world if op in PER_PEER_SIZE else 1
    device = _device(bench)
    notes, measured, skipped = [], [], 0
    for number, words in table.rows:
        values = _values(table.columns, words, number, source)
        size = values.get("size", 0) * multiplier
        if descriptor.sized and size <= 0:
            skipped += 1
            continue
        timing = _timing(op, pattern, size, values, number, source)
        if timing is None:
            notes.append(f"line {number}: a bandwidth of 0 MB/s gives no time: skipped")
            continue
        checked = "validation" in values
        measured.append(Measured(
            fields={
                "op": op,
                "pattern": pattern,
                "backend": bench.library.lower(),
                "device": device,
                "world_size": world,
                "nnodes": 0,  # OSU does not say
                "dtype": dtype,
                "reduce_op": "sum" if descriptor.reduces else "",
                "inplace": False,
                "size_bytes": size,
                "iters": values.get("iterations", 0),
                "wrong": int(checked and values["validation"] == "Fail"),
                "slowest_rank": -1,
                "skew_pct": skew_pct(values.get("min"), values.get("max")),
                # osu_latency and osu_bw time on rank 0; the collectives average the ranks.
                "rank_time": "rank0" if _pairwise(op) else "avg",
                "validation": CHECKED if checked else UNCHECKED,
                "group_size": world,
                "groups": 1,
                "span": "",
                "source": SOURCE,
                "root": 0 if descriptor.rooted else None,
                "peers": "0:1" if _pairwise(op) else "",
                "timer": "host",
            },
            timing=timing,
            where=f"line {number}",
        ))
    if skipped:
        notes.append(f"skipped {skipped} row(s) of 0 bytes from line {table.line}'s table "
                     "(commbench sizes start at 1 byte)")
    description = {
        "line": bench.line or None,
        "benchmark": f"OSU {bench.library} {bench.title}".strip() if bench.title else "",
        "op": op + (f"/{pattern}" if pattern else ""),
        "version": bench.version or None,
        "world_size": world,
        "device": device,
    }
    return measured, notes, description


def _table_op(table: Table, kinds: set[str], source: str, wanted):
    bench = table.bench
    if bench.op is not None:
        if wanted and wanted != bench.op:
            raise fail(source, bench.line, f"--op {_label(wanted)} disagrees with the file's "
                                           f"'{bench.title} Test'")
        found = bench.op
    elif wanted:
        found = wanted
    elif "latency" in kinds:
        found = ("p2p", "pingpong")  # only osu_latency prints 'Latency (us)'
    else:
        raise fail(source, table.line, "no '# OSU ... Test' line names the benchmark: pass --op")
    op, pattern = found
    fits = {"avg": not _pairwise(op), "latency": pattern == "pingpong",
            "bandwidth": pattern in ("unidir", "bidir")}
    primary = next(k for k in ("avg", "latency", "bandwidth") if k in kinds)
    if not fits[primary]:
        raise fail(source, table.line, f"{_label(found)} does not print a "
                                       f"{primary!r} column: is --op right?")
    return found


def _label(op: tuple[str, str]) -> str:
    return op[0] + (f" ({op[1]})" if op[1] else "")


def _world(op: str, source: str, table: Table, world_size: int | None) -> int:
    launched = table.launched
    if _pairwise(op):
        for ranks, where in ((world_size, "--world-size"),
                             (launched[0] if launched else None, "the launch line")):
            if ranks is not None and ranks != 2:
                raise fail(source, table.line, f"the OSU p2p tests run on exactly 2 ranks; "
                                               f"{where} says {ranks}")
        return 2
    if launched and world_size is not None and launched[0] != world_size:
        raise fail(source, launched[1], f"the launch line starts {launched[0]} ranks, "
                                        f"--world-size says {world_size}")
    if world_size is not None:
        return world_size
    if launched:
        return launched[0]
    raise fail(source, table.line, "OSU does not print the number of ranks: pass --world-size")


def _dtype(table: Table, op: str, source: str) -> str:
    if table.dtype is None:
        # Before the '# Datatype:' line (OSU 7), the reductions ran on MPI_FLOAT, the rest on
        # MPI_CHAR buffers.
        return "float32" if collectives.get(op).reduces else "int8"
    dtype = MPI_DTYPES.get(table.dtype.upper())
    if dtype is None:
        raise fail(source, table.dtype_line, f"unknown OSU datatype {table.dtype!r}")
    return dtype


def _device(bench: Bench) -> str:
    """Where the buffers were: cpu, cuda, ... ('cpu->cuda' for mixed p2p buffers); '' when no
    '# OSU ... Test' line says."""
    if not bench.line:
        return ""
    if bench.buffers is None:
        return ACCELERATORS.get(bench.accel, bench.accel.lower())
    accel = ACCELERATORS.get(bench.accel, "cuda")
    send, receive = (_BUFFER_PLACES.get(place, place.lower()) for place in bench.buffers)
    send, receive = (accel if place == "cuda" else place for place in (send, receive))
    return send if send == receive else f"{send}->{receive}"


def _values(columns, words, number: int, source: str) -> dict:
    values: dict = {}
    for (name, percentile), word in zip(columns, words, strict=True):
        if name in ("size", "iterations", "transmit"):
            value = to_int(word, source, number, name)
            if value < 0:
                raise fail(source, number, f"{name} {word} is below 0")
            values[name] = value
        elif name == "validation":
            if word not in ("Pass", "Fail"):
                raise fail(source, number, f"validation {word!r} is neither Pass nor Fail")
            values[name] = word
        elif name.startswith("tail"):
            values.setdefault(name, {})[percentile] = to_float(word, source, number,
                                                               f"P{percentile}")
        else:
            value = to_float(word, source, number, name)
            if value < 0:
                raise fail(source, number, f"{name} {word} is below 0")
            values[name] = value
    return values


def _timing(op: str, pattern: str, size: int, values: dict, number: int,
            source: str) -> Timing | None:
    """The time of one message (µs) and its spread; None where the bandwidth is 0."""
    tails: dict[int, float] = {}
    if "bandwidth" in values:
        # MB/s = 1e6 B/s, so size / MBps is in µs; osu_bibw counts both directions.
        directions = 2 if pattern == "bidir" else 1
        if values["bandwidth"] <= 0:
            return None
        time_us = directions * size / values["bandwidth"]
        for percentile, mbps in values.get("tail_bw", {}).items():
            # The p-th percentile of bandwidth is the (100-p)-th of time.
            if mbps > 0:
                tails[100 - percentile] = directions * size / mbps
    else:
        time_us = values.get("avg", values.get("latency"))
        tails = dict(values.get("tail_lat", {}))
    return Timing(
        time_us=time_us,
        min_us=values.get("min"),
        max_us=values.get("max"),
        p10_us=tails.get(10),
        p90_us=tails.get(90),
        p99_us=tails.get(99),
        tail="call" if tails else "block",
    )
