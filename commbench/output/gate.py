"""A comparison as the gate shows it, for ``compare`` and ``ab`` alike: the table (console or
``--json`` rows), the summary line with the gate's rule and level, and the ``--markdown`` table.

One renderer, so that ``ab`` prints compare's table, verdicts and Markdown without a second
copy to drift. The cells come from comparison.table_records; this module adds the ratio's
interval and the family-wise verdict beside the per-row one.
"""

from __future__ import annotations

import json

from commbench.core.errors import UsageError
from commbench.output.tables import Column

STYLES = {"slower": "red", "faster": "green", "noisy": "yellow"}


def gate_table(frame, metric: str, alpha: float) -> tuple[list[Column], list[list[str]]]:
    """compare's columns and cells, with the ratio's 95 % interval after the ratio (the
    verdict's evidence) and the family-wise verdict after the verdict."""
    from commbench.output import comparison

    columns, rows = comparison.table_records(frame, metric)
    at = [c.name for c in columns].index("ratio") + 1
    cells = [f"{lo:.2f}-{hi:.2f}" if lo == lo and hi == hi else "-"
             for lo, hi in zip(frame["ratio_lo"], frame["ratio_hi"], strict=True)]
    columns = [*columns[:at], Column("ratio CI", "95%", drop=2), *columns[at:]]
    rows = [[*row[:at], cell, *row[at:]] for row, cell in zip(rows, cells, strict=True)]
    if "familywise" in frame:
        at = [c.name for c in columns].index("verdict") + 1
        columns = [*columns[:at], Column("family", f"Holm {alpha * 100:g}%", width=6,
                                         left=True), *columns[at:]]
        rows = [[*row[:at], str(cell), *row[at:]]
                for row, cell in zip(rows, frame["familywise"], strict=True)]
    return columns, rows


def print_table(columns, rows, lines: list[str], header: str | None = None) -> None:
    """The console table, each row coloured by its verdict, then the summary ``lines``."""
    from commbench.output import console as tables
    from commbench.output.tables import Layout

    console = tables.make_console()
    if header:
        console.print(header, markup=False)
    layout = Layout(columns, rows, tables.terminal_width())
    for line in layout.header():
        console.print(line, style="bold", markup=False, highlight=False, soft_wrap=True)
    verdict = [c.name for c in columns].index("verdict")
    for cells in rows:
        for line in layout.row(cells):
            console.print(line, style=STYLES.get(cells[verdict]), markup=False,
                          highlight=False, soft_wrap=True)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


def print_json(frame, summary: dict) -> None:
    """One JSON object per row, then one with the summary."""
    for record in frame.to_dict("records"):
        print(json.dumps({k: plain(v) for k, v in record.items()}))
    print(json.dumps({"summary": {k: plain(v) for k, v in summary.items()}}))


def write_json(path, frame, summary: dict) -> None:
    """compare.json: every row (with the noise its interval rests on) and the summary."""
    rows = [{k: plain(v) for k, v in record.items()} for record in frame.to_dict("records")]
    path.write_text(json.dumps({"summary": {k: plain(v) for k, v in summary.items()},
                                "rows": rows}, indent=1) + "\n")


def append_markdown(path: str, title: str, columns, rows, lines: list[str],
                    notes: list[str]) -> None:
    """Append the table (for ``$GITHUB_STEP_SUMMARY``)."""
    from commbench.output.markdown import markdown_table
    from commbench.output.tables import headers_of

    text = f"## {title}\n\n" + markdown_table(headers_of(columns), rows)
    text += "\n\n" + "  \n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    try:
        with open(path, "a") as handle:
            handle.write(text + "\n")
    except OSError as error:
        raise UsageError(f"cannot write --markdown {path}: {error.strerror}") from None


def plain(value):
    """JSON-friendly: numpy scalars as Python values, NaN as null."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value
