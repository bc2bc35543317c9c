"""The run folder: written so that a crash at any moment leaves something useful, read back by
one loader.

``results.jsonl`` gets one line per row as soon as the row exists; ``run.json`` is replaced
atomically and carries a ``format_version``; ``results.csv`` is rebuilt from the JSONL when the
run ends, by whoever is left to do it (rank 0, or the local launcher after a failure). The
rendered files (summary.md, the plots) are named here but drawn by ``commbench.output``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from commbench.core.errors import UsageError
from commbench.results.schema import (
    COLUMNS,
    EXTRA_COLUMNS,
    FORMAT_VERSION,
    row_problem,
    with_defaults,
)

JSONL = "results.jsonl"
CSV = "results.csv"
RUN_JSON = "run.json"
SUMMARY = "summary.md"
BANDWIDTH_PNG = "bandwidth.png"
LATENCY_PNG = "latency.png"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_id(what: str, backends: tuple[str, ...], world: int) -> str:
    """A run's generated name: when, what (an op, ``3ops``, locate, replay), on which backends
    and how many ranks: ``20250101-120000-allreduce-gloo-n4``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{what}-{'+'.join(backends)}-n{world}"


def create(root: str, run_id: str, *, force: bool = False, generated: bool = False) -> Path:
    """Make ``root/run_id`` and return it; refuse an unwritable root.

    A name the user chose that is taken is refused (a CI recipe must never read an old folder
    by mistake) unless ``force``, which empties it first; a ``generated`` name (a timestamp)
    that is taken gets a -2, -3 ... suffix.
    """
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", run_id):
        raise UsageError(f"bad --name {run_id!r}: use letters, digits, '.', '_', '+' and '-'")
    base = Path(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = base / f".commbench-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write to --out {root}: {error.strerror or error}") from None
    path = base / run_id
    if path.exists() and not generated:
        if not force:
            raise UsageError(f"{path} already exists: choose another --name, or add --force "
                             "to replace it")
        if not path.is_dir():
            raise UsageError(f"{path} exists and is not a folder")
        shutil.rmtree(path)
    suffix = 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            suffix += 1
            path = base / f"{run_id}-{suffix}"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _read_meta(folder: Path) -> tuple[dict, str]:
    """run.json and a warning ('' when fine); a missing file is no warning, a corrupt one is."""
    path = folder / RUN_JSON
    try:
        text = path.read_text()
    except OSError:
        return {}, ""
    try:
        meta = json.loads(text)
    except ValueError:
        return {}, f"{path} is corrupt (not JSON): its metadata is ignored"
    if not isinstance(meta, dict):
        return {}, f"{path} is corrupt (not a JSON object): its metadata is ignored"
    return meta, ""


