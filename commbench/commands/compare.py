"""``commbench compare``: runs in, table / Markdown / JSON / plots and a verdict out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from commbench.analysis.compare import compare_runs, parse_threshold, verdict_counts
from commbench.errors import EXIT_FINDING, EXIT_OK, UsageError
from commbench.results import load_run


def run_compare(paths: list[str], threshold_text: str, metric: str, sizes: str | None,
                fail_on_regression: bool, markdown: str | None, json_rows: bool,
                out: str | None) -> int:
    from commbench.output import console as tables
    from commbench.output.markdown import markdown_table

    threshold = parse_threshold(threshold_text)
    runs = [load_run(path) for path in paths]
    for run in runs:
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    frame, warnings = compare_runs(runs, metric, threshold, sizes)
    for warning in warnings:
        print(f"warning: {warning}; the comparison may be suspect", file=sys.stderr)
    headers, rows = tables.table_records(frame, metric)
    counts = verdict_counts(frame)
    summary = (f"{counts['slower']} slower, {counts['faster']} faster, {counts['same']} same "
               f"(threshold {threshold:.0%}, metric {metric})")
    if json_rows:
        for record in frame.to_dict("records"):
            print(json.dumps({k: (v.item() if hasattr(v, "item") else v)
                              for k, v in record.items()}))
    else:
        from rich.table import Table

        console = tables.make_console()
        table = Table(title="comparison", title_justify="left", header_style="bold")
        for index, header in enumerate(headers):
            table.add_column(header, justify="left" if index in (0, 1, 6, 7, 8) else "right")
        styles = {"slower": "red", "faster": "green"}
        for row in rows:
            table.add_row(*row, style=styles.get(row[6], ""))
        console.print(table)
        console.print(summary)
    if markdown:
        text = "## commbench compare\n\n" + markdown_table(headers, rows)
        text += f"\n\n{summary}\n"
        try:
            with open(markdown, "a") as handle:
                handle.write(text + "\n")
        except OSError as error:
            raise UsageError(f"cannot write --markdown {markdown}: {error.strerror}") from None
    if out:
        from commbench.output.report import overlay_plots

        Path(out).mkdir(parents=True, exist_ok=True)
        overlay_plots(runs, Path(out))
    if fail_on_regression and counts["slower"]:
        return EXIT_FINDING
    return EXIT_OK
