"""``commbench report``: runs in, report.md and a self-contained report.html out."""

from __future__ import annotations

import sys
from pathlib import Path

from commbench.analysis.compare import compare_runs
from commbench.errors import EXIT_OK, UsageError
from commbench.results import JSONL, load_run


def run_report(paths: list[str], out: str) -> int:
    from commbench.output.console import table_records
    from commbench.output.report import write_report

    folder = Path(out)
    runs = []
    for path in paths:
        candidate = Path(path)
        # `commbench report results/*` also matches the report's own folder, bench folders...
        if candidate.is_dir() and not (candidate / JSONL).exists():
            print(f"note: skipping {path}: not a run folder (no {JSONL})", file=sys.stderr)
            continue
        runs.append(load_run(path))
    if not runs:
        raise UsageError("no run folders among the arguments")
    for run in runs:
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    comparisons, summaries, frame = [], [], None
    if len(runs) > 1:
        result = compare_runs(runs, "lat_us_p50", 0.05, None)
        frame = result.frame
        for name in list(dict.fromkeys(frame["candidate"])):
            part = frame[frame["candidate"] == name]
            columns, rows = table_records(part, "lat_us_p50")
            comparisons.append((name, columns, rows))
            counts = part["verdict"].value_counts().to_dict()
            summaries.append(f"{name} vs {runs[0].name}: " + ", ".join(
                f"{counts.get(v, 0)} {v}" for v in ("slower", "faster", "noisy", "same")))
        summaries += result.incomplete + result.apart + result.missing
    try:
        folder.mkdir(parents=True, exist_ok=True)
        md_path, html_path = write_report(runs, comparisons, summaries, folder, frame)
    except OSError as error:
        raise UsageError(f"cannot write --out {out}: {error.strerror or error}") from None
    print(f"wrote {md_path} and {html_path}")
    return EXIT_OK
