"""nccl-tests' text output, 2.13 to 2.19, as the versions print it (common.cu, util.cu):

- a preamble of ``#`` lines: ``# nccl-tests version V nccl-headers=H nccl-library=L`` (2.17.4+),
  ``# Collective test starting: all_reduce_perf`` (2.16.7+; the only place the text names the
  test, so older files need ``--op``), ``# nThread T nGpus G minBytes ... iters: I agg iters: A
  validation: V graph: G [unalign: U]``, and one ``#  Rank R [Group G] Pid P on HOST device D
  [BUS] GPU`` line per rank (``Group`` since 2.13.4: NCCL_TESTS_SPLIT's groups);
- the column header ``size count type redop root`` then, for out-of-place and in-place, ``time
  algbw busbw #wrong`` (``cputime`` for ``-C 1`` since 2.17.3), each followed by ``i_min i_max
  i_p99 i_cv%`` with ``-I 1`` (2.19.2+), and a ``timestamp`` (two words) with ``-S 1`` (2.17.6+);
- one row per size; ``#wrong`` is ``N/A`` when nothing was checked (``-c 0``, and the in-place
  half of alltoall and sendrecv);
- a trailer: ``# Out of bounds values : N OK`` and ``# Avg bus bandwidth : X``.

Lines that are not the tool's (NCCL INFO logging, launcher noise) are skipped, except NCCL's
``NCCL version`` line, the only version older files carry; several runs appended to one log
become one section each.
"""

from __future__ import annotations

import re

from commbench.importers.common import Timing, fail, to_float, to_int
from commbench.importers.nccl_tests.model import (
    HALF_NAMES,
    Half,
    Result,
    Section,
    nccl_version,
    usable,
)

BASE_COLUMNS = ("time", "algbw", "busbw", "#wrong")
PER_ITER_COLUMNS = ("i_min", "i_max", "i_p99", "i_cv%")

_VERSION = re.compile(r"#\s*nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_PROGRAM = re.compile(r"#\s*Collective test starting: (\S+)")
_CONFIG = re.compile(
    r"#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) .*?"
    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+)"
)
_DEVICE = re.compile(
    r"#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s*(.*?)\s*$"
)
_AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_NCCL_LOG_VERSION = re.compile(r"NCCL INFO NCCL version (\d+\.\d+\.\d+)")


def read_text(text: str, source: str) -> tuple[list[Section], dict]:
    sections = [Section(line=1)]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        section = sections[-1]
        if line.startswith("#"):
            if _starts_run(line, section):
                section = Section(line=number)
                sections.append(section)
            _comment(line, number, section, source)
            continue
        found = _NCCL_LOG_VERSION.search(line)
        if found and not section.nccl:
            section.nccl = found.group(1)
        if not line.split(None, 1)[0].isdigit():
            continue  # NCCL INFO logging, launcher messages: not the tool's table
        if section.columns is None:
            raise fail(source, number, "a results row before the column header "
                                       "('#  size  count  type  redop  root ...')")
        section.results.append(_row(line, number, section, source))
    return sections, {"format": "text"}


def _starts_run(line: str, section: Section) -> bool:
    """A preamble line of a run after this section's table, or a second one of its kind: the
    log goes on with another run (several binaries appended to one file)."""
    seen = {_VERSION: bool(section.version), _PROGRAM: bool(section.program),
            _CONFIG: section.config_seen}
    for pattern, already in seen.items():
        if pattern.match(line):
            return already or section.columns is not None or bool(section.results)
    return False


def _comment(line: str, number: int, section: Section, source: str) -> None:
    """Read a ``#`` line into the section."""
    if match := _VERSION.match(line):
        section.version, section.nccl = match.group(1), nccl_version(int(match.group(3)))
    elif match := _PROGRAM.match(line):
        section.program, section.program_line = match.group(1), number
    elif match := _CONFIG.match(line):
        section.config_seen = True
        section.iters, section.agg_iters = int(match.group(6)), int(match.group(7))
        section.validation, section.graph = int(match.group(8)), int(match.group(9))
    elif line.lstrip("# ").startswith("Rank") and line.endswith("..."):
        section.ranks_complete = False  # nccl-tests cuts a long device list short
    elif match := _DEVICE.match(line):
        rank, group, pid, host, device, bus, gpu = match.groups()
        section.ranks.append({"rank": int(rank), "group": int(group or 0), "pid": int(pid),
                              "host": host, "device": int(device), "bus_id": bus, "gpu": gpu})
    elif line.lstrip("#").split()[:5] == ["size", "count", "type", "redop", "root"]:
        section.columns = _columns(line.lstrip("#").split()[5:], number, section, source)
    elif match := _AVG_BUSBW.match(line):
        section.avg_busbw = _maybe_float(match.group(1))
    elif match := _OUT_OF_BOUNDS.match(line):
        section.out_of_bounds = int(match.group(1))


def _columns(names: list[str], number: int, section: Section, source: str) -> tuple:
    """The layout after ``root``: two halves of 4 (or 8 with -I) names, then a timestamp."""
    timestamp = bool(names) and names[-1] == "timestamp"
    if timestamp:
        names = names[:-1]
    halves = []
    for start in (0, len(names) // 2):
        half = names[start: start + len(names) // 2]
        time_name, rest = (half[0], tuple(half[1:])) if half else ("", ())
        if time_name not in ("time", "cputime") or rest not in (
            BASE_COLUMNS[1:], BASE_COLUMNS[1:] + PER_ITER_COLUMNS
        ):
            raise fail(source, number, f"unknown nccl-tests column layout: {' '.join(names)}")
        halves.append(len(half))
    if halves[0] != halves[1]:
        raise fail(source, number, f"unknown nccl-tests column layout: {' '.join(names)}")
    if names[0] == "cputime":
        section.timer = "host-cputime"
    return (halves[0], timestamp)


def _row(line: str, number: int, section: Section, source: str) -> Result:
    width, timestamp = section.columns
    words = line.split()
    expected = 5 + 2 * width + (2 if timestamp else 0)
    if len(words) != expected:
        raise fail(source, number, f"expected {expected} fields (the column header's), found "
                                   f"{len(words)}")
    halves = []
    for index, inplace in ((0, False), (1, True)):
        cells = words[5 + index * width: 5 + (index + 1) * width]
        time_us = to_float(cells[0], source, number, "time")
        if time_us < 0:
            raise fail(source, number, f"time {cells[0]} is below 0")
        for name, cell in zip(("algbw", "busbw"), cells[1:3], strict=True):
            to_float(cell, source, number, name)
        wrong = None if cells[3] == "N/A" else int(to_float(cells[3], source, number, "#wrong"))
        timing = Timing(time_us=time_us)
        if not usable(time_us):
            timing = None
            section.notes.append(f"line {number}: the {HALF_NAMES[inplace]} time is "
                                 f"{cells[0]}: skipped")
        elif width > len(BASE_COLUMNS):
            low, high, p99, cv = (to_float(c, source, number, name)
                                  for c, name in zip(cells[4:8], PER_ITER_COLUMNS, strict=True))
            timing = Timing(time_us=time_us, min_us=low, max_us=high, p99_us=p99,
                            std_us=cv / 100 * time_us, tail="call")
        halves.append(Half(inplace=inplace, timing=timing, wrong=wrong))
    return Result(
        line=number,
        where=f"line {number}",
        size=to_int(words[0], source, number, "size"),
        count=to_int(words[1], source, number, "count"),
        type_name=words[2],
        redop=words[3],
        root=to_int(words[4], source, number, "root"),
        halves=halves,
    )


def _maybe_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
