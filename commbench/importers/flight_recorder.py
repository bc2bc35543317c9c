"""PyTorch Flight Recorder dumps in, commbench traces out (docs/commands/import.md).

torch keeps the last ``TORCH_FR_BUFFER_SIZE`` calls of each rank in a ring buffer and writes it
as one file per rank: pickle where ``TORCH_FR_DUMP_TEMP_FILE`` is set (``<prefix><rank>``, on
a NCCL watchdog timeout or on demand), JSON from ``_dump_fr_trace_json``. What a dump holds,
as seen in real gloo dumps of torch 2.13 (dump version 2.10): ``entries``, each with
``process_group`` (name, desc), ``collective_seq_id`` (the group's call number),
``profiling_name`` (``gloo:all_reduce``), ``input_sizes`` / ``output_sizes`` /
``input_dtypes``, ``time_created_ns`` (the wall clock when the call was issued) and, on NCCL,
``time_discovered_completed_ns`` and ``duration_ms`` (0 / None on gloo); ``pg_config`` with
each group's ranks (empty on gloo); ``pg_status``. A dump names neither its rank nor its host:
the rank comes from the file name's trailing number (as torch names it), and the dumps of one
job are taken to share a host's wall clock unless they say otherwise (the docs state it).

How calls become a trace:

- each group's calls are lined up by ``collective_seq_id``; a ring buffer that wrapped keeps
  different first calls on different ranks, so calls before the latest first one are left out
  (said in a note);
- a dump has no steps: they are found from the job's own rhythm, the shortest period with
  which the lowest rank's calls (group, op, size) repeat, cut where its calls have their
  longest gaps (the compute between steps), and given to every rank's matching call (``record
  --flight-recorder`` notes each step end beside the dump, and those are used instead);
- a group's members come from ``pg_config``, or, where it is empty (gloo), are the ranks whose
  dumps have calls on it.

Pure: bytes in, rank traces out. Pickles are read with an unpickler that builds plain
containers only (a dump is data; a pickle naming any class is refused).
"""

from __future__ import annotations

import bisect
import io
import json
import math
import pickle
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from commbench.importers.common import ImportFormatError
from commbench.importers.torch_profiler.events import DTYPES
from commbench.importers.torch_profiler.param_comms import COLLECTIVES
from commbench.results.trace import Call, Group, RankTrace, Trace, header

SOURCE = "flight-recorder"
CLOCK = "wall"
_RANK = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$")
_PEERS = re.compile(r"(\d+)\s*(?:->|<-)\s*(\d+)")
_FOLDED = {name.replace("_", ""): op for name, op in COLLECTIVES.items()}


@dataclass
class Dump:
    """One rank's dump as read: its entries and groups."""

    path: Path
    rank: int
    version: str
    entries: list[dict]
    pg_config: dict


@dataclass
class Imported:
    """The dumps as a trace, what was left out and why."""

    trace: Trace
    notes: list[str] = field(default_factory=list)
    missing_files: list[int] = field(default_factory=list)


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"names a class ({module}.{name})")


def read_dump(path: Path) -> Dump:
    """One dump file, JSON or pickle; a file that is neither names itself and why."""
    data = path.read_bytes()
    if not data:
        raise ImportFormatError(f"{path}: empty file, not a Flight Recorder dump")
    try:
        if data.lstrip()[:1] in (b"{", b"["):
            loaded = json.loads(data)
        else:
            loaded = _DataOnly(io.BytesIO(data)).load()
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        why = getattr(error, "msg", None) or str(error)
        raise ImportFormatError(f"{path}: a torn or bad JSON dump ({why})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as error:
        raise ImportFormatError(f"{path}: not a Flight Recorder dump (unreadable pickle: "
                                f"{error or 'cut short'})") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("entries"), list):
        raise ImportFormatError(f"{path}: not a Flight Recorder dump (no 'entries' list)")
    rank = loaded.get("rank")
    if rank is None:
        found = _RANK.search(path.name)
        if not found:
            raise ImportFormatError(f"{path}: a dump names no rank and its file name ends in "
                                    "no number (torch writes <prefix><rank>)")
        rank = int(found.group(1))
    return Dump(path, int(rank), str(loaded.get("version", "")), loaded["entries"],
                loaded.get("pg_config") or {})


def dump_files(sources: list[str]) -> list[Path]:
    """The dump files named, a folder standing for the files in it."""
    files: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            raise ImportFormatError(f"{source}: no such file or folder")
    if not files:
        raise ImportFormatError(f"{', '.join(sources)}: no Flight Recorder dump in it")
    return files


def op_of(entry: dict) -> tuple[str | None, tuple[int, int] | None]:
    """commbench's op for an entry's ``profiling_name`` and, for p2p, its (src, dst) where the
    name says them (``nccl:send 0->1``)."""
    name = str(entry.get("profiling_name", ""))
    bare = name.split(":", 1)[-1].split(" ", 1)[0].strip()
    op = COLLECTIVES.get(bare) or _FOLDED.get(bare.replace("_", ""))
    peers = _PEERS.search(name)
    pair = None
    if peers:
        a, b = int(peers.group(1)), int(peers.group(2))
        pair = (a, b) if "->" in name else (b, a)
    return op, pair


