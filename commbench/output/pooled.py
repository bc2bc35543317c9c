"""The table a ``--repeat K`` run ends with: one row per size pooled over the K launches, the
table compare (and so the CI gate) judges, after the K per-launch tables printed live.

Why a table of its own: the live tables show each launch as it runs, and a reader of a CI log
would otherwise have to pool K tables by eye to see what the gate compared.
"""

from __future__ import annotations

import sys

from commbench.results.schema import is_combined


def pooled_table_lines(rows: list[dict], launches: int, width: int | None) -> list[str]:
    """The pooled rows (results.launches.pooled_rows) as the live table lays them out, a
    title line per table, then nccl-tests' closing lines over the pooled rows."""
    from commbench.output import console as tables
    from commbench.output.tables import Layout

    lines = ["", f"# pooled over {launches} launches (median over every launch's samples; "
             "the rows compare judges)"]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (tables.group_key(row), row["backend"], bool(row.get("inplace")))
        groups.setdefault(key, []).append(row)
    backends = list(dict.fromkeys(row["backend"] for row in rows))
    several = len(backends) > 1
    first = {tables.reference_key(r): r["lat_us_p50"] for r in rows
             if r["backend"] == backends[0]}
    for part in groups.values():
        record = part[0]
        per_group = not all(is_combined(r) for r in part)
        per_call, routed = tables.has_calls(record), tables.is_routed(record)
        contended = tables.contention(record)  # --overlap, --background: pooled columns too
        columns = tables.sweep_columns(per_group, several, backends[0], per_call, routed,
                                       contended)
        cells = [tables.sweep_row(r, per_group, several, first.get(tables.reference_key(r)),
                                  per_call, routed, contended) for r in part]
        layout = Layout(columns, cells, width)
        backend = f" {record['backend']}" if not several else ""
        lines.append(f"# {tables.group_title(record)}{backend} [{tables.timing_note(record)}]")
        lines += layout.header()
        for row_cells in cells:
            lines += layout.row(row_cells)
    return [*lines, "", *tables.footer_lines(rows)]


def print_pooled_table(rows: list[dict], launches: int) -> None:
    """Print it on stdout; a reader that left (``| head``) is no failure."""
    from commbench.output.console import terminal_width, to_devnull

    try:
        for line in pooled_table_lines(rows, launches, terminal_width()):
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        to_devnull(sys.stdout)
