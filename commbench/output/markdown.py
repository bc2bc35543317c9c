"""Markdown: summary.md of a run, and tables for compare and report."""

from __future__ import annotations

from commbench.core.stats import unstable_advice
from commbench.output.baselines import ASYNC_COLUMNS, async_figures, side_by_side
from commbench.output.baselines import COLUMNS as BASELINE_COLUMNS
from commbench.output.console import footer_lines, table_groups, unstable_notes
from commbench.output.tables import headers_of


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_markdown(frame, title: str, meta: dict, slow: list[str] | None = None) -> str:
    """summary.md: the environment in one line, a table per op, the slow groups a command
    found (``slow``), and warnings."""
    versions = meta.get("versions", {})
    parts = [f"# {title}", ""]
    parts.append(
        f"world size {meta.get('world_size', '?')} on {meta.get('nnodes', '?')} node(s), "
        f"torch {versions.get('torch', '?')}, status **{meta.get('status', '?')}**. "
        "time = median latency (µs) over blocks of per-rank times combined as the "
        "table's rank-time says; busbw per nccl-tests."
    )
    if meta.get("error"):
        parts += ["", f"> error: {meta['error']}"]
    for group_title, headers, rows in table_groups(frame):
        parts += ["", f"## {group_title}", "", markdown_table(headers, rows)]
    for title, rows in side_by_side(frame.to_dict("records")):  # ps beside allreduce ...
        parts += ["", f"## {title}", "", markdown_table(headers_of(BASELINE_COLUMNS), rows)]
    for title, rows in async_figures(frame.to_dict("records")):  # ps --mode async
        parts += ["", f"## {title}", "", markdown_table(headers_of(ASYNC_COLUMNS), rows)]
    parts += ["", "```", *footer_lines(frame.to_dict("records")), "```"]
    if slow:
        parts += ["", "**Slow groups**:", ""] + [f"- {line}" for line in slow]
    notes = unstable_notes(frame)
    if notes:
        advice = unstable_advice(meta.get("config"))
        parts += ["", f"**Warning**: {len(notes)} {advice}.", ""]
        parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"
