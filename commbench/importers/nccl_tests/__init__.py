"""nccl-tests output (``all_reduce_perf`` and friends, text 2.13-2.19 or ``-J`` JSON) -> rows.

``text.py`` and ``json_file.py`` read the two formats into the sections of ``model.py``; this module
turns sections into rows; ``alltoallv.py`` says what alltoallv_perf's numbers mean (its size is the
busiest rank's bytes, its split matrix is not in the file). ``size`` is already commbench's size
(the largest buffer); ``count`` is what the NCCL call got (per rank for allgather, reduce-scatter,
alltoall, gather and scatter), so ``size / (count x itemsize)`` is the group size, which checks the
world size or supplies it. busbw uses the group's size (NCCL_TESTS_SPLIT runs several groups at
once), as nccl-tests does.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePath

from commbench import collectives
from commbench.core.errors import UsageError
from commbench.importers.common import (
    ITEMSIZES,
    Imported,
    Measured,
    build_rows,
    fail,
    normalized_op,
)
from commbench.importers.nccl_tests import alltoallv
from commbench.importers.nccl_tests.json_file import read_json
from commbench.importers.nccl_tests.model import DTYPES, Result, Section
from commbench.importers.nccl_tests.text import read_text

SOURCE = "nccl-tests"
# nccl-tests binary -> (commbench op, p2p pattern)
PROGRAMS = {
    "allreduce": ("allreduce", ""),
    "allgather": ("allgather", ""),
    "broadcast": ("broadcast", ""),
    "reducescatter": ("reduce_scatter", ""),
    "alltoall": ("alltoall", ""),
    "reduce": ("reduce", ""),
    "gather": ("gather", ""),
    "scatter": ("scatter", ""),
    "sendrecv": ("p2p", "ring"),
    "alltoallv": (alltoallv.OP, alltoallv.PATTERN),  # 2.19: src/alltoallv.cu
}
# --op may also name the commbench op.
OP_NAMES = {**PROGRAMS, "bcast": ("broadcast", ""), "p2p": ("p2p", "ring")}
# The ops whose largest buffer is cut into one chunk per rank: size = count x itemsize x ranks.
UNCHECKED = "off: N/A in nccl-tests"
# What the file says, no more: nccl-tests compared results and printed a #wrong count.
CHECKED = "nccl-tests -c 1: #wrong as the file printed it"


def parse(text: str, source: str, op: str | None = None,
          world_size: int | None = None) -> Imported:
    """nccl-tests output (text or -J JSON, told apart by the first character) -> rows."""
    wanted = _op_option(op) if op else None
    if world_size is not None and world_size < 1:
        raise UsageError(f"bad --world-size {world_size}: it must be at least 1")
    if text.lstrip().startswith("{"):
        sections, meta = read_json(text, source)
    else:
        sections, meta = read_text(text, source)
    sections = [s for s in sections if s.results]
    if not sections:
        raise fail(source, None, "no nccl-tests results found (expected the column header "
                                 "'#  size  count  type  redop  root  time  algbw  busbw ...' "
                                 "and rows under it)")
    measured, notes, described = [], [], []
    for section in sections:
        rows, section_notes, description = _measure(section, source, wanted, world_size)
        measured += rows
        notes += section_notes
        described.append(description)
    rows, merge_notes = build_rows(measured)
    notes += merge_notes
    if not rows:
        raise fail(source, None, "no nccl-tests rows with a size above 0")
    first = described[0]
    hosts = sorted({h for d in described for h in d["hosts"]})
    if hosts:
        meta["nnodes"] = len(hosts)
    routings = [d["routing"] for d in described if d.get("routing")]
    if routings:  # alltoallv_perf: the pattern, for history's series (history.ingest)
        meta["routing"] = "; ".join(dict.fromkeys(routings))
    meta.update(
        world_size=first["world_size"],
        hosts=hosts,
        backends=["nccl"],
        versions={"nccl-tests": first["nccl_tests"], "nccl": first["nccl"]},
        tests=described,
        notes=notes,
    )
    return Imported(rows=rows, meta=meta, notes=notes)


def _op_option(op: str) -> tuple[str, str]:
    wanted = OP_NAMES.get(normalized_op(op))
    if wanted is None:
        names = ", ".join(sorted({name for name, _ in OP_NAMES.values()}))
        raise UsageError(f"unknown --op {op!r} for nccl-tests (choose from {names})")
    return wanted


def _program_op(program: str, source: str, line: int) -> tuple[str, str]:
    stem = PurePath(program).name
    match = re.match(r"(\w+?)_perf", stem)
    name = normalized_op(match.group(1)) if match else normalized_op(stem)
    if name not in PROGRAMS:
        raise fail(source, line, f"commbench has no op for the nccl-tests binary {stem!r} "
                                 f"(it imports {', '.join(sorted(PROGRAMS))})")
    return PROGRAMS[name]


def _measure(section: Section, source: str, wanted: tuple[str, str] | None,
             world_size: int | None) -> tuple[list[Measured], list[str], dict]:
    """One section's results -> Measured items (two per size), notes, and what it ran."""
    notes = list(section.notes)
    op, pattern = _section_op(section, source, wanted)
    first = section.results[0]
    itemsize_of = {}
    for result in section.results:
        dtype = DTYPES.get(result.type_name)
        if dtype is None:
            raise _fail_at(result, source, f"unknown nccl-tests data type {result.type_name!r}")
        itemsize_of[result.type_name] = ITEMSIZES[dtype]
    world, group_size, groups = _world(section, op, world_size, itemsize_of, source)
    hosts = sorted({rank["host"] for rank in section.ranks}) if section.ranks_complete else []
    nnodes = len(hosts)
    span = "" if not nnodes else ("intra-node" if nnodes == 1 else "inter-node")
    descriptor = collectives.get(op)
    reduces = descriptor.reduces
    routed = op == alltoallv.OP
    if routed:
        notes += alltoallv.notes(section)
    measured = []
    skipped = 0
    for result in section.results:
        dtype = DTYPES[result.type_name]
        itemsize = ITEMSIZES[dtype]
        _check_count(result, op, itemsize, group_size, source)
        if result.size <= 0:
            skipped += 1
            continue
        for half in result.halves:
            if half.timing is None:
                continue
            measured.append(Measured(
                fields={
                    "op": op,
                    "pattern": pattern,
                    "backend": "nccl",
                    "device": "cuda",
                    "world_size": world,
                    "nnodes": nnodes,
                    "dtype": dtype,
                    # sendrecv prints the -o op it ignores; only reducing ops keep it.
                    "reduce_op": result.redop if reduces else "",
                    "inplace": half.inplace,
                    "size_bytes": result.size,
                    "iters": section.iters * section.agg_iters * max(1, section.graph),
                    "wrong": half.wrong or 0,
                    "slowest_rank": -1,
                    "skew_pct": math.nan,  # nccl-tests prints no per-rank spread
                    "rank_time": section.rank_time,
                    "validation": CHECKED if half.wrong is not None else UNCHECKED,
                    "group_size": group_size,
                    "groups": groups,
                    "span": span,
                    "source": SOURCE,
                    "root": result.root if descriptor.rooted and result.root >= 0 else None,
                    "peers": "",
                    "timer": "cuda-graph" if section.graph else section.timer,
                    **(alltoallv.row_fields(result) if routed else {}),
                },
                timing=half.timing,
                where=result.where,
            ))
    if skipped:
        notes.append(f"skipped {skipped} row(s) of 0 bytes (nccl-tests rounds small sizes down "
                     "to whole chunks; commbench sizes start at 1 byte)")
    if section.timer == "host-cputime":
        notes.append("the times are nccl-tests -C 1 cputime (the host's launch time per call, "
                     "not the collective's): algbw and busbw are computed from them; compare "
                     "such rows only with other -C 1 rows")
    else:
        notes += _check_average(section, op, pattern, group_size)
    description = {
        "line": section.line,
        "program": PurePath(section.program).name if section.program else "",
        "op": op + (f"/{pattern}" if pattern else ""),
        "world_size": world,
        "group_size": group_size,
        "groups": groups,
        "hosts": hosts,
        "nccl_tests": section.version or None,
        "nccl": section.nccl or None,
        "iters": section.iters,
        "agg_iters": section.agg_iters,
        "validation": section.validation,
        "per_iteration": any(h.timing is not None and h.timing.tail == "call"
                             for r in section.results for h in r.halves),
        "rank_time": section.rank_time,
        "avg_busbw_gbps": section.avg_busbw,
        "out_of_bounds": section.out_of_bounds,
        "first_row": first.where,
        "ranks": section.ranks,
    }
    if routed:
        description["routing"] = alltoallv.routing(section)
    return measured, notes, description


