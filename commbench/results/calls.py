"""The calls file of a ``--per-call`` run: every call's time on every rank
(docs/reference/results-layout.md#callsparquet-callsjsonl-per-call).

One record per call per rank: ``op, pattern, backend, dim, inplace, size_bytes, launch, round,
call, rank, time_us, late_us``. ``round`` is the interleaved round (--rounds) the call was timed
in, ``call`` its index within the size (0, 1, ... in the order timed, the same on every rank),
``time_us`` the call as issued (a pingpong call is a round trip), ``late_us`` how long after the
first rank this rank started the call (core.percall.lateness; empty where not measured).

``calls.parquet`` where pyarrow is installed (columnar and compressed: about 2 bytes a record on
disk for a typical sweep), else ``calls.jsonl`` (a header line with the version, then one JSON
object per record, appended and flushed per size). The parquet file is written to
``calls.parquet.tmp`` as the run goes and moved into place when rank 0's sink closes (a run that
fails still closes it); a run killed outright keeps only the .tmp. Each launch of ``--repeat``
adds its records (its ``launch`` column) to the same file. This module is the file's one writer
and one reader; the version is in the file itself (parquet metadata, the jsonl header).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commbench.core.errors import UsageError

CALLS_VERSION = "1.0"
PARQUET = "calls.parquet"
JSONL = "calls.jsonl"
FORMAT_NAME = "commbench-calls"
_VERSION_KEY = b"commbench_calls_version"
COLUMNS = ("op", "pattern", "backend", "dim", "inplace", "size_bytes", "launch", "round", "call",
           "rank", "time_us", "late_us")


@dataclass(frozen=True)
class CallBatch:
    """One size's calls on every rank."""

    op: str
    pattern: str
    backend: str
    dim: str
    inplace: bool
    size_bytes: int
    rounds: np.ndarray  # per call: the round it was timed in
    time_us: np.ndarray  # ranks x calls
    late_us: np.ndarray | None = None  # ranks x calls, or None where not measured
    ranks: tuple[int, ...] = ()  # the global rank of each row (default 0..n-1)
    launch: int = 0

    def columns(self) -> dict[str, np.ndarray]:
        """The records, rank by rank, as columns."""
        times = np.asarray(self.time_us, dtype=np.float64)
        ranks, calls = times.shape
        names = np.asarray(self.ranks if self.ranks else range(ranks), dtype=np.int64)
        late = (np.full(times.shape, np.nan) if self.late_us is None
                else np.asarray(self.late_us, dtype=np.float64))
        total = ranks * calls

        def same(value, dtype):
            return np.full(total, value, dtype=dtype)

        return {
            "op": same(self.op, object), "pattern": same(self.pattern, object),
            "backend": same(self.backend, object), "dim": same(self.dim, object),
            "inplace": same(bool(self.inplace), bool),
            "size_bytes": same(int(self.size_bytes), np.int64),
            "launch": same(int(self.launch), np.int64),
            "round": np.tile(np.asarray(self.rounds, dtype=np.int64), ranks),
            "call": np.tile(np.arange(calls, dtype=np.int64), ranks),
            "rank": np.repeat(names, calls),
            "time_us": times.reshape(-1),
            "late_us": late.reshape(-1),
        }


