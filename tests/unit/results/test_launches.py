"""A --repeat folder (K launches, K rows per size) read as one row per size by everything that
shows it: the run's summary.md and plots, report, model. The fixture ``repeat`` is a real run
(allreduce 8,1K,64K,1M, --repeat 3 --rounds 3 --min-time 0.2, 2 gloo ranks on the 2-core VM)
whose first launch was slower than the other two."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from commbench.model.fit import measured_curves
from commbench.results import load_run, rows_frame
from commbench.results.launches import pooled_rows

FIXTURE = Path(__file__).parents[2] / "fixtures" / "repeat"
SIZES = [8, 1024, 65536, 1048576]


def raw_rows():
    return [json.loads(line) for line in (FIXTURE / "results.jsonl").read_text().splitlines()]


def test_the_fixture_holds_three_launches_per_size():
    rows = raw_rows()
    assert sorted({r["launch"] for r in rows}) == [0, 1, 2]
    assert [r["size_bytes"] for r in rows] == SIZES * 3


def test_pooled_rows_are_one_per_size_over_every_launch():
    rows = raw_rows()
    pooled = pooled_rows(rows)
    assert [r["size_bytes"] for r in pooled] == SIZES
    for row in pooled:
        launches = [r for r in rows if r["size_bytes"] == row["size_bytes"]]
        samples = [v for r in launches for v in r["samples_us"]]
        assert row["lat_us_p50"] == pytest.approx(float(np.median(samples)))
        assert row["lat_us_ci_lo"] <= row["lat_us_p50"] <= row["lat_us_ci_hi"]
        assert row["launches"] == 3 and "launch" not in row
        assert row["samples"] == sum(r["samples"] for r in launches) == len(row["samples_us"])
        assert row["iters"] == sum(r["iters"] for r in launches)
        assert row["lat_us_min"] == min(r["lat_us_min"] for r in launches)
        assert row["lat_us_max"] == max(r["lat_us_max"] for r in launches)
        # bandwidth follows the pooled median
        assert row["busbw_gbps"] == pytest.approx(row["size_bytes"] / row["lat_us_p50"] / 1e3)
    one = [r for r in rows if r["launch"] == 0]
    assert pooled_rows(one) is one  # a run of one launch is shown as it is


def test_the_pooled_interval_holds_the_spread_between_launches():
    """Launch 0 ran slower at 8 B (186 us against 116 and 122): the pooled interval must hold
    more than one launch's."""
    rows = raw_rows()
    pooled = pooled_rows(rows)[0]
    fast = [r for r in rows if r["size_bytes"] == 8 and r["launch"] == 1][0]
    assert (pooled["lat_us_ci_hi"] - pooled["lat_us_ci_lo"]
            > fast["lat_us_ci_hi"] - fast["lat_us_ci_lo"])


def test_a_repeated_runs_summary_and_plots_have_one_row_per_size(tmp_path):
    from commbench.commands.measure import finish

    folder = tmp_path / "rep"
    shutil.copytree(FIXTURE, folder)
    run = finish(folder, "complete")
    assert len(run.rows) == 12  # the raw rows stay as measured
    table = [line for line in (folder / "summary.md").read_text().splitlines()
             if line.startswith("| ") and "float32" in line]
    assert [line.split("|")[1].strip() for line in table] == ["8", "1K", "64K", "1M"]
    assert (folder / "latency.png").exists() and (folder / "bandwidth.png").exists()


def test_plot_series_draw_one_point_per_size():
    from commbench.output import plots

    series = plots._series(rows_frame(pooled_rows(raw_rows())))
    assert [[r["size_bytes"] for r in rows] for rows in series.values()] == [SIZES]


def test_report_tables_have_one_row_per_size(tmp_path):
    from commbench.commands.report import run_report

    run_report([str(FIXTURE), str(FIXTURE)], str(tmp_path / "report"))
    text = (tmp_path / "report" / "report.md").read_text()
    rows_8 = [line for line in text.splitlines() if line.startswith("| 8 |")]
    assert len(rows_8) == 2  # one per run table (the run twice), not one per launch


def test_model_fits_one_point_per_size_from_every_launch():
    rows = raw_rows()
    ((sizes, times),) = measured_curves(rows).values()
    assert sizes.tolist() == SIZES
    pooled = [r["lat_us_p50"] for r in pooled_rows(rows)]
    assert times.tolist() == pytest.approx(pooled)
    assert load_run(FIXTURE).meta["repeat"] == 3
