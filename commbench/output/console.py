"""Tables for people: the sweep table in the nccl-tests spirit (printed live, row by row, or as
Markdown in summary.md and the report), from the same cells, so what a terminal shows is what a
PR gets; and the console itself (width, rich console, one-line notes). The compare table is
output.comparison.
"""

from __future__ import annotations

import shutil
import sys

from commbench.core.percall import SPIKE_RATIO
from commbench.core.sizes import format_size
from commbench.core.streams import to_devnull
from commbench.output.tables import Column, headers_of
from commbench.results.schema import CUT_SHORT, is_combined, op_label

# The sweep table. ``drop``: the order in which columns go when the terminal is narrow
# (count and type first: the title line names the dtype).
SWEEP = [
    Column("size", "B", width=7),
    Column("count", "elements", width=10, drop=6),
    Column("type", width=8, drop=7, left=True),
    Column("time", "us", width=9),
    Column("algbw", "GB/s", width=7, drop=3),
    Column("busbw", "GB/s", width=7),
    Column("#wrong", width=6),
    Column("p99", "us", width=9, drop=2),
    Column("skew", "%", width=5, drop=4),
]
GROUP = Column("group", width=5, drop=1)
BACKEND = Column("backend", width=7, drop=1, left=True)
NOTE = Column("note", width=8, drop=5, left=True)  # 'unstable': kept at 80 columns
# --per-call: over every single call (core.percall)
PER_CALL = [
    Column("p95", "us", width=9, drop=5),
    Column("cv", "%", width=5, drop=5),
    Column("spikes", width=6, drop=5),
]
# alltoallv (rows naming a split matrix), after busbw, which they explain: the busiest rank's
# bytes over the mean a rank sends (busbw = algbw x imbalance x (n-1)/n), and those bytes.
# Imbalance stays as long as p99 does; the bytes go as early as count.
ROUTED = [
    Column("imbalance", width=9, drop=2),
    Column("max rank", "B", width=8, drop=6),
]
_AFTER_BUSBW = [c.name for c in SWEEP].index("busbw") + 1
# --overlap (measure.overlap_stats): the time is the collective beside the compute; its time
# alone, the two slowdowns (beside / alone, x) with their 95 % intervals, overlap_efficiency.
OVERLAP = [
    Column("alone", "us", width=9, drop=6),
    Column("comm", "x", width=5),
    Column("comm 95%", "x", width=9, drop=4),
    Column("compute", "x", width=7),
    Column("compute 95%", "x", width=11, drop=4),
    Column("overlap", "eff", width=7, drop=3),
]
# --background: the busbw the load's allreduce achieved while the row was measured
LOAD = [Column("load", "GB/s", width=7, drop=3)]


def ratio_column(first_backend: str) -> Column:
    return Column(f"vs {first_backend}", "time", width=7, drop=3)


def terminal_width() -> int | None:
    """The terminal's width, or None (no limit) when stdout is a file or a pipe."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def reader_left(folder: str) -> None:
    """stdout closed: the one line that says so, then stdout writes go nowhere."""
    to_devnull(sys.stdout)
    say(f"note: stdout closed (its reader left): measuring on, every row goes to {folder}")


def say(text: str, indent: str = "") -> None:
    """A line of prose on stderr, wrapped to the terminal when stderr is one (a log keeps it
    whole); continuation lines are indented. A closed stderr (``2>&1 | head``) is left."""
    import textwrap

    if sys.stderr.isatty():
        width = shutil.get_terminal_size().columns
        text = textwrap.fill(text, width=width, initial_indent=indent,
                             subsequent_indent=indent + "  ", break_on_hyphens=False,
                             break_long_words=True)
    else:
        text = indent + text
    try:
        print(text, file=sys.stderr, flush=True)
    except BrokenPipeError:
        to_devnull(sys.stderr)


def make_console():
    """A rich Console; a log or a pipe gets lines as long as they are (nothing is cut).

    A closed stdout raises BrokenPipeError for the caller to handle (rich's own answer is
    SystemExit(1), which in a rank is a crash and at the end the regression exit code)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write to it
            raise BrokenPipeError

    return _Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def size_text(size_bytes) -> str:
    return format_size(int(size_bytes)) if size_bytes else "-"


def _number(value, digits: int) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def checked(record: dict) -> bool:
    """Whether the row's results were verified (not --no-check / -c 0, a barrier, or an import
    whose tool checked nothing): validation 'off: <why>' says not."""
    validation = record.get("validation")
    return not (isinstance(validation, str) and validation.startswith("off"))