def _check_average(section: Section, op: str, pattern: str, group_size: int) -> list[str]:
    """The trailer's 'Avg bus bandwidth' is the mean busbw of every half printed (0 B rows
    too): far from what these rows give, the world size (hence every busbw) is likely wrong."""
    if section.avg_busbw is None or not section.avg_busbw > 0 or not math.isfinite(
            section.avg_busbw):
        return []
    factor = collectives.get(op).busbw_factor(group_size, pattern)
    values = [result.size / (half.timing.time_us * 1e-6) / 1e9 * factor if half.timing else 0.0
              for result in section.results for half in result.halves]
    mean = sum(values) / len(values) if values else 0.0
    if abs(mean - section.avg_busbw) <= 0.05 * section.avg_busbw + 0.01:
        return []
    return [f"the file's 'Avg bus bandwidth' is {section.avg_busbw:g} GB/s, its rows give "
            f"{mean:.4g} GB/s with {group_size} ranks: is the world size right?"]


def _section_op(section: Section, source: str, wanted: tuple[str, str] | None):
    if section.program:
        found = _program_op(section.program, source, section.program_line)
        if wanted and wanted != found:
            raise fail(source, section.program_line,
                       f"--op {wanted[0]} disagrees with the file, which ran "
                       f"{PurePath(section.program).name}")
        return found
    if wanted:
        return wanted
    raise fail(source, section.line, "the file does not name the test (nccl-tests before "
                                     "2.16.7 prints no program name): pass --op")


