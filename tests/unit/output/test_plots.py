"""The plots a person opens: not blank, their texts inside the figure, nothing drawn that the
data does not hold (stored fixture runs, tests/fixtures)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from commbench.compare.runs import compare_runs
from commbench.output import plots
from commbench.output.files import write_run_files
from commbench.results import load_run, rows_frame

FIXTURES = Path(__file__).parents[2] / "fixtures"


def not_blank(path: Path) -> bool:
    import matplotlib.image

    pixels = matplotlib.image.imread(str(path))
    return float(np.std(pixels[..., :3])) > 0.02


def renderer_of(fig):
    """A renderer for a saved (closed) figure, drawn as it was saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def inside(fig, artist) -> bool:
    """Whether ``artist`` (a title, a label, a legend) lies within the figure."""
    box, frame = artist.get_window_extent(renderer_of(fig)), fig.bbox
    return (box.x0 >= frame.x0 - 1 and box.y0 >= frame.y0 - 1 and box.x1 <= frame.x1 + 1
            and box.y1 <= frame.y1 + 1)


def run_copy(tmp_path, name, keep=None, status=None):
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    for stale in ("bandwidth.png", "latency.png", "summary.md"):
        (target / stale).unlink(missing_ok=True)
    if keep:
        rows = [json.loads(line) for line in (target / "results.jsonl").read_text()
                .splitlines()]
        (target / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows
                                                      if keep(r)))
    if status:
        meta = json.loads((target / "run.json").read_text())
        (target / "run.json").write_text(json.dumps({**meta, "status": status}))
    return load_run(str(target))


@pytest.fixture
def figures(monkeypatch):
    """Every figure the plots save, in order."""
    saved = []
    original = plots._save

    def keep(fig, path):
        saved.append((Path(path).name, original(fig, path)))
        return saved[-1][1]

    monkeypatch.setattr(plots, "_save", keep)
    return saved


def test_a_barrier_only_run_draws_its_latency_and_no_empty_bandwidth_axes(tmp_path, figures):
    run = run_copy(tmp_path, "model-exact", keep=lambda r: r["op"] == "barrier")
    write_run_files(run)
    assert not (run.path / "bandwidth.png").exists()
    assert not_blank(run.path / "latency.png")
    ((name, fig),) = figures
    axis = fig.axes[0]
    assert axis.get_ylim()[1] > 1  # µs of a barrier, not matplotlib's empty 0-1 axes
    assert [t.get_text() for t in axis.get_xticklabels()] == ["barrier gloo"]


def test_a_partial_runs_plots_say_partial(tmp_path, figures):
    run = run_copy(tmp_path, "noisy-a", status="partial")
    write_run_files(run)
    titles = {name: fig.axes[0].get_title() for name, fig in figures}
    assert titles == {"bandwidth.png": "noisy-a (partial): bus bandwidth",
                      "latency.png": "noisy-a (partial): latency"}
    assert all(not_blank(run.path / name) for name in titles)


def test_unstable_points_are_hollow_and_the_legend_says_so(tmp_path, figures):
    run = run_copy(tmp_path, "noisy-a")  # 8 unstable rows
    write_run_files(run)
    axis = dict(figures)["latency.png"].axes[0]
    from matplotlib.colors import to_rgba

    faces = {to_rgba(line.get_markerfacecolor()) for line in axis.get_lines()
             if line.get_marker() == "o"}
    assert (1.0, 1.0, 1.0, 1.0) in faces  # white: hollow
    assert "hollow: unstable" in [t.get_text() for t in axis.get_legend().get_texts()]


def test_bands_only_for_a_few_series(tmp_path):
    from matplotlib.collections import PolyCollection

    frame = rows_frame(load_run(str(FIXTURES / "model-step")).rows)  # 5 series
    many = plots.latency(frame, tmp_path / "many.png", "t")
    assert not [c for c in many.axes[0].collections if isinstance(c, PolyCollection)]
    few = plots.latency(frame[frame["op"] == "allreduce"], tmp_path / "few.png", "t")
    assert [c for c in few.axes[0].collections if isinstance(c, PolyCollection)]
    assert not_blank(tmp_path / "many.png") and not_blank(tmp_path / "few.png")


def test_a_long_legend_goes_beside_the_axes_inside_the_figure(tmp_path):
    import pandas as pd

    frames = [rows_frame(load_run(str(FIXTURES / "noisy-a")).rows).assign(run=f"run-{i}")
              for i in range(12)]
    fig = plots.bandwidth(pd.concat(frames, ignore_index=True), tmp_path / "bw.png", "12 runs")
    axis, legend = fig.axes[0], fig.axes[0].get_legend()
    renderer = renderer_of(fig)
    assert legend.get_window_extent(renderer).x0 >= axis.get_window_extent(renderer).x1
    assert inside(fig, legend) and inside(fig, axis.title)
    assert not_blank(tmp_path / "bw.png")


def test_the_ratio_plot_is_log_scaled_with_its_label_inside(tmp_path):
    base, new = load_run(str(FIXTURES / "noisy-a")), load_run(str(FIXTURES / "slower"))
    result = compare_runs([base, new], "lat_us_p50", 0.05, None)
    fig = plots.ratio(result.frame, tmp_path / "ratio.png", "2 runs", 0.05)
    axis = fig.axes[0]
    assert axis.get_yscale() == "log"
    assert inside(fig, axis.yaxis.label) and inside(fig, axis.xaxis.label)
    assert inside(fig, axis.title)
    low, high = axis.get_ylim()
    assert low < 1 / 1.05 and high > max(result.frame["ratio"])  # the band and every point
    assert not_blank(tmp_path / "ratio.png")
