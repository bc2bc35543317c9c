"""``commbench compare`` between parsing and exit code: table, Markdown, JSON, plots, verdict."""

from __future__ import annotations

import json
import sys

from commbench.compare import compare_runs, table_records, verdict_counts
from commbench.errors import EXIT_FINDING, EXIT_OK, UsageError


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05; a bare number of 1 or more is read as a percentage."""
    raw = text.strip().rstrip("%")
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"bad --threshold {text!r}: use e.g. 5% or 0.05") from None
    if text.strip().endswith("%") or value >= 1:
        value /= 100
    if value < 0:
        raise UsageError(f"bad --threshold {text!r}: it must not be negative")
    return value


def run_compare(paths, threshold_text, metric, sizes, fail_on_regression, markdown, json_rows,
                out) -> int:
    from commbench import render

    threshold = parse_threshold(threshold_text)
    frame, warnings, runs = compare_runs(paths, metric, threshold, sizes)
    for warning in warnings:
        print(f"warning: {warning}; the comparison may be suspect", file=sys.stderr)
    headers, rows = table_records(frame, metric)
    counts = verdict_counts(frame)
    summary = (f"{counts['slower']} slower, {counts['faster']} faster, {counts['same']} same "
               f"(threshold {threshold:.0%}, metric {metric})")
    if json_rows:
        for record in frame.to_dict("records"):
            print(json.dumps({k: (v.item() if hasattr(v, "item") else v)
                              for k, v in record.items()}))
    else:
        from rich.table import Table

        console = render.console()
        table = Table(title="comparison", title_justify="left", header_style="bold")
        for index, header in enumerate(headers):
            table.add_column(header, justify="left" if index in (0, 1, 6, 7, 8) else "right")
        styles = {"slower": "red", "faster": "green"}
        for row in rows:
            table.add_row(*row, style=styles.get(row[6], ""))
        console.print(table)
        console.print(summary)
    if markdown:
        text = "## commbench compare\n\n" + render.markdown_table(headers, rows)
        text += f"\n\n{summary}\n"
        try:
            with open(markdown, "a") as handle:
                handle.write(text + "\n")
        except OSError as error:
            raise UsageError(f"cannot write --markdown {markdown}: {error.strerror}") from None
    if out:
        from pathlib import Path

        from commbench.report import overlay_plots

        Path(out).mkdir(parents=True, exist_ok=True)
        overlay_plots(runs, Path(out))
    if fail_on_regression and counts["slower"]:
        return EXIT_FINDING
    return EXIT_OK