def sweep_cells(record: dict) -> list[str]:
    """A row's cells in SWEEP order; an op without data (barrier) shows '-' for its type and
    bandwidths, and #wrong is N/A where nothing was checked (as in nccl-tests)."""
    data = bool(record["size_bytes"])
    return [
        size_text(record["size_bytes"]),
        str(int(record["count"])) if data else "-",
        str(record["dtype"]) if data else "-",
        _number(record["lat_us_p50"], 1),
        _number(record["algbw_gbps"], 3) if data else "-",
        _number(record["busbw_gbps"], 3) if data else "-",
        str(int(record["wrong"])) if checked(record) else "N/A",
        _number(record["lat_us_p99"], 1),
        _number(record["skew_pct"], 1),
    ]


def group_key(record: dict) -> tuple:
    """Rows sharing a table: one op and variant on one layout (the whole world or a dim)."""
    return (record["op"], record.get("pattern") or "", record.get("mesh") or "",
            record.get("dim") or "")


def group_title(record: dict) -> str:
    """'allreduce', 'p2p (ring)', 'allreduce, dim tp: 2 groups of 4, intra-node'."""
    title = record["op"] + (f" ({record['pattern']})" if record.get("pattern") else "")
    if record.get("dim"):
        groups = int(record.get("groups") or 1)
        span = f", {record['span']}" if record.get("span") else ""
        title += (f", dim {record['dim']} of {record['mesh']}: {groups} group"
                  f"{'s' if groups != 1 else ''} of {int(record['group_size'])}{span}")
    return title


def timing_note(record: dict) -> str:
    """What was measured and how, said once per table: the dtype, reduce op and root where
    the op has them (-o max, -r 1), and what time and p99 mean (they differ)."""
    tail = "single calls" if record.get("tail") == "call" else "blocks"
    what = [str(record["dtype"])] if record.get("size_bytes") and record.get("dtype") else []
    if given(record.get("reduce_op")):
        what.append(f"op {record['reduce_op']}")
    if given(record.get("root")):
        what.append(f"root {int(record['root'])}")
    source = record.get("source") or "commbench"
    if source != "commbench" and int(record.get("samples") or 1) <= 1:
        # An import: the tool printed one average per size, and maybe a tail.
        tool = IMPORTED_TOOLS.get(source, source)
        p99 = ("p99 as printed" if given(record.get("lat_us_p99")) else
               f"no p99 ({tool} printed none)")
        whose = f"{tool}'" if tool.endswith("s") else f"{tool}'s"
        return ", ".join([*what, f"time = {whose} average over its iterations, rank-time "
                          f"{record.get('rank_time')}, {p99}"])
    spikes = (f", spikes = calls over {SPIKE_RATIO:g}x the median" if has_calls(record)
              else "")
    beside = [f"beside {record[name]}" + (" traffic" if name == "background" else "")
              for name in ("overlap", "background") if given(record.get(name))]
    return ", ".join([*what, *beside, f"time = median, rank-time {record.get('rank_time')}, "
                      f"p99 over {tail}{spikes}"])


IMPORTED_TOOLS = {"osu": "OSU", "nccl-tests": "nccl-tests"}


def given(value) -> bool:
    """A field the op has: not None, '', or NaN (pandas' missing value)."""
    return value is not None and value == value and value != ""


def sweep_columns(per_group: bool, several: bool, first_backend: str,
                  per_call: bool = False, routed: bool = False,
                  contended: tuple[bool, bool] = (False, False)) -> list[Column]:
    """The sweep table's columns: a group column for --per-group tables, a backend column and
    each row's time over the first backend's when backends share a table, p95, CV and spikes
    after p99 for --per-call tables, imbalance and the busiest rank's bytes after busbw for
    alltoallv's (``routed``: ``is_routed`` of the table's rows)."""
    columns = list(SWEEP)
    if per_call:
        at = columns.index(SWEEP[-2]) + 1  # after p99
        columns[at:at] = PER_CALL
    if routed:
        columns[_AFTER_BUSBW:_AFTER_BUSBW] = ROUTED
    if per_group:
        columns.insert(1, GROUP)
    if several:
        columns.insert(3, BACKEND)
        columns.append(ratio_column(first_backend))
    overlap, load = contended  # --overlap, --background (``contention`` of a row)
    return [*columns, *(OVERLAP if overlap else []), *(LOAD if load else []), NOTE]


def sweep_row(record: dict, per_group: bool, several: bool, reference: float | None,
              per_call: bool = False, routed: bool = False,
              contended: tuple[bool, bool] = (False, False)) -> list[str]:
    """A row's cells in ``sweep_columns`` order; ``reference``: the first backend's time at
    the same size and group (for the ratio column)."""
    cells = sweep_cells(record)
    if per_call:
        at = len(SWEEP) - 1  # after p99
        cells[at:at] = per_call_cells(record)
    if routed:
        cells[_AFTER_BUSBW:_AFTER_BUSBW] = routed_cells(record)
    if per_group:
        cells.insert(1, group_text(record))
    if several:
        cells.insert(3, str(record["backend"]))
        cells.append(f"{record['lat_us_p50'] / reference:.2f}x" if reference else "-")
    cells += contention_cells(record, contended)
    rate = record.get("msg_rate") or 0  # p2p mbw_mr: messages/s over every pair, as OSU's
    notes = [f"{rate:,.0f} msg/s" if rate > 0 else "", "unstable" if record.get("unstable")
             else "", "cut short" if record.get("validation") == CUT_SHORT else ""]
    return [*cells, " ".join(note for note in notes if note)]


