"""The rendered files of a run folder: summary.md and the plots, drawn from its rows."""

from __future__ import annotations

from commbench.output import plots
from commbench.output.markdown import summary_markdown
from commbench.results import BANDWIDTH_PNG, LATENCY_PNG, SUMMARY, Run, rows_frame


def write_run_files(run: Run, slow: list[str] | None = None) -> None:
    """summary.md always (naming ``slow`` groups); the plots when there are rows to draw."""
    summary = run.path / SUMMARY
    if not run.rows:
        status = run.meta.get("status", "?")
        summary.write_text(f"# {run.path.name}\n\nNo rows were measured ({status}).\n")
        return
    frame = rows_frame(run.rows)
    summary.write_text(summary_markdown(frame, run.name, run.meta, slow))
    title = plot_title(run)
    if plots.has_sizes(frame):
        plots.bandwidth(frame, run.path / BANDWIDTH_PNG, title)
    else:  # a barrier moves no data: no empty bandwidth axes (and no stale plot)
        (run.path / BANDWIDTH_PNG).unlink(missing_ok=True)
    plots.latency(frame, run.path / LATENCY_PNG, title)


def plot_title(run: Run) -> str:
    """The run's name, and its status when it did not complete: a partial run's plots say so
    wherever the PNG ends up."""
    status = run.meta.get("status", "complete")
    return run.name if status == "complete" else f"{run.name} ({status})"