class RunWriter:
    """The file sink of a run: run.json when the run begins, one JSONL line per row.

    ``base`` is what the command knows and the ranks do not (the run's name, the command line).
    """

    def __init__(self, path: str | Path, base: dict | None = None) -> None:
        self.path = Path(path)
        self.base = base or {}
        self._rows = None
        self._calls = None  # --per-call: the calls file's writer (results.calls)

    def start(self) -> None:
        """run.json before any rank exists: a run that fails to start still says what it was."""
        _write_json(self.path / RUN_JSON, {"format_version": FORMAT_VERSION, **self.base,
                                           "status": "starting", "start_time": now()})

    def file(self, name: str, text: str) -> None:
        """A file an op keeps beside its rows (Collective.run_files: alltoallv's
        splits-<id>.csv), by a plain name inside the folder."""
        if Path(name).name != name:
            raise ValueError(f"an op's file is named inside the run folder, not {name!r}")
        (self.path / name).write_text(text)

    def begin(self, meta: dict, planned: int) -> None:
        _write_json(self.path / RUN_JSON, {"format_version": FORMAT_VERSION, **self.base,
                                           **meta, "planned_rows": planned})

    def position(self, where: str) -> None:
        pass

    def progress(self, done: int, total: int) -> None:
        pass

    def note(self, text: str) -> None:
        meta, _ = _read_meta(self.path)
        meta.setdefault("notes", []).append(text)
        _write_json(self.path / RUN_JSON, meta)

    def row(self, record: dict) -> None:
        if self._rows is None:
            self._rows = open(self.path / JSONL, "a", buffering=1)  # noqa: SIM115 (kept open)
        self._rows.write(json.dumps(record) + "\n")
        self._rows.flush()

    def calls(self, batch) -> None:
        """--per-call: one size's calls (a results.calls.CallBatch) into the calls file."""
        if self._calls is None:
            from commbench.results.calls import CALLS_VERSION, CallsWriter

            self._calls = CallsWriter(self.path)
            self.update({"calls": {"file": self._calls.path.name, "version": CALLS_VERSION}})
        self._calls.write(batch)

    def update(self, fields: dict) -> None:
        meta, _ = _read_meta(self.path)
        meta.update(fields)
        _write_json(self.path / RUN_JSON, meta)

    def close(self) -> None:
        if self._rows is not None:
            self._rows.close()
            self._rows = None
        if self._calls is not None:
            self._calls.close()
            self._calls = None


@dataclass
class Run:
    """A loaded results folder: its rows, its run.json, and what was wrong with the files."""

    name: str
    path: Path
    rows: list[dict]
    meta: dict
    warnings: list[str] = field(default_factory=list)


def _parse_rows(jsonl: Path, strict: bool) -> tuple[list[dict], list[str]]:
    try:
        lines = jsonl.read_text().splitlines()
    except OSError as error:
        raise UsageError(f"cannot read {jsonl}: {error.strerror or error}") from None
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    rows, warnings = [], []
    for index, (number, line) in enumerate(numbered):
        try:
            record = json.loads(line)
        except ValueError:
            if not strict and index == len(numbered) - 1:
                # What a writer killed mid-line leaves behind: every earlier row is whole.
                warnings.append(f"{jsonl}:{number} is cut short (a killed writer?): skipped")
                continue
            raise UsageError(f"{jsonl}:{number} is not JSON") from None
        problem = row_problem(record)
        if problem:
            raise UsageError(f"{jsonl}:{number}: {problem}")
        rows.append(with_defaults(record))
    return rows, warnings


def read_meta(path: str | Path) -> dict:
    """run.json of a folder ({} when absent or corrupt)."""
    return _read_meta(Path(path))[0]


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a folder that may have been cut short (no file yet: no rows)."""
    jsonl = Path(path) / JSONL
    if not jsonl.exists():
        return []
    return _parse_rows(jsonl, strict=False)[0]


def load_run(path: str | Path, strict: bool = False) -> Run:
    """A run folder, or a results.jsonl inside one.

    ``strict`` refuses any malformed line; otherwise a malformed **last** line (what a killed
    writer leaves) is skipped with a warning. A run.json written by a newer major format is
    refused; a corrupt one is reported in ``warnings`` and ignored.
    """
    path = Path(path)
    folder = path.parent if path.is_file() else path
    jsonl = path if path.is_file() else path / JSONL
    if not jsonl.exists():
        kind = folder_kind(folder)
        if kind is not None and kind != "sweep":
            raise NotASweep(folder, kind)
        raise UsageError(f"no results at {path} (expected a run folder or its {JSONL})")
    meta, meta_warning = _read_meta(folder)
    _check_version(meta, folder)
    rows, warnings = _parse_rows(jsonl, strict)
    if not rows:
        ended = meta.get("status") or "unknown"
        why = f": {meta['error']}" if meta.get("error") else ""
        raise UsageError(f"{folder} holds no measured rows (its run.json says {ended}{why})")
    damage = _damage(meta, rows, warnings)
    if damage:  # a complete run that lost rows is not complete: the gate must see it
        meta = {**meta, "status": "partial", "error": damage}
    if meta_warning:
        warnings.insert(0, meta_warning)
    return Run(name=run_label(folder, meta), path=folder, rows=rows, meta=meta,
               warnings=warnings)


# What each kind of folder commbench writes holds, so that a command given the wrong kind can
# say which kind it got (a locate run handed to compare used to read "no results at ...").
KIND_MARKERS = (("sweep", JSONL), ("locate", "pairs.jsonl"), ("replay", "replayed.jsonl"),
                ("trace", "rank-0.jsonl"))


def folder_kind(path: str | Path) -> str | None:
    """sweep | locate | replay | trace, or None for a folder commbench did not write."""
    folder = Path(path)
    for kind, marker in KIND_MARKERS:
        if (folder / marker).is_file():
            return kind
    if (folder / RUN_JSON).is_file():
        try:
            command = json.loads((folder / RUN_JSON).read_text()).get("command")
        except (OSError, ValueError, AttributeError):
            return None
        return command if command in ("locate", "replay") else None
    return None


class NotASweep(UsageError):
    """A run folder of another kind where a sweep (rows) was needed; ``kind`` says which."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.folder, self.kind = folder, kind
        super().__init__(f"{folder} is a {kind} {'folder' if kind == 'trace' else 'run'}, not "
                         f"a sweep (no {JSONL}): this command reads the rows of a measuring "
                         "run")


