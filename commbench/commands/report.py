"""``commbench report``: runs in, report.md and a self-contained report.html out."""

from __future__ import annotations

from pathlib import Path

from commbench.analysis.compare import compare_rows
from commbench.errors import EXIT_OK
from commbench.results import load_run


def run_report(paths: list[str], out: str) -> int:
    from commbench.output.console import table_records
    from commbench.output.report import write_report

    runs = [load_run(path) for path in paths]
    comparisons = []
    for run in runs[1:]:
        frame = compare_rows(runs[0].rows, run.rows).assign(candidate=run.name)
        comparisons.append((run.name, table_records(frame, "lat_us_p50")))
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    md_path, html_path = write_report(runs, comparisons, folder)
    print(f"wrote {md_path} and {html_path}")
    return EXIT_OK