def _world(section: Section, op: str, world_size: int | None, itemsize_of: dict,
           source: str) -> tuple[int, int, int]:
    """(world size, ranks per group, groups): the device lines, else --world-size, else what
    size / count says for the ops that split their buffer."""
    if section.ranks and section.ranks_complete:
        world = len(section.ranks)
        group_of_first = min(section.ranks, key=lambda r: r["rank"])["group"]
        group_size = sum(1 for r in section.ranks if r["group"] == group_of_first)
        groups = len({r["group"] for r in section.ranks})
        if world_size is not None and world_size not in (world, group_size):
            raise fail(source, section.line, f"the file lists {world} ranks, --world-size says "
                                             f"{world_size}")
        return world, group_size, groups
    if world_size is not None:
        return world_size, world_size, 1
    if op == alltoallv.OP:  # its size is count x itemsize x n only within 16 B a peer
        ranks = alltoallv.ranks_from_sizes(section.results, itemsize_of)
        if ranks:
            return ranks, ranks, 1
    elif collectives.get(op).splits:
        for result in section.results:
            chunk = result.count * itemsize_of[result.type_name]
            if chunk > 0 and result.size % chunk == 0:
                ranks = result.size // chunk
                return ranks, ranks, 1
    raise fail(source, section.line, "the file lists no ranks ('#  Rank ...' lines): pass "
                                     "--world-size")


def _check_count(result: Result, op: str, itemsize: int, group_size: int, source: str) -> None:
    """size = count x itemsize (x ranks for the ops that split): a wrong --op or --world-size
    shows here, before it makes every busbw wrong."""
    if op == alltoallv.OP:
        problem = alltoallv.count_problem(result, itemsize, group_size)
        if problem:
            raise _fail_at(result, source, problem)
        return
    ranks = group_size if collectives.get(op).splits else 1
    if result.size != result.count * itemsize * ranks:
        why = (f"{ranks} ranks" if collectives.get(op).splits
               else "an op that does not split its buffer")
        times = f" x {ranks}" if ranks > 1 else ""
        raise _fail_at(result, source, f"size {result.size} is not count {result.count} x "
                                       f"{itemsize} B{times} ({why}): is --op or --world-size "
                                       "right?")


def _fail_at(result: Result, source: str, message: str):
    """An error at a row: ``file:line: ...`` for text, ``file: results[i]: ...`` for JSON."""
    if result.line is None:
        return fail(source, None, f"{result.where}: {message}")
    return fail(source, result.line, message)
