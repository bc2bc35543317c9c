"""NCCL Inspector logs in, commbench traces out (docs/commands/import.md).

The Inspector (NVIDIA/nccl ``plugins/profiler/inspector``, output format v4.0) writes, per
process, one JSON object per line for each completed collective of each communicator::

    {"header": {"id": "0x7f8c...", "comm_name": "DP Group 0", "rank": 2, "n_ranks": 8,
                "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": ...,
                  "hostname": "node1", "pid": 1639453, ...},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": ..., "coll_busbw_gbs": ...,
                   "event_trace_ts": {"coll_start_ts": ..., ...}}}   # the last: verbose only

and ``p2p_perf`` objects (``p2p``, ``p2p_sn``, ``p2p_peer``, ``p2p_msg_size_bytes``,
``p2p_exec_time_us``) alike. What is read: the communicator (``id``) is a group; a process
(hostname, pid) is a global rank, its rank in the largest communicator it belongs to; calls
are lined up by ``coll_sn`` per communicator; ``coll_exec_time_us`` is the in-situ time
(``dur_ns``), which is what the stragglers rule reads clock-free (the Inspector's clocks are
not compared across ranks); ``coll_start_ts`` (verbose) is the issue time. A ``dump_stats``
line and ``coll_algo`` / ``coll_proto`` fields, as the issue describes v4.x, are accepted and
kept in notes where present; neither is in the plugin's source at NVIDIA/nccl 5067397 (its
JSON writer, inspector_json.cc), nor in a real file seen here (this machine has no GPU), and
the size is bytes with no dtype (read as uint8). Steps: none in the log; found from the
calls' rhythm as for a Flight Recorder dump.

Pure: text in, rank traces out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from commbench.importers.common import ImportFormatError
from commbench.importers.flight_recorder import rhythm_steps
from commbench.results.trace import Call, Group, RankTrace, Trace, header

SOURCE = "nccl-inspector"
CLOCK = "nccl-inspector"
OPS = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
       "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall",
       "gather": "gather", "scatter": "scatter", "send": "send", "recv": "recv"}


def _files(sources: list[str]) -> list[Path]:
    files: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file()
                            and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            raise ImportFormatError(f"{source}: no such file or folder")
    if not files:
        raise ImportFormatError(f"{', '.join(sources)}: no NCCL Inspector log in it")
    return files


def read_lines(path: Path) -> tuple[list[dict], list[str]]:
    """A log's objects; a last line cut short (a job killed mid-write) is left out and said,
    any other bad line is an error naming the file and line."""
    lines = path.read_text(errors="replace").splitlines()
    records, notes = [], []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            if number == len(lines):
                notes.append(f"{path.name}:{number}: the last line was cut short and is left "
                             "out")
                break
            raise ImportFormatError(f"{path}:{number}: not a JSON line of an NCCL Inspector "
                                    "log") from None
        if not isinstance(record, dict):
            raise ImportFormatError(f"{path}:{number}: not an NCCL Inspector record")
        records.append(record)
    return records, notes


def read(sources: list[str]) -> tuple[Trace, list[str]]:
    """Every log named, as one job's trace, and the notes."""
    notes: list[str] = []
    perf: list[tuple[dict, dict, dict, bool]] = []  # header, metadata, perf, is_p2p
    for path in _files(sources):
        records, said = read_lines(path)
        notes += said
        for record in records:
            if "dump_stats" in record:
                notes.append(f"{path.name}: dump_stats {json.dumps(record['dump_stats'])}")
                continue
            head, meta = record.get("header"), record.get("metadata") or {}
            body = record.get("coll_perf") or record.get("p2p_perf")
            if not isinstance(head, dict) or not isinstance(body, dict):
                raise ImportFormatError(f"{path}: a record without header and coll_perf / "
                                        "p2p_perf: not an NCCL Inspector log")
            perf.append((head, meta, body, "p2p_perf" in record))
    if not perf:
        raise ImportFormatError(f"{', '.join(sources)}: no collective in the NCCL Inspector "
                                "log(s)")
    # a process is a global rank: its rank in the largest communicator it is in
    largest: dict[tuple, tuple[int, int]] = {}
    for head, meta, _, _ in perf:
        who = (meta.get("hostname", ""), meta.get("pid", 0))
        size = int(head.get("n_ranks", 0))
        if who not in largest or size > largest[who][0]:
            largest[who] = (size, int(head["rank"]))
    world = max(size for size, _ in largest.values())
    global_of = {who: rank for who, (_, rank) in largest.items()}
    if len(set(global_of.values())) < len(global_of):
        raise ImportFormatError("two processes claim one rank of the largest communicator: "
                                "logs of different jobs mixed? give one job's logs")
    members: dict[str, dict[int, int]] = defaultdict(dict)  # comm -> comm rank -> global
    calls: dict[int, list[tuple[str, int, Call]]] = defaultdict(list)
    hosts: dict[int, str] = {}
    for head, meta, body, is_p2p in perf:
        who = (meta.get("hostname", ""), meta.get("pid", 0))
        rank = global_of[who]
        hosts[rank] = str(meta.get("hostname", ""))
        comm = str(head.get("id", ""))
        members[comm][int(head["rank"])] = rank
        prefix = "p2p" if is_p2p else "coll"
        name = str(body.get(prefix, "")).lower().replace("_", "")
        op = OPS.get(name)
        if op is None:
            notes.append(f"{name or '?'}: not a call commbench replays; left out")
            continue
        size = int(body.get(f"{prefix}_msg_size_bytes", 0))
        exec_us = body.get(f"{prefix}_exec_time_us")
        start = (body.get("event_trace_ts") or {}).get(f"{prefix}_start_ts")
        for extra in ("coll_algo", "coll_proto"):
            if extra in body:
                notes.append(f"{extra} present ({body[extra]}); kept out of the trace")
        calls[rank].append((comm, int(body.get(f"{prefix}_sn", 0)), Call(
            seq=0, pg=comm, op=op, dtype="uint8", in_numel=size, out_numel=size,
            peer=int(body["p2p_peer"]) if is_p2p and "p2p_peer" in body else None,
            t_issue_ns=int(start) * 1000 if start else None,
            dur_ns=int(float(exec_us) * 1000) if exec_us is not None else None)))
    groups = {comm: Group(comm, tuple(sorted(ranks.values())), "nccl", "")
              for comm, ranks in members.items()}
    first = {}
    for rank, mine in calls.items():
        for comm, sn, _ in mine:
            first.setdefault((rank, comm), sn)
            first[(rank, comm)] = min(first[(rank, comm)], sn)
    common = defaultdict(int)
    for (_, comm), sn in first.items():
        common[comm] = max(common[comm], sn)
    lowest = min(calls)
    ordered = sorted(calls[lowest], key=lambda item: (item[2].t_issue_ns or 0, item[0], item[1]))
    numbers = rhythm_steps([(c, call.op, call.in_numel) for c, _, call in ordered],
                           [call.t_issue_ns or 0 for _, _, call in ordered])
    step_of = {(c, sn): step for (c, sn, _), step in zip(ordered, numbers, strict=False)}
    ranks = {}
    for rank, mine in sorted(calls.items()):
        kept = sorted((item for item in mine if item[1] >= common[item[0]]),
                      key=lambda item: (item[0], item[1]))
        out = []
        for comm, sn, call in kept:
            call.seq = len(out)
            call.step = step_of.get((comm, sn), 0)
            out.append(call)
        out.sort(key=lambda call: (call.step, call.t_issue_ns or 0))
        for index, call in enumerate(out):
            call.seq = index
        used = {call.pg for call in out}
        head = header(torch_version="", backend="nccl", world_size=world, rank=rank,
                      host=hosts.get(rank, ""), groups={g: groups[g] for g in sorted(used)},
                      source=SOURCE, clock=CLOCK,
                      steps_ended=max(numbers, default=0) or None)
        ranks[rank] = RankTrace(header=head, groups={g: groups[g] for g in used}, calls=out,
                                ended=head.get("steps_ended"))
    missing = sorted(set(range(world)) - set(ranks))
    if missing:
        notes.append(f"no log for rank(s) {', '.join(map(str, missing))}: the others are read "
                     "without them")
    folder = Path(sources[0]) if Path(sources[0]).is_dir() else Path(sources[0]).parent
    return Trace(path=folder, ranks=ranks), notes
