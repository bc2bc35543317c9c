"""Turn a run folder's JSONL into the CSV, summary and plots, and record how the run ended."""

from __future__ import annotations

from pathlib import Path

from commbench.results import metadata
from commbench.results.rundir import BANDWIDTH_PNG, CSV, LATENCY_PNG, SUMMARY, RunDir
from commbench.results.schema import COLUMNS, EXTRA_COLUMNS


def load_frame(rows: list[dict]):
    """Rows as a DataFrame with the CSV columns in SPEC order (raw samples dropped)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for column in COLUMNS + EXTRA_COLUMNS:
        if column not in frame:
            frame[column] = None
    return frame[list(COLUMNS + EXTRA_COLUMNS)]


def finish(path: str | Path, status: str, error: str = "") -> list[dict]:
    """Write the derived files and the final status; returns the rows."""
    from commbench import plots, render

    run = RunDir(path)
    rows = run.read_rows()
    meta = run.update_meta(status=status, error=error or None, end_time=metadata.now())
    if rows:
        frame = load_frame(rows)
        frame.to_csv(run.file(CSV), index=False)
        title = meta.get("name") or run.path.name
        run.file(SUMMARY).write_text(render.summary_markdown(frame, title, meta))
        series = plots.series_labels(frame)
        plots.bandwidth(frame.assign(series=series), run.file(BANDWIDTH_PNG), title)
        plots.latency(frame.assign(series=series), run.file(LATENCY_PNG), title)
    else:
        run.file(SUMMARY).write_text(f"# {run.path.name}\n\nNo rows were measured ({status}).\n")
    return rows