def _numel(sizes) -> int:
    if not sizes:
        return 0
    return sum(math.prod(int(d) for d in shape) for shape in sizes if isinstance(shape, list))


def _ns(value) -> int | None:
    return int(value) if value not in (None, 0, "0", "") else None


def read(sources: list[str], step_ends: list[int] | None = None) -> Imported:
    """Every dump named, as one job's trace. A dump that cannot be read is left out with a
    warning while others remain (its rank is then named as a missing file); dumps whose
    calls do not overlap in time are of different jobs and refused. ``step_ends``: the
    lowest rank's step ends (wall-clock ns, as ``record --flight-recorder`` notes them)
    number the steps instead of the calls' rhythm."""
    notes: list[str] = []
    dumps: dict[int, Dump] = {}
    errors: list[str] = []
    for path in dump_files(sources):
        try:
            dump = read_dump(path)
        except ImportFormatError as error:
            errors.append(str(error))
            continue
        if dump.rank in dumps:
            raise ImportFormatError(f"{path}: a second dump of rank {dump.rank} (the first: "
                                    f"{dumps[dump.rank].path}); dumps of different jobs mixed?")
        dumps[dump.rank] = dump
    if not dumps:
        raise ImportFormatError(errors[0] if len(errors) == 1 else
                                f"no readable Flight Recorder dump: {'; '.join(errors)}")
    notes += [f"left out: {error}" for error in errors]
    _check_one_job(dumps)
    world = max(dumps) + 1
    for dump in dumps.values():
        for config in dump.pg_config.values():
            ranks = _ranks(config.get("ranks"))
            if ranks:
                world = max(world, max(ranks) + 1)
    missing = sorted(set(range(world)) - set(dumps))
    groups = _groups(dumps)
    aligned = _aligned(dumps, notes)
    steps = _steps(aligned, step_ends)
    ranks = {}
    for rank, entries in aligned.items():
        calls = []
        step = 0
        for entry in entries:
            op, pair = op_of(entry)
            if op is None:
                continue
            pg = str(entry["process_group"][0])
            step = steps.get((pg, entry.get("collective_seq_id")), step)
            dtype = DTYPES.get((entry.get("input_dtypes") or ["Float"])[0], "float32")
            duration = entry.get("duration_ms")
            peer = None
            if pair is not None and op in ("send", "recv"):
                members = groups[pg].ranks
                local = pair[1] if op == "send" else pair[0]
                peer = members[local] if local < len(members) else local
            calls.append(Call(
                seq=len(calls), pg=pg, op=op, dtype=dtype,
                in_numel=_numel(entry.get("input_sizes")),
                out_numel=_numel(entry.get("output_sizes")), step=step, peer=peer,
                t_issue_ns=_ns(entry.get("time_created_ns")),
                t_end_ns=_ns(entry.get("time_discovered_completed_ns")),
                dur_ns=round(float(duration) * 1e6) if duration not in (None, "") else None))
        used = {call.pg for call in calls}
        head = header(torch_version="", backend=_backend(entries), world_size=world, rank=rank,
                      host="", groups={name: groups[name] for name in sorted(used)},
                      source=SOURCE, clock=CLOCK,
                      steps_ended=(len(step_ends) if step_ends is not None else
                                   max(steps.values(), default=0)) or None)
        ranks[rank] = RankTrace(header=head, groups={n: groups[n] for n in used}, calls=calls,
                                ended=head.get("steps_ended"), path=dumps[rank].path)
    if missing:
        notes.append(f"no dump for rank(s) {', '.join(map(str, missing))}: the others are "
                     "read without them")
    notes.append("the dumps name no host: their wall clocks are compared as one host's")
    folder = dumps[min(dumps)].path.parent
    return Imported(Trace(path=folder, ranks=ranks), notes, missing)


def _backend(entries: list[dict]) -> str:
    for entry in entries:
        name = str(entry.get("profiling_name", ""))
        if ":" in name:
            return name.split(":", 1)[0]
    return ""


def _ranks(value) -> list[int]:
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else []
    return [int(r) for r in value or []]


def _groups(dumps: dict[int, Dump]) -> dict[str, Group]:
    members: dict[str, set[int]] = defaultdict(set)
    descs: dict[str, str] = {}
    configured: dict[str, list[int]] = {}
    for rank, dump in dumps.items():
        for entry in dump.entries:
            name, desc = (list(entry.get("process_group") or ["0", ""]) + [""])[:2]
            members[str(name)].add(rank)
            descs[str(name)] = str(desc)
        for key, config in dump.pg_config.items():
            ranks = _ranks(config.get("ranks"))
            if ranks:
                configured[str(config.get("name", key))] = ranks
    return {name: Group(name, tuple(configured.get(name) or sorted(ranks)), "",
                        descs.get(name, "")) for name, ranks in members.items()}


