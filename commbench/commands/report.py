"""``commbench report``: runs in, report.md and a self-contained report.html out (a locate
run: its suspects table and heatmaps)."""

from __future__ import annotations

import sys
from pathlib import Path

from commbench.compare.runs import compare_runs, incomplete_runs
from commbench.core.errors import EXIT_OK, UsageError
from commbench.results import JSONL, Run, folder_kind, load_run, read_meta
from commbench.results.launches import pooled_run
from commbench.results.locate import is_locate_run


def run_report(paths: list[str], out: str) -> int:
    from commbench.output.comparison import table_records
    from commbench.output.report import write_report

    folder = Path(out)
    runs, located = [], []
    for path in paths:
        candidate = Path(path)
        if is_locate_run(path):  # no rows: its suspects and heatmaps
            located.append(Run(candidate.name, candidate, [], read_meta(candidate)))
            continue
        # `commbench report results/*` also matches the report's own folder, bench folders...
        if candidate.is_dir() and not (candidate / JSONL).exists():
            kind = folder_kind(candidate)
            what = (f"a {kind} {'folder' if kind == 'trace' else 'run'} (report shows sweeps "
                    "and locate runs; replay writes its own summary.md)") if kind else \
                f"not a run folder (no {JSONL})"
            print(f"note: skipping {path}: {what}", file=sys.stderr)
            continue
        runs.append(load_run(path))
    if not runs and not located:
        raise UsageError("no run folders among the arguments")
    for run in runs:
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    import pandas as pd

    comparisons, summaries, frames = [], [], []
    for run in runs[1:]:
        try:
            result = compare_runs([runs[0], run], "lat_us_p50", 0.05, None)
        except UsageError as error:  # runs of different ops or layouts: still reported
            summaries.append(f"{run.name} vs {runs[0].name}: not compared ({error})")
            continue
        frames.append(result.frame)
        columns, rows = table_records(result.frame, "lat_us_p50")
        comparisons.append((run.name, columns, rows))
        counts = result.counts()
        summaries.append(f"{run.name} vs {runs[0].name}: " + ", ".join(
            f"{counts[v]} {v}" for v in ("slower", "faster", "noisy", "same")))
        summaries += result.apart + result.missing
    summaries += incomplete_runs(runs)
    located_rows = _locate_comparison(located, summaries)
    frame = pd.concat(frames, ignore_index=True) if frames else None
    shown = [pooled_run(run) for run in runs]  # --repeat: one row per size, every launch
    try:
        folder.mkdir(parents=True, exist_ok=True)
        md_path, html_path = write_report(shown, comparisons, summaries, folder, frame,
                                          located, located_rows)
    except OSError as error:
        raise UsageError(f"cannot write --out {out}: {error.strerror or error}") from None
    print(f"wrote {md_path} and {html_path}")
    return EXIT_OK


def _locate_comparison(located: list[Run], summaries: list[str]) -> list[dict] | None:
    """Two locate runs: compared per entity and link, as ``compare`` shows them (before =
    the first). Other counts have no before / after; runs at different levels cannot pair
    their entities (said in the summary)."""
    if len(located) != 2:
        return None
    from commbench.compare.locate import compare, load

    before, after = (load(run.path) for run in located)
    if before["level"] != after["level"]:
        summaries.append(f"{located[1].name} vs {located[0].name}: not compared ({located[0].name}"
                         f" is at {before['level']} level, {located[1].name} at "
                         f"{after['level']})")
        return None
    return compare(before, after)
