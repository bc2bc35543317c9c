"""The history renderers: data in, files out (they know nothing of the store)."""

from __future__ import annotations

from commbench.output.history_html import Table, TrendSection, write_history_html
from commbench.output.history_plots import TrendChange, trend


def test_the_trend_marks_its_change_and_greys_partial_runs(tmp_path):
    values = [100, 101, 99, 300, 100, 125, 126, 124]
    figure = trend(tmp_path / "t.png", "allreduce gloo 8", [f"n{i}" for i in range(8)], values,
                   [True, True, True, False, True, True, True, True],
                   [TrendChange(5, "regression", 1.25, 100.0, 125.0, 0, 8)], "latency (us)")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert texts == ["regression 1.25x"]
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == ["complete run", "partial run (not judged)"]
    assert (tmp_path / "t.png").stat().st_size > 5000


def test_the_page_escapes_what_runs_say_and_embeds_its_images(tmp_path):
    figure_path = tmp_path / "t.png"
    trend(figure_path, "x", ["a"], [1.0], [True], [], "y")
    page = write_history_html(
        tmp_path / "history.html", "commbench history", ["2 series"],
        Table(["series", "verdict"], [["<b>evil</b>", "regression"]], verdict_column=1),
        [TrendSection("allreduce <gloo>", figure_path, "note")],
        Table(["run"], [["night-1"]])).read_text()
    assert "&lt;b&gt;evil&lt;/b&gt;" in page and "<b>evil</b>" not in page
    assert "allreduce &lt;gloo&gt;" in page
    assert 'style="background:#f8d0d0"' in page
    assert "data:image/png;base64," in page and 'src="t.png"' not in page