def _aligned(dumps: dict[int, Dump], notes: list[str]) -> dict[int, list[dict]]:
    """Each rank's entries from the first call every member of its group still holds."""
    first: dict[str, int] = {}
    for dump in dumps.values():
        seen: dict[str, int] = {}
        for entry in dump.entries:
            pg = str((entry.get("process_group") or ["0"])[0])
            seq = entry.get("collective_seq_id")
            if isinstance(seq, int) and seq > 0 and not entry.get("is_p2p"):
                seen[pg] = min(seen.get(pg, seq), seq)
        for pg, seq in seen.items():
            first[pg] = max(first.get(pg, seq), seq)
    out: dict[int, list[dict]] = {}
    for rank, dump in sorted(dumps.items()):
        kept, dropped = [], 0
        for entry in sorted(dump.entries, key=lambda e: e.get("record_id", 0)):
            pg = str((entry.get("process_group") or ["0"])[0])
            seq = entry.get("collective_seq_id")
            if not entry.get("is_p2p") and isinstance(seq, int) and seq < first.get(pg, 0):
                dropped += 1
                continue
            kept.append(entry)
        if dropped:
            notes.append(f"rank {rank}: {dropped} call(s) before the others' ring buffers "
                         "begin are left out")
        out[rank] = kept
    return out


def _steps(aligned: dict[int, list[dict]],
           step_ends: list[int] | None = None) -> dict[tuple[str, int], int]:
    """(group, collective_seq_id) -> step, from the lowest rank's step ends where known (a
    call's step is the number of ends before it, as in a recording), else from its rhythm
    (``rhythm_steps``)."""
    entries = [e for e in aligned[min(aligned)] if not e.get("is_p2p") and op_of(e)[0]]
    keys = [(str(e["process_group"][0]), op_of(e)[0], _numel(e.get("input_sizes")))
            for e in entries]
    times = [int(e.get("time_created_ns") or 0) for e in entries]
    if step_ends is not None:
        ends = sorted(step_ends)
        numbers = [bisect.bisect_left(ends, t) for t in times]
    else:
        numbers = rhythm_steps(keys, times)
    if not numbers:
        return {}
    return {(str(e["process_group"][0]), e.get("collective_seq_id")): step
            for e, step in zip(entries, numbers, strict=True)}


def rhythm_steps(keys: list, times: list[int] | None = None) -> list[int]:
    """A step number per call of a job that does not say where its steps end (a dump): the
    calls' keys (group, op, size) repeat every ``p`` calls; a step is a multiple of ``p``
    calls, the one whose cuts fall on the longest gaps against the gaps inside it (DDP's
    buckets are often all one size, so ``p`` alone would make every bucket a step). Without
    times, every ``p`` calls. The calls before the keys start to repeat are step 0 (set-up).
    Empty where nothing repeats."""
    n = len(keys)
    base = next((p for p in range(1, n // 3 + 1)
                 if sum(keys[i] == keys[i - p] for i in range(p, n)) >= 0.8 * (n - p)), 0)
    if not base:
        return []
    # The set-up before the rhythm starts (DDP's parameter broadcasts, a first allgather) is
    # step 0, as in a recording: its gaps (model build, the first rendezvous: hundreds of ms)
    # would otherwise outweigh every step's and draw the cuts to a period that hits them.
    start = next((i for i in range(n - base) if keys[i] == keys[i + base]), 0)
    times = times if times and any(times) else [0] * n
    gap = [times[i] - times[i - 1] if i > start else 0 for i in range(n)]
    best = (0.0, base, 0)
    for period in range(base, (n - start) // 3 + 1, base):
        for phase in range(period):
            cuts = set(range(start + (phase or period), n, period))
            inside = [gap[i] for i in range(start + 1, n) if i not in cuts]
            at = [gap[i] for i in cuts]
            if not at:
                continue
            # no gap inside a step (every call its own step): no contrast to go by
            score = (sum(at) / len(at)) / (sum(inside) / len(inside) + 1) if inside else 1.0
            if score > best[0]:
                best = (score, period, phase)
    _, period, phase = best
    numbers, step = [], 1 if start else 0
    for i in range(n):
        if i > start and (i - start) % period == phase:
            step += 1
        numbers.append(0 if i < start else step)
    return numbers


def _check_one_job(dumps: dict[int, Dump]) -> None:
    """Dumps of one job overlap in time; two that do not (by more than a minute of clock
    skew) come from different jobs."""
    spans = {}
    for rank, dump in dumps.items():
        times = [int(e["time_created_ns"]) for e in dump.entries if e.get("time_created_ns")]
        if times:
            spans[rank] = (min(times), max(times))
    slack = 60 * 10**9
    for a in spans:
        for b in spans:
            if a < b and (spans[a][1] + slack < spans[b][0] or spans[b][1] + slack < spans[a][0]):
                raise ImportFormatError(
                    f"{dumps[a].path} and {dumps[b].path}: their calls do not overlap in time "
                    "(dumps of different jobs mixed?); give one job's dumps")
    versions = {dump.version for dump in dumps.values()}
    if len(versions) > 1:
        raise ImportFormatError(f"dumps of different torch versions mixed ({sorted(versions)}): "
                                "give one job's dumps")
