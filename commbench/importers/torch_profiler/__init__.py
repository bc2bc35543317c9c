"""torch.profiler traces in, commbench traces out (docs/reference/trace-format.md): the chrome-trace
JSON that ``torch.profiler.profile(...).export_chrome_trace(path)`` writes, one file per rank,
becomes ``rank-<r>.jsonl`` in the trace format of ``commbench.results.trace``, so ``replay`` and
``estimate --trace`` read a profiled job as they read a recorded one.

Where the calls come from, in order of preference:

- ``record_param_comms`` CPU events (ProcessGroupNCCL emits one per call): "Collective name",
  "In msg nelems" / "Out msg nelems" (what a rank hands in and gets back, as the trace format
  counts them), "dtype" (c10's ScalarType name), "Process Group Name" / "Process Group Ranks"
  (or "Global rank start" / "stride" / "Group size" where the ranks list is cut with "..."),
  "In split size" / "Out split size", "Is asynchronized op", "Src Rank" / "Dst Rank" for p2p
  (group ranks). The GPU kernels (``ncclDevKernel_*``, ``ncclKernel_*``) carry the External id
  of the record_param_comms event that launched them (Kineto links them); their durations are
  the in-situ time (``dur_ns``), their end the completion (``t_end_ns``). A kernel whose id
  matches nothing is matched by its own copy of the metadata (group name and "Seq").
- Where a trace has none (gloo in torch 2.13 emits none), the dispatcher's ``c10d::`` CPU ops,
  read from their recorded shapes (``record_shapes=True``). They do not say which process group
  a call used: every call is put on the default group, and a note says so when the job had
  others. The work's ``gloo:<op>`` annotation on gloo's worker thread gives the completion
  time and the dtype of tensor lists.

Steps are the profiler's own (``ProfilerStep#N``, from ``prof.step()`` under a schedule): a
call belongs to the last step begun before it; a trace without steps is step 0. Timestamps are
the profiler's timeline in ns (``clock: torch.profiler``). Roots of broadcast and reduce are not
in record_param_comms: they are left empty there (the gloo path reads them).

Pure: JSON in, header dicts and calls out; nothing here writes, prints or imports torch.
``param_comms`` reads the NCCL path, ``dispatcher`` the gloo one, ``events`` what both share;
this module finds the files, the rank, the world and its groups, and the steps.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from commbench.importers.common import ImportFormatError, fail
from commbench.importers.torch_profiler.dispatcher import from_dispatcher
from commbench.importers.torch_profiler.events import Event, int_list, load_events, ns
from commbench.importers.torch_profiler.param_comms import (
    PARAM_COMMS,
    attach_kernels,
    from_param_comms,
)
from commbench.results.trace import Call, Group, header

SOURCE = "torch.profiler"
CLOCK = "torch.profiler"
_STEP = re.compile(r"ProfilerStep#(\d+)")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass
class ProfiledRank:
    """One rank's file, converted: the trace header, its calls in issue order, notes."""

    path: str
    rank: int
    header: dict
    calls: list[Call]
    notes: list[str] = field(default_factory=list)


def trace_files(path: str | Path) -> list[Path]:
    """FILE, or every ``*.json`` / ``*.json.gz`` in a folder (the profiler's tensorboard handler
    writes ``<worker>.<time>.pt.trace.json``)."""
    where = Path(path)
    if where.is_dir():
        files = sorted(p for p in where.iterdir()
                       if p.is_file() and p.name.endswith((".json", ".json.gz")))
        if not files:
            raise ImportFormatError(f"{where}: no *.json or *.json.gz profiler traces in it")
        return files
    if not where.exists():
        raise ImportFormatError(f"{where}: no such file or folder")
    return [where]


def read_document(path: Path) -> dict:
    """The JSON object of one trace file; what is not one is an error naming the file."""
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise fail(str(path), None, f"cannot read it ({error})") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise fail(str(path), error.lineno, f"not JSON ({error.msg}; a trace cut short?)") \
            from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise fail(str(path), None, "not a torch.profiler trace (no traceEvents list; write "
                   "one with prof.export_chrome_trace(path))")
    return document