def contention(record: dict) -> tuple[bool, bool]:
    """Whether a row was measured beside compute (--overlap) and beside a load
    (--background): its table shows their columns."""
    return given(record.get("overlap")), given(record.get("background"))


def contention_cells(record: dict, contended: tuple[bool, bool]) -> list[str]:
    overlap, load = contended
    cells = []
    if overlap:
        def ratio(name: str) -> list[str]:
            low, high = record.get(f"{name}_lo"), record.get(f"{name}_hi")
            return [_number(record.get(name), 2), f"{_number(low, 2)}-{_number(high, 2)}"]

        cells += [_number(record.get("lat_us_p50_alone"), 1), *ratio("comm_slowdown"),
                  *ratio("compute_slowdown"), _number(record.get("overlap_efficiency"), 2)]
    if load:
        cells.append(_number(record.get("background_busbw"), 3))
    return cells


def is_routed(record: dict) -> bool:
    """Whether a row names a split matrix (alltoallv: ``split_id``, "unknown" in an import that
    could not know it): its table shows the imbalance columns."""
    return given(record.get("split_id"))


def routed_cells(record: dict) -> list[str]:
    """imbalance and the busiest rank's bytes; '-' where unknown (0: an import whose tool
    printed only the busiest rank's bytes)."""
    imbalance = record.get("imbalance") or 0.0
    busiest = record.get("max_rank_bytes") or 0
    # The busiest rank's bytes are seldom a round size: whole bytes, not '1264.625K'.
    return [_number(imbalance, 2) if imbalance > 0 else "-",
            str(int(busiest)) if busiest and busiest == busiest else "-"]


def has_calls(record: dict) -> bool:
    """Whether a row was measured with --per-call (or imported with per-iteration times)."""
    calls = record.get("calls")
    return bool(calls) and calls == calls


def per_call_cells(record: dict) -> list[str]:
    if not has_calls(record):
        return ["-", "-", "-"]
    return [_number(record.get("lat_us_p95"), 1), _number(record.get("cv_pct"), 1),
            str(int(record.get("spikes") or 0))]


def straggler_lines(records: list[dict]) -> list[str]:
    """--per-call: per table (op, dim, backend), over its sizes, how many calls each rank was
    the one the others waited for (core.percall), the most first."""
    from commbench.core.percall import STRAGGLER_SHARE, parse_stragglers

    tables: dict[tuple, tuple[dict[int, int], list[int]]] = {}
    for record in records:
        if not has_calls(record) or not is_combined(record):
            continue
        dim = f" dim {record['dim']}" if record.get("dim") else ""
        key = (op_label(record["op"], record.get("pattern")) + dim, record["backend"])
        counts, calls = tables.setdefault(key, ({}, []))
        calls.append(int(record["calls"]))
        for rank, count in parse_stragglers(record.get("stragglers") or ""):
            counts[rank] = counts.get(rank, 0) + count
    lines = []
    for (title, backend), (counts, calls) in tables.items():
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if ranked:
            named = ", ".join(f"rank {rank} in {count}" for rank, count in ranked)
            text = f"last to arrive (the others waited) {named} of {sum(calls)} calls"
        else:
            text = f"none: every rank on time in all {sum(calls)} calls"
        lines.append(f"# Stragglers           : {text}  ({title} {backend}; late by "
                     f">= {STRAGGLER_SHARE:g} median call)")
    return lines


def reference_key(record: dict) -> tuple:
    """What a row's time is compared with across backends: same table, size and group."""
    return (group_key(record), record["size_bytes"], group_text(record))


