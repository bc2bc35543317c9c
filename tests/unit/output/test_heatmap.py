"""locate's heatmaps (output.heatmap): one fixed colour scale in every run; under --topology
the entities grouped by leaf, the bad leaf named in red; a slow row red and its suspect named,
untested cells hatched, and beyond 64 entities a sorted strip."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.locate import attribution as locate
from commbench.locate import schedule as rounds_of
from tests.unit.locate.fleets import fleet


def _cell_colour(fig, value_log2):
    image = fig.axes[0].get_images()[0]
    return tuple(np.round(image.cmap(image.norm(value_log2)), 4))


def test_heatmap_scale_is_the_same_in_every_run(tmp_path):
    """A 0.8x pair has one colour whether the run's worst pair is 0.9x or 0.1x."""
    from commbench.output.heatmap import LEGEND, heatmap

    labels = [f"rank {e}" for e in range(4)]
    mild = np.full((4, 4), 0.9)
    harsh = np.full((4, 4), 0.1)
    np.fill_diagonal(mild, np.nan)
    np.fill_diagonal(harsh, np.nan)
    a = heatmap(tmp_path / "a.png", mild, labels, "t", False)
    b = heatmap(tmp_path / "b.png", harsh, labels, "t", False)
    for fig in (a, b):
        image = fig.axes[0].get_images()[0]
        assert (image.norm.vmin, image.norm.vmax) == pytest.approx((-2.0, 2.0))  # 0.25x-4x
    assert _cell_colour(a, np.log2(0.8)) == _cell_colour(b, np.log2(0.8))
    bar = a.axes[1]
    ticks = [t.get_text() for t in bar.get_yticklabels()]
    assert ticks == ["0.5x", "0.8x", "1x", "1.25x", "2x"]
    assert bar.get_ylabel() == LEGEND and "fixed scale 0.25x-4x" in LEGEND
    assert "the same in every run" in LEGEND


def test_the_heatmap_groups_by_leaf_and_names_the_bad_one_in_red(tmp_path):
    from matplotlib.colors import to_rgba

    from commbench.output import heatmap

    n = 6
    leaves = ("y", "x", "y", "x", None, "x")
    ratios = np.full((n, n), 1.0)
    labels = [f"e{e}" for e in range(n)]
    groups = heatmap.Groups(leaves, frozenset({"x"}))
    assert groups.order() == [0, 2, 1, 3, 5, 4]  # leaves as they first appear, unplaced last
    fig = heatmap.heatmap(tmp_path / "h.png", ratios, labels, "t", False, groups=groups)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["e0", "e2", "e1", "e3", "e5", "e4"]
    names = {t.get_text(): t for t in ax.texts}
    assert {"y", "x", "(no leaf)"} <= set(names)
    assert to_rgba(names["x"].get_color()) == to_rgba(heatmap.SUSPECT_COLOUR)
    assert to_rgba(names["y"].get_color()) == to_rgba("black")
    separators = sorted({line.get_ydata()[0] for line in ax.lines
                         if len(set(line.get_ydata())) == 1})
    assert separators == [1.5, 4.5]  # between y | x | unplaced


def _red_share(png):
    import matplotlib.image as mpimg

    pixels = mpimg.imread(png)[..., :3]
    red = (pixels[..., 0] > pixels[..., 1] + 0.25) & (pixels[..., 0] > pixels[..., 2] + 0.2)
    return float(red.mean())


def test_heatmap_colours_a_slow_row_red_and_names_the_suspect(tmp_path):
    from commbench.output.heatmap import heatmap

    ratios = locate.matrix(6, fleet(6, slow={3: 0.3}, noise=0.0), "busbw")
    labels = [f"rank {e}" for e in range(6)]
    fig = heatmap(tmp_path / "slow.png", ratios, labels, "t", False, suspects=[3])
    clean = heatmap(tmp_path / "clean.png", locate.matrix(6, fleet(6, noise=0.0), "busbw"),
                    labels, "t", False)
    assert _red_share(tmp_path / "slow.png") > 0.05  # the row and column of rank 3
    assert _red_share(tmp_path / "clean.png") < 0.01
    marked = [t for t in fig.axes[0].get_yticklabels() if t.get_color() != "black"]
    assert [t.get_text() for t in marked] == ["rank 3 ◀"]
    assert not [t for t in clean.axes[0].get_yticklabels() if t.get_color() != "black"]


def test_heatmap_hatches_untested_cells(tmp_path):
    from commbench.output.heatmap import heatmap

    rounds = rounds_of.quick_rounds(8, 2, seed=1)
    fig = heatmap(tmp_path / "q.png", locate.matrix(8, fleet(8, rounds=rounds), "lat"),
                  [str(e) for e in range(8)], "t", True)
    assert any(p.get_hatch() == "//" for p in fig.axes[0].patches)


def test_beyond_64_entities_a_sorted_strip(tmp_path):
    from commbench.output.heatmap import heatmap

    n = 70
    ratios = np.ones(n)
    ratios[5] = 0.4
    fig = heatmap(tmp_path / "s.png", np.ones((n, n)), [str(e) for e in range(n)], "t",
                  False, suspects=[5], entity_ratios=list(ratios))
    bars = fig.axes[0].patches
    assert len(bars) == n and bars[0].get_height() == pytest.approx(0.4)  # slowest first