def parse(document: dict, source: str, rank_hint: int | None = None) -> ProfiledRank:
    """One rank's trace document -> its header and calls. ``rank_hint`` (from the file name)
    is used where the trace does not say which rank wrote it."""
    info = document.get("distributedInfo") or {}
    events = load_events(document["traceEvents"], source)
    rank = _rank(info, rank_hint, source)
    notes: list[str] = []
    groups = _declared_groups(info)
    comms = [e for e in events if e.name == PARAM_COMMS]
    if comms:
        pairs = from_param_comms(comms, groups, info, source, notes)
        attach_kernels(pairs, events, notes)
        calls = [call for _, call in pairs]
    else:
        calls = from_dispatcher(events, groups, info, source, notes)
    _assign_steps(calls, events)
    world_size = _world_size(info, groups, source)
    head = header(torch_version=str(document.get("torch_version", "")),
                  backend=str(info.get("backend", "")), world_size=world_size, rank=rank,
                  host=str(document.get("host_name", "")), groups=groups, source=SOURCE,
                  clock=CLOCK)
    return ProfiledRank(path=source, rank=rank, header=head, calls=calls, notes=notes)


def read(path: str | Path) -> list[ProfiledRank]:
    """Every rank file under ``path``, all parsed before anything is written: one rank per
    file, one world size, at least one call somewhere."""
    ranks: dict[int, ProfiledRank] = {}
    for file in trace_files(path):
        match = _RANK_IN_NAME.search(file.name)
        profiled = parse(read_document(file), str(file),
                         rank_hint=int(match.group(1)) if match else None)
        if profiled.rank in ranks:
            raise ImportFormatError(f"{file}: rank {profiled.rank} again (also "
                                    f"{ranks[profiled.rank].path}): one file per rank")
        ranks[profiled.rank] = profiled
    sizes = {r.header["world_size"] for r in ranks.values()}
    if len(sizes) > 1:
        raise ImportFormatError(f"{path}: the files disagree on the world size "
                                f"({sorted(sizes)}): they are not from one job")
    if not any(r.calls for r in ranks.values()):
        raise ImportFormatError(f"{path}: no collective calls in the trace (no "
                                f"{PARAM_COMMS} or c10d:: events; profile with "
                                "ProfilerActivity.CPU and, on gloo, record_shapes=True)")
    return [ranks[r] for r in sorted(ranks)]


# -- the job: rank, world, groups ------------------------------------------------------------

def _rank(info: dict, hint: int | None, source: str) -> int:
    if "rank" in info:
        return int(info["rank"])
    if hint is not None:
        return hint
    raise fail(source, None, "the trace does not say which rank wrote it (no distributedInfo; "
               "name the file rank<r>.json)")


def _declared_groups(info: dict) -> dict[str, Group]:
    """The groups the profiler listed (``distributedInfo.pg_config``): every group the job
    created, in creation order, which is the order replay rebuilds them in."""
    groups = {}
    for config in info.get("pg_config") or []:
        ranks = int_list(config.get("ranks"))
        if not ranks:
            continue
        name = str(config.get("pg_name"))
        backend = str(config.get("backend_config", "")).split(",")[0].split(":")[-1]
        groups[name] = Group(name=name, ranks=tuple(ranks), backend=backend or
                             str(info.get("backend", "")), desc=str(config.get("pg_desc", "")))
    return groups


def _world_size(info: dict, groups: dict[str, Group], source: str) -> int:
    if "world_size" in info:
        return int(info["world_size"])
    if groups:
        return max(max(g.ranks) for g in groups.values()) + 1
    raise fail(source, None, "the trace does not give the world size (no distributedInfo)")


# -- steps ---------------------------------------------------------------------------------

def _assign_steps(calls: list[Call], events: list[Event]) -> None:
    starts = sorted((ns(e.ts_us), int(m.group(1))) for e in events
                    if (m := _STEP.fullmatch(e.name)))
    if not starts:
        return
    for call in calls:
        begun = [step for start, step in starts if start <= (call.t_issue_ns or 0)]
        call.step = begun[-1] if begun else starts[0][1]