def table_groups(frame) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per table, for Markdown: every column, none dropped.

    Several backends share a table, with each row's time over the first backend's."""
    records = frame.to_dict("records")
    backends = list(dict.fromkeys(r["backend"] for r in records))
    several = len(backends) > 1
    tables: dict[tuple, list[dict]] = {}
    for record in records:
        tables.setdefault(group_key(record), []).append(record)
    # An imported nccl-tests run has in-place and out-of-place rows of one op: two tables.
    for key in list(tables):
        if len({bool(r.get("inplace")) for r in tables[key]}) > 1:
            part = tables.pop(key)
            for inplace in (False, True):
                tables[(*key, inplace)] = [r for r in part if bool(r.get("inplace")) == inplace]
    first = {reference_key(r): r["lat_us_p50"] for r in records if r["backend"] == backends[0]}
    groups = []
    for key, part in tables.items():
        per_group = not all(is_combined(r) for r in part)
        per_call = any(has_calls(r) for r in part)
        routed = any(is_routed(r) for r in part)
        contended = contention(part[0])
        columns = sweep_columns(per_group, several, backends[0], per_call, routed, contended)
        rows = [sweep_row(r, per_group, several, first.get(reference_key(r)), per_call, routed,
                          contended)
                for r in sorted(part, key=lambda r: (r["size_bytes"], _group_order(r)))]
        title = group_title(part[0])
        if len(key) > 4:  # split by in-place
            title += " (in place)" if part[0].get("inplace") else " (out of place)"
        groups.append((f"{title} [{timing_note(part[0])}]", headers_of(columns), rows))
    return groups


def footer_lines(records: list[dict]) -> list[str]:
    """nccl-tests' closing lines, which scripts grep: the wrong elements of every checked row
    ('0 OK' or 'N FAILED'; N/A when nothing was checked) and the mean busbw over the sizes
    of a table (nccl-tests averages every row it printed; per-group rows are not counted
    twice). A line per table when a run has several."""
    verified = [r for r in records if checked(r)]
    wrong = sum(int(r.get("wrong") or 0) for r in verified)
    bounds = f"{wrong} {'FAILED' if wrong else 'OK'}" if verified else "N/A (nothing checked)"
    lines = [f"# Out of bounds values : {bounds}"]
    tables: dict[tuple, list[float]] = {}
    for record in records:
        if record["size_bytes"] and is_combined(record):
            dim = f" dim {record['dim']}" if record.get("dim") else ""
            key = (op_label(record["op"], record.get("pattern")) + dim, record["backend"])
            tables.setdefault(key, []).append(float(record["busbw_gbps"]))
    for (title, backend), values in tables.items():
        which = f"  ({title} {backend})" if len(tables) > 1 else ""
        lines.append(f"# Avg bus bandwidth    : {sum(values) / len(values):.3f} GB/s{which}")
    if not tables:
        lines.append("# Avg bus bandwidth    : N/A (no data moved)")
    cut = sum(r.get("validation") == CUT_SHORT for r in records)
    if cut:  # kept from a stopped run (Ctrl-C, a failed rank): docs/reference/exit-codes.md
        lines.append(f"# Cut short            : {cut} row(s) from the blocks timed before the "
                     "run stopped, never verified (#wrong N/A), p99 over blocks")
    return lines + straggler_lines(records)


def _group_order(record: dict) -> int:
    return -1 if is_combined(record) else int(record["group"])


def group_text(record: dict) -> str:
    return "all" if is_combined(record) else str(int(record["group"]))


def unstable_notes(frame) -> list[str]:
    if "unstable" not in frame:
        return []
    flagged = frame[frame["unstable"].fillna("").astype(bool)]
    return [f"{group_title(row)} {row['backend']}"
            f"{'' if is_combined(row) else ' group ' + group_text(row)} "
            f"{size_text(row['size_bytes'])}: {row['unstable']}"
            for row in flagged.to_dict("records")]


def dry_run_lines(plan, spec, world: int, launcher: str, itemsize: int) -> list[str]:
    """--dry-run: per op (variant, mesh dim), the sizes asked for, the bytes and elements the
    ranks will use, and why they differ; then how many rows, ranks and backends."""
    from commbench.output.tables import render

    columns = [Column("op", left=True), Column("group", left=True), Column("asked", "B"),
               Column("size", "B"), Column("count", "elements"), Column("", left=True)]
    rows, planned = [], 0
    for op, variant, dim, group, used in plan:
        name = op_label(op.name, variant)
        where = f"{dim}={group}" if dim else f"world={group}"
        seen: dict[int, int] = {}
        for asked, count in used:
            if not op.sized:
                rows.append([name, where, "-", "-", "-", "no data"])
                planned += 1
                continue
            size = count * itemsize
            if count in seen:
                why = f"same as {format_size(seen[count])}: measured once"
            elif size == asked:
                why = ""
            elif size > asked:
                why = (f"raised to one {spec.dtype} element per rank ({group} ranks)"
                       if op.splits else f"raised to one {spec.dtype} element")
            elif op.splits:
                why = f"rounded down to a multiple of {group} {spec.dtype} elements"
            else:
                why = f"rounded down to whole {spec.dtype} elements"
            if count not in seen:
                seen[count] = asked
                planned += 1
            rows.append([name, where, format_size(asked), format_size(size), str(count), why])
    lines = render(columns, rows, terminal_width())
    backends = "+".join(spec.backends)
    lines.append(f"{planned} size(s) to measure per backend, {world} {backends} rank(s) "
                 f"({launcher}), {spec.dtype}; --dry-run: nothing was launched or written")
    return lines
