"""Trend plots of the history: one series across runs, its change points marked.

Data in, a PNG out: the caller (commands/history.py) passes plain lists, so this module knows
nothing of the store. Runs are evenly spaced in start order (nightly runs are, more or less;
a gap of a week would otherwise squeeze the runs around it); partial runs are drawn hollow and
grey, since they are shown but never judged; each change point is a vertical line before the
first run after it, red for a regression and green for an improvement, labelled with its ratio,
with the means of both sides drawn as flat lines over their runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CHANGE_COLOURS = {"regression": "tab:red", "improvement": "tab:green"}
MAX_TICKS = 16


@dataclass(frozen=True)
class TrendChange:
    """A change before position ``position`` of the plotted runs."""

    position: int
    verdict: str
    ratio: float
    before: float
    after: float
    start: int  # first position of the segment before
    end: int  # one past the last position of the segment after


def trend(path: Path, title: str, run_labels: Sequence[str], values: Sequence[float],
          complete: Sequence[bool], changes: Sequence[TrendChange], ylabel: str,
          interval: Sequence[tuple[float | None, float | None]] | None = None):
    """Write the trend PNG; returns the closed figure (tests look at its texts)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, as plots.py
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.6))
    positions = list(range(len(values)))
    done = [i for i in positions if complete[i]]
    cut = [i for i in positions if not complete[i]]
    axis.plot(done, [values[i] for i in done], "-o", color="tab:blue", markersize=4,
              linewidth=1.2, label="complete run")
    if interval:
        for i in done:
            lo, hi = interval[i]
            if lo is not None and hi is not None:
                axis.vlines(i, lo, hi, color="tab:blue", alpha=0.35, linewidth=2)
    if cut:
        axis.plot(cut, [values[i] for i in cut], "o", markerfacecolor="none", color="gray",
                  markersize=6, label="partial run (not judged)")
    for change in changes:
        colour = CHANGE_COLOURS.get(change.verdict, "tab:orange")
        axis.axvline(change.position - 0.5, color=colour, linestyle="--", linewidth=1.2)
        axis.hlines(change.before, change.start - 0.3, change.position - 0.5, color=colour,
                    alpha=0.6)
        axis.hlines(change.after, change.position - 0.5, change.end - 0.7, color=colour,
                    alpha=0.6)
        axis.annotate(f"{change.verdict} {change.ratio:.2f}x", (change.position - 0.5, 1.0),
                      xycoords=("data", "axes fraction"), xytext=(3, -12),
                      textcoords="offset points", color=colour, fontsize=8)
    step = max(1, -(-len(positions) // MAX_TICKS))
    axis.set_xticks(positions[::step])
    axis.set_xticklabels(list(run_labels)[::step], rotation=40, ha="right", fontsize=7)
    axis.set_xlim(-0.6, max(len(values) - 0.4, 0.6))
    axis.set_ylabel(ylabel)
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return figure