def run_label(folder: Path, meta: dict) -> str:
    """A run is named by its folder (what the user typed, and what a copied baseline is
    called), with the name inside run.json in brackets where it differs."""
    inner = meta.get("name")
    return folder.name if not inner or inner == folder.name else f"{folder.name} [{inner}]"


def _damage(meta: dict, rows: list[dict], warnings: list[str]) -> str:
    """Why a run that run.json calls complete has lost rows, or ''."""
    if meta.get("status") != "complete":
        return ""
    if any("cut short" in warning for warning in warnings):
        return f"its {JSONL} is cut short"
    written = meta.get("rows")
    if isinstance(written, int) and len(rows) < written:
        return f"its {JSONL} holds {len(rows)} of the {written} rows it was finished with"
    return ""


def _check_version(meta: dict, folder: Path) -> None:
    found = str(meta.get("format_version", FORMAT_VERSION))
    try:
        major = int(found.split(".")[0])
    except ValueError:
        raise UsageError(f"{folder / RUN_JSON}: bad format_version {found!r}") from None
    if major > int(FORMAT_VERSION.split(".")[0]):
        raise UsageError(
            f"{folder} was written in results format {found}, newer than this commbench reads "
            f"({FORMAT_VERSION}): upgrade commbench"
        )


def meta_value(meta: dict, keys: tuple[str, ...]):
    """A nested run.json value, or None."""
    if keys == ("gpus",):  # the GPU models of every rank
        names = sorted({r.get("gpu") for r in meta.get("ranks") or [] if isinstance(r, dict)
                        and r.get("gpu")})
        return names or None
    value = meta
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def rows_frame(rows: list[dict]):
    """Rows as a DataFrame with the CSV columns in their documented order
    (docs/reference/results-layout.md#csv-columns; raw samples dropped)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in COLUMNS + EXTRA_COLUMNS:
        if column not in frame:
            frame[column] = None
    return frame[list(COLUMNS + EXTRA_COLUMNS)]


def finalize(path: str | Path, status: str, error: str = "") -> Run:
    """Record how the run ended and rebuild results.csv from the JSONL; returns the run."""
    folder = Path(path)
    meta, _ = _read_meta(folder)
    rows = read_rows(folder)
    meta.update(status=status, error=error or None, end_time=now(), rows=len(rows))
    _write_json(folder / RUN_JSON, meta)
    if rows:
        rows_frame(rows).to_csv(folder / CSV, index=False)
    return Run(name=run_label(folder, meta), path=folder, rows=rows, meta=meta)