def _pyarrow():
    """pyarrow (and its parquet module), or None where it is not installed."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return None
    return pyarrow


class CallsWriter:
    """Rank 0's writer of the calls file of one run folder (opened at the first batch)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.records = 0
        self._arrow = None
        self._parquet = None  # the open ParquetWriter
        self._jsonl = None

    @property
    def path(self) -> Path:
        return self.folder / (PARQUET if _pyarrow() is not None else JSONL)

    def write(self, batch: CallBatch) -> None:
        columns = batch.columns()
        self.records += len(columns["rank"])
        arrow = _pyarrow()
        if arrow is not None:
            self._write_parquet(arrow, columns)
        else:
            self._write_jsonl(columns)

    def _write_parquet(self, arrow, columns: dict) -> None:
        import pyarrow.parquet as pq

        table = arrow.table({name: columns[name] for name in COLUMNS}, schema=_schema(arrow))
        if self._parquet is None:
            final = self.folder / PARQUET
            self._parquet = pq.ParquetWriter(self.folder / (PARQUET + ".tmp"), table.schema)
            if final.exists():  # an earlier launch of --repeat: its records come first
                for earlier in pq.ParquetFile(final).iter_batches():
                    self._parquet.write_table(
                        arrow.Table.from_batches([earlier]).cast(table.schema))
        self._parquet.write_table(table)

    def _write_jsonl(self, columns: dict) -> None:
        if self._jsonl is None:
            path = self.folder / JSONL
            fresh = not path.exists() or path.stat().st_size == 0
            self._jsonl = open(path, "a", buffering=1 << 16)  # noqa: SIM115 (kept open)
            if fresh:
                self._jsonl.write(json.dumps({"format": FORMAT_NAME,
                                              "version": CALLS_VERSION}) + "\n")
        lists = {name: columns[name].tolist() for name in COLUMNS}
        lines = []
        for index in range(len(lists["rank"])):
            record = {name: lists[name][index] for name in COLUMNS}
            if record["late_us"] != record["late_us"]:  # NaN: not measured
                record["late_us"] = None
            lines.append(json.dumps(record))
        self._jsonl.write("\n".join(lines) + "\n")
        self._jsonl.flush()

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
            os.replace(self.folder / (PARQUET + ".tmp"), self.folder / PARQUET)
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def _schema(arrow):
    return arrow.schema(
        [("op", arrow.string()), ("pattern", arrow.string()), ("backend", arrow.string()),
         ("dim", arrow.string()), ("inplace", arrow.bool_()), ("size_bytes", arrow.int64()),
         ("launch", arrow.int64()), ("round", arrow.int64()), ("call", arrow.int64()),
         ("rank", arrow.int64()), ("time_us", arrow.float64()), ("late_us", arrow.float64())],
        metadata={_VERSION_KEY: CALLS_VERSION.encode(), b"format": FORMAT_NAME.encode()})


def calls_path(folder: str | Path) -> Path | None:
    """The calls file of a run folder, or None when the run kept none."""
    for name in (PARQUET, JSONL):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def read_calls(folder: str | Path):
    """The calls of a run folder as a pandas DataFrame with COLUMNS (late_us NaN where not
    measured). A file written by a newer major version, or damaged, is refused in one line."""
    import pandas as pd

    path = calls_path(folder)
    if path is None:
        raise UsageError(f"{folder} holds no {PARQUET} or {JSONL}: run with --per-call")
    if path.name == PARQUET:
        arrow = _pyarrow()
        if arrow is None:
            raise UsageError(f"{path}: reading it needs pyarrow (pip install pyarrow)")
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (OSError, arrow.ArrowException) as error:
            raise UsageError(f"{path} is not a readable parquet file: {error}") from None
        version = (table.schema.metadata or {}).get(_VERSION_KEY, b"").decode()
        _check_version(version, path)
        return table.to_pandas()[list(COLUMNS)]
    lines = path.read_text().splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except ValueError:
        header = {}
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise UsageError(f"{path}:1: not a commbench calls file (no header line)")
    _check_version(str(header.get("version", "")), path)
    records = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if number == len(lines):  # what a killed writer leaves: every earlier line is whole
                break
            raise UsageError(f"{path}:{number} is not JSON") from None
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    frame["late_us"] = frame["late_us"].astype("float64")
    return frame


def _check_version(found: str, path: Path) -> None:
    try:
        major = int(found.split(".")[0])
    except ValueError:
        raise UsageError(f"{path}: bad calls format version {found!r}") from None
    if major > int(CALLS_VERSION.split(".")[0]):
        raise UsageError(f"{path} was written in calls format {found}, newer than this "
                         f"commbench reads ({CALLS_VERSION}): upgrade commbench")
