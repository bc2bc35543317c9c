"""OSU output as text: the ``# OSU ... Test`` lines, the ``# Datatype:`` and buffer lines, the
launch line a log may hold, and the tables under their column headers (osu.py turns them into
rows). A malformed line is a UsageError naming the file and the line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commbench.importers.common import fail

# The benchmark's title (between the library and "Test") -> (commbench op, p2p pattern).
BENCHMARKS = {
    "allreduce latency": ("allreduce", ""),
    "allgather latency": ("allgather", ""),
    "broadcast latency": ("broadcast", ""),
    "all-to-all personalized exchange latency": ("alltoall", ""),
    "reduce_scatter latency": ("reduce_scatter", ""),
    "reduce_scatter_block latency": ("reduce_scatter", ""),
    "reduce latency": ("reduce", ""),
    "gather latency": ("gather", ""),
    "scatter latency": ("scatter", ""),
    "barrier latency": ("barrier", ""),
    "latency": ("p2p", "pingpong"),
    "bandwidth": ("p2p", "unidir"),
    "bi-directional bandwidth": ("p2p", "bidir"),
}

_HEADER = re.compile(
    r"#\s*OSU\s+(?P<lib>[A-Za-z]+)(?:-(?P<accel>CUDA MANAGED|CUDA|ROCM|OPENACC|MANAGED))?\s+"
    r"(?P<name>.+?)\s+Test(?:\s+v(?P<version>\S+))?\s*$"
)
_DATATYPE = re.compile(r"#\s*Datatype:\s*(\S+?)\.?\s*$")
_BUFFERS = re.compile(r"#\s*Send Buffer on (\w+).*? and Receive Buffer on (\w+)")
_LAUNCH = re.compile(r"\b(?:mpirun|mpiexec|mpiexec\.hydra|srun|aprun|jsrun)\b.*\bosu_")
_LAUNCH_RANKS = re.compile(r"(?:^|\s)(?:-np|-n|--np|--n|--ntasks)(?:\s+|=)(\d+)\b")
_TABLE_START = ("Size", "Avg Latency", "Latency", "Bandwidth", "Overall", "MB/s")
# Column titles, longest first where one contains another.
_COLUMNS = (
    ("transmit", re.compile(r"Transmit Size")),
    ("avg", re.compile(r"Avg Latency\s*\(us\)")),
    ("min", re.compile(r"Min Latency\s*\(us\)")),
    ("max", re.compile(r"Max Latency\s*\(us\)")),
    ("tail_lat", re.compile(r"P(\d+)\s+Tail Lat\s*\(us\)")),
    ("tail_bw", re.compile(r"P(\d+)\s+Tail BW\s*\(MB/s\)")),
    ("latency", re.compile(r"Latency\s*\(us\)")),
    ("bandwidth", re.compile(r"Bandwidth\s*\(MB/s\)")),
    ("size", re.compile(r"Size")),
    ("iterations", re.compile(r"Iterations")),
    ("validation", re.compile(r"Validation")),
)

@dataclass
class Bench:
    """One benchmark run: what its ``# OSU ... Test`` line says (line 0: no such line)."""

    line: int = 0
    title: str = ""
    op: tuple[str, str] | None = None
    library: str = "MPI"
    accel: str = ""
    version: str = ""
    buffers: tuple[str, str] | None = None  # (send, receive) places of the p2p tests


@dataclass
class Table:
    bench: Bench
    line: int
    dtype: str | None  # the MPI name from '# Datatype:', None before OSU 7
    dtype_line: int
    columns: list[tuple[str, int | None]]
    launched: tuple[int, int] | None  # (ranks, line) of the launch line before the table
    rows: list[tuple[int, list[str]]] = field(default_factory=list)



def read_tables(text: str, source: str) -> list[Table]:
    """The tables of the file, each with the launch line (``mpirun -np 8 ./osu_allgather``)
    last seen before it, if the log holds one."""
    bench = Bench()
    dtype, dtype_line = None, 0
    tables: list[Table] = []
    launched = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if _LAUNCH.search(line):
            found = _LAUNCH_RANKS.search(line)
            launched = (int(found.group(1)), number) if found else None
        if line.startswith("#"):
            if match := _HEADER.match(line):
                bench = _bench(match, number, source)
                dtype, dtype_line = None, 0
            elif match := _DATATYPE.match(line):
                dtype, dtype_line = match.group(1), number
            elif match := _BUFFERS.match(line):
                bench.buffers = (match.group(1).upper(), match.group(2).upper())
            elif line.lstrip("# ").startswith(_TABLE_START):
                columns = _columns(line, number, source)
                tables.append(Table(bench, number, dtype, dtype_line, columns, launched))
            continue
        words = line.split()
        if not _is_number(words[0]):
            continue  # launcher messages, warnings: not the benchmark's table
        if not tables:
            raise fail(source, number, "a results row before the column header "
                                       "('# Size  Avg Latency(us)' ...)")
        table = tables[-1]
        if len(words) != len(table.columns):
            titles = " ".join(name for name, _ in table.columns)
            raise fail(source, number, f"expected {len(table.columns)} fields ({titles}), "
                                       f"found {len(words)}")
        table.rows.append((number, words))
    return tables


def _bench(match: re.Match, number: int, source: str) -> Bench:
    title = match.group("name").strip()
    op = BENCHMARKS.get(title.lower())
    if op is None:
        raise fail(source, number, f"commbench cannot import the OSU {title!r} test (it imports "
                                   f"{', '.join(t.title() for t in BENCHMARKS)})")
    return Bench(line=number, title=title, op=op, library=match.group("lib"),
                  accel=match.group("accel") or "", version=match.group("version") or "")


def _columns(line: str, number: int, source: str) -> list[tuple[str, int | None]]:
    text = line.lstrip("#").strip()
    columns = []
    position = 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        for name, pattern in _COLUMNS:
            match = pattern.match(text, position)
            if match:
                percentile = int(match.group(1)) if name.startswith("tail") else None
                columns.append((name, percentile))
                position = match.end()
                break
        else:
            raise fail(source, number, f"unknown OSU column {text[position:].split('  ')[0]!r} "
                                       "(commbench imports the blocking latency and bandwidth "
                                       "tables)")
    kinds = [name for name, _ in columns]
    if sum(kinds.count(k) for k in ("avg", "latency", "bandwidth")) != 1:
        raise fail(source, number, "the column header has no single Avg Latency(us), Latency "
                                   "(us) or Bandwidth (MB/s) column")
    return columns


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
