"""locate's pictures: the N x N pair matrix as a ratio to the fleet median.

Read at a glance: a diverging colour map centred at 1 on a log scale (0.5x and 2x are equally
far from white), red = slower whatever the metric (low bandwidth, high latency); untested
cells hatched, the diagonal grey; suspects named in red on both axes, a bad link boxed. Beyond
``MAX_MATRIX`` entities a cell is too small to read, and a sorted strip of every entity's
ratio is drawn instead, suspects marked.

The scale is fixed (``SCALE``: 0.25x to 4x, symmetric in log), not stretched to each run's
extremes: a colour then means the same ratio in every run, so a clean fleet looks pale and a
0.8x pair looks the same before and after a repair (stretched, a clean run's 1.1x noise
was painted as deep as a bad node's 0.3x). Ratios beyond are drawn at the end colour and the
colour bar says so.

With --topology (``Groups``) rows and columns are ordered by leaf switch, leaves are parted by
black lines and named above the matrix, a suspect switch's name in red: a bad uplink is then a
red cross of its leaf's rows and columns with a pale square where the leaf meets itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_MATRIX = 64  # entities a matrix stays readable at
SUSPECT_COLOUR = "tab:red"
SCALE = (0.25, 4.0)  # the colour scale's ends, the same in every run (symmetric in log2)
TICKS = (0.5, 0.8, 1.0, 1.25, 2.0)  # ratios named on the colour bar
LEGEND = ("ratio to the fleet median pair (red: slower); fixed scale 0.25x-4x, the same "
          "in every run")


@dataclass(frozen=True)
class Groups:
    """Each entity's leaf switch (None: not placed) and the leaves suspected."""

    leaves: Sequence[str | None]
    bad: frozenset[str] = frozenset()

    def order(self) -> list[int]:
        """Entities leaf by leaf (leaves in the order they first appear, unplaced last),
        each leaf's in their own order."""
        first = {leaf: i for i, leaf in reversed(list(enumerate(self.leaves)))}
        return sorted(range(len(self.leaves)),
                      key=lambda e: (self.leaves[e] is None, first[self.leaves[e]], e))

    def spans(self, order: Sequence[int]) -> list[tuple[str | None, int, int]]:
        """(leaf, first position, last position) along ``order``."""
        spans: list[tuple[str | None, int, int]] = []
        for position, e in enumerate(order):
            leaf = self.leaves[e]
            if spans and spans[-1][0] == leaf:
                spans[-1] = (leaf, spans[-1][1], position)
            else:
                spans.append((leaf, position, position))
        return spans


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def heatmap(path: Path, ratios: np.ndarray, labels: Sequence[str], title: str,
            higher_is_slower: bool, suspects: Sequence[int] = (),
            links: Sequence[tuple[int, int]] = (), entity_ratios: Sequence[float] = (),
            groups: Groups | None = None) -> Figure:
    """Draw ``ratios`` (n x n, NaN = untested) to ``path``; returns the closed figure (a test
    reads its texts and colours)."""
    n = len(labels)
    if n > MAX_MATRIX:
        return _strip(path, entity_ratios, labels, title, higher_is_slower, suspects)
    spans = []
    if groups is not None and len(groups.leaves) == n:
        order = groups.order()
        where = {e: position for position, e in enumerate(order)}
        ratios = ratios[np.ix_(order, order)]
        labels = [labels[e] for e in order]
        suspects = [where[e] for e in suspects]
        links = [(where[a], where[b]) for a, b in links]
        spans = groups.spans(order)
    plt = _pyplot()
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    logs = np.log2(ratios)
    limit = math.log2(SCALE[1])  # fixed: the same colour for the same ratio in every run
    side = min(14.0, max(5.5, 0.28 * n + 3))
    fig, ax = plt.subplots(figsize=(side + 1.5, side))
    ax.set_facecolor("white")
    ax.add_patch(Rectangle((-0.5, -0.5), n, n, facecolor="white", edgecolor="0.6",
                           hatch="//", linewidth=0, zorder=0))  # shows through untested cells
    cmap = plt.get_cmap("RdBu_r" if higher_is_slower else "RdBu")
    shown = np.ma.masked_invalid(logs)
    image = ax.imshow(shown, cmap=cmap, norm=TwoSlopeNorm(0.0, -limit, limit), zorder=1,
                      interpolation="nearest")  # beyond the scale: the end colours
    for i in range(n):
        ax.add_patch(Rectangle((i - 0.5, i - 0.5), 1, 1, facecolor="0.85", zorder=2))
    for a, b in links:
        for x, y in ((a, b), (b, a)):
            ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="black",
                                   linewidth=2.0, zorder=3))
    if n <= 16:
        for i in range(n):
            for j in range(n):
                if i != j and math.isfinite(ratios[i, j]):
                    dark = abs(logs[i, j]) > 0.6 * limit
                    ax.text(j, i, f"{ratios[i, j]:.2f}", ha="center", va="center",
                            fontsize=8, zorder=4, color="white" if dark else "black")
    fontsize = 9 if n <= 24 else max(4, int(9 - (n - 24) / 8))
    marked = [f"{label} ◀" if i in suspects else label for i, label in enumerate(labels)]
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(marked, rotation=90, fontsize=fontsize)
    ax.set_yticklabels(marked, fontsize=fontsize)
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        for i, tick in enumerate(ticks):
            if i in suspects:
                tick.set_color(SUSPECT_COLOUR)
                tick.set_fontweight("bold")
    for leaf, first, last in spans:
        if first:
            for line in (ax.axhline, ax.axvline):
                line(first - 0.5, color="black", linewidth=1.5, zorder=5)
        bad = leaf in groups.bad
        ax.text((first + last) / 2, -0.6, "(no leaf)" if leaf is None else leaf, ha="center",
                va="bottom", fontsize=9, zorder=6, clip_on=False,
                color=SUSPECT_COLOUR if bad else "black", fontweight="bold" if bad else None)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, extend="both")
    bar.set_ticks([math.log2(t) for t in TICKS])
    bar.set_ticklabels([tick_label(t) for t in TICKS])
    bar.set_label(LEGEND)
    note = "hatched: not measured; boxed: a suspect link; red labels: suspects"
    if spans:
        note += "\ngrouped by leaf switch (--topology); a red leaf: a suspect switch"
    ax.set_title(f"{title}\n{note}", fontsize=10, pad=18 if spans else 6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig


def tick_label(ratio: float) -> str:
    """'0.8x', '1x', '1.25x': a ratio as the colour bar names it."""
    return f"{ratio:g}x"


def _strip(path: Path, ratios: Sequence[float], labels: Sequence[str], title: str,
           higher_is_slower: bool, suspects: Sequence[int]):
    """Every entity's ratio, slowest first: readable at any fleet size."""
    plt = _pyplot()
    values = np.asarray(ratios, dtype=float)
    order = np.argsort(-values if higher_is_slower else values)
    fig, ax = plt.subplots(figsize=(12, 5))
    colours = [SUSPECT_COLOUR if i in suspects else "tab:blue" for i in order]
    ax.bar(range(len(order)), values[order], color=colours, width=1.0)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log", base=2)
    ax.set_ylim(*SCALE)  # the matrix's fixed scale: the same height means the same ratio
    ax.set_yticks(TICKS)
    ax.set_yticklabels([tick_label(t) for t in TICKS])
    ax.set_xlabel("entities, slowest first (red: suspects)")
    ax.set_ylabel("ratio to the fleet median, fixed scale 0.25x-4x")
    for rank, i in enumerate(order[: min(10, len(order))]):
        if i in suspects:
            ax.annotate(labels[i], (rank, values[i]), rotation=90, fontsize=7,
                        color=SUSPECT_COLOUR)
    ax.set_title(f"{title} ({len(values)} entities: too many for a matrix)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig
