"""``commbench model``: α–β fits on stored fixture runs (tests/fixtures/make_model_fixtures.py)."""

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.commands.model import run_model
from commbench.core.errors import EXIT_USAGE, UsageError
from commbench.model.fit import (
    COLUMNS,
    MAX_SEGMENTS,
    MIN_POINTS,
    fit_curve,
    fit_lines,
    fit_run,
    segment_records,
)
from commbench.results import load_run
from tests.unit.importers.readers import nccl

FIXTURES = Path(__file__).parents[2] / "fixtures"


def rows(name):
    return load_run(FIXTURES / name).rows


def copy(name, tmp_path):
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def test_an_exact_alpha_beta_curve_is_recovered_as_one_segment():
    # model-exact: allreduce t = 20 µs + n / 2.5 GB/s at 8 B .. 1 GiB, plus a barrier row.
    fits = fit_run(rows("model-exact"))
    assert len(fits) == 1  # the barrier (size 0) is skipped
    (segment,) = fits[0].segments
    assert segment.alpha_us == pytest.approx(20.0, rel=1e-6)
    assert segment.beta_gbps == pytest.approx(2.5, rel=1e-6)
    assert segment.r2 == pytest.approx(1.0, abs=1e-12)
    assert segment.worst_residual_pct < 1e-6
    assert (segment.size_lo, segment.size_hi, segment.points) == (8, 1 << 30, 28)


def test_a_protocol_change_gives_two_segments_cut_at_the_true_size():
    # model-protocol: (5 µs, 1 GB/s) below 256K, (100 µs, 10 GB/s) from 256K, 1K .. 256M.
    (fit,) = fit_run(rows("model-protocol"))
    first, second = fit.segments
    assert (first.size_lo, first.size_hi) == (1 << 10, 128 << 10)
    assert (second.size_lo, second.size_hi) == (256 << 10, 256 << 20)
    assert first.alpha_us == pytest.approx(5.0, rel=1e-6)
    assert first.beta_gbps == pytest.approx(1.0, rel=1e-6)
    assert second.alpha_us == pytest.approx(100.0, rel=1e-6)
    assert second.beta_gbps == pytest.approx(10.0, rel=1e-6)
    # The model reads each regime on its side of the cut, and beyond the ends.
    assert fit.time_us(64 << 10) == pytest.approx(5 + (64 << 10) / 1e3)
    assert fit.time_us(1 << 20) == pytest.approx(100 + (1 << 20) / 1e4)
    assert fit.time_us(4 << 30) == pytest.approx(100 + (4 << 30) / 1e4)


@pytest.mark.parametrize("name", ["model-noisy", "model-curved"])
def test_noisy_curves_get_at_most_three_contiguous_segments(name):
    (fit,) = fit_run(rows(name))
    assert 1 <= len(fit.segments) <= MAX_SEGMENTS
    assert all(s.points >= MIN_POINTS for s in fit.segments)
    assert sum(s.points for s in fit.segments) == len(fit.sizes)
    assert fit.segments[0].size_lo == fit.sizes[0]
    assert fit.segments[-1].size_hi == fit.sizes[-1]
    for before, after in zip(fit.segments, fit.segments[1:], strict=False):
        assert before.size_hi < after.size_lo
    assert all(s.alpha_us >= 0 and s.beta_gbps > 0 for s in fit.segments)


def test_noise_on_a_single_regime_does_not_invent_a_protocol_change():
    # model-noisy: the exact curve of model-exact with ~12 % noise on each median.
    (fit,) = fit_run(rows("model-noisy"))
    (segment,) = fit.segments
    assert segment.beta_gbps == pytest.approx(2.5, rel=0.1)


def test_a_curve_no_line_fits_uses_all_three_segments():
    (fit,) = fit_run(rows("model-curved"))
    assert len(fit.segments) == 3


def test_fewer_than_four_sizes_is_refused_in_one_line():
    with pytest.raises(UsageError) as info:
        fit_run(rows("model-few"), name="model-few")
    message = str(info.value)
    assert info.value.exit_code == EXIT_USAGE
    assert "\n" not in message
    assert "3 size" in message and "at least 4" in message and "allreduce" in message


def test_alpha_is_never_negative_and_beta_stays_positive():
    sizes = np.array([10e3, 20e3, 40e3, 80e3, 160e3])
    times = -5.0 + sizes / 1e3  # the free fit would say α = -5 µs
    (segment,) = fit_curve(sizes, times).segments
    assert segment.alpha_us == 0.0
    assert 0 < segment.beta_gbps < math.inf


def test_a_flat_curve_has_infinite_beta_written_as_null(tmp_path):
    (segment,) = fit_curve([8, 16, 32, 64, 128], [7.0] * 5).segments
    assert segment.alpha_us == pytest.approx(7.0)
    assert segment.beta_gbps == math.inf
    assert segment.r2 == 1.0


def test_busbw_equivalent_uses_the_ops_factor_at_the_group_size():
    # allreduce over 8 ranks: busbw = algbw x 2(n-1)/n = 1.75; allgather: (n-1)/n = 0.875.
    records = {(r["op"], r["pattern"]): r for r in segment_records(fit_run(rows("model-step")))}
    assert records[("allreduce", "")]["busbw_equiv_gbps"] == pytest.approx(4.0 * 1.75)
    assert records[("allgather", "")]["busbw_equiv_gbps"] == pytest.approx(8.0 * 0.875)
    assert records[("p2p", "pingpong")]["busbw_equiv_gbps"] == pytest.approx(20.0)
    assert set(records[("allreduce", "")]) == set(COLUMNS)


def test_mesh_dimensions_are_separate_curves():
    fits = fit_run(rows("model-mesh"))
    found = {(f.key.dim, f.key.group_size): f.segments[0].beta_gbps for f in fits}
    assert found == pytest.approx({("tp", 4): 100.0, ("dp", 2): 5.0, ("", 8): 4.0})


def test_fit_lines_follow_each_segment_and_break_between_them():
    (fit,) = fit_run(rows("model-protocol"))
    (sizes, times), = fit_lines([fit]).values()
    gap = int(np.flatnonzero(np.isnan(sizes))[0])
    assert np.isnan(sizes).sum() == 1  # two segments, one break
    for segment, part in zip(fit.segments, (slice(0, gap), slice(gap + 1, None)), strict=True):
        assert np.allclose(times[part], segment.alpha_us + sizes[part] / (segment.beta_gbps * 1e3))
    # Each segment is drawn up to the geometric mean of the sizes either side of the cut.
    cut = math.sqrt(2) * (128 << 10)
    assert sizes[gap - 1] == pytest.approx(cut) and sizes[gap + 1] == pytest.approx(cut)
    assert sizes[0] == 1 << 10 and sizes[-1] == 256 << 20


def test_run_model_writes_csv_json_and_the_plot_beside_the_run(tmp_path, capsys):
    folder = copy("model-protocol", tmp_path)
    assert run_model([str(folder)], json_out=False) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "allgather" in out and "wrote" in out
    with open(folder / "model.csv") as handle:
        table = list(csv.DictReader(handle))
    assert tuple(table[0]) == COLUMNS
    assert [int(r["size_lo"]) for r in table] == [1 << 10, 256 << 10]
    document = json.loads((folder / "model.json").read_text())
    assert len(document["segments"]) == 2
    assert document["segments"][1]["beta_gbps"] == pytest.approx(10.0)
    assert (folder / "latency.png").stat().st_size > 1000


def test_run_model_json_prints_one_object_per_run(tmp_path, capsys):
    folders = [copy("model-exact", tmp_path), copy("model-mesh", tmp_path)]
    assert run_model([str(f) for f in folders], json_out=True) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    documents = [json.loads(line) for line in lines]
    assert documents[0]["run"] == "model-exact"
    assert len(documents[1]["segments"]) == 3


def test_run_model_refuses_before_writing_anything(tmp_path):
    good, bad = copy("model-exact", tmp_path), copy("model-few", tmp_path)
    with pytest.raises(UsageError):
        run_model([str(good), str(bad)], json_out=False)
    assert not (good / "model.csv").exists()


def test_infinite_beta_is_null_in_model_json(tmp_path, capsys):
    folder = copy("model-exact", tmp_path)
    lines = (folder / "results.jsonl").read_text().splitlines()
    flat = []
    for line in lines:
        record = json.loads(line)
        if record["size_bytes"]:
            record["lat_us_p50"] = 7.0
        flat.append(json.dumps(record))
    (folder / "results.jsonl").write_text("\n".join(flat) + "\n")
    run_model([str(folder)], json_out=True)
    (segment,) = json.loads(capsys.readouterr().out)["segments"]
    assert segment["beta_gbps"] is None
    assert "inf" in (folder / "model.csv").read_text()


def test_fit_lines_are_drawn_dashed_in_their_series_colour(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from commbench.output import plots

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at
    frame = pd.DataFrame([{"op": "allreduce", "backend": "gloo", "size_bytes": s,
                           "lat_us_p50": 20.0 + s / 1e3, "busbw_gbps": 1.0, "pattern": "",
                           "dim": "", "dtype": "float32"} for s in (8, 1024)])
    plots.latency(frame, tmp_path / "latency.png", "t",
                  fits={"allreduce gloo": ([8, 1024], [20.0, 21.0])})
    lines = figures[0].axes[0].get_lines()  # the measured line, its points, the fit
    measured, fitted = lines[0], lines[-1]
    assert fitted.get_linestyle() == "--" and measured.get_linestyle() == "-"
    assert fitted.get_color() == measured.get_color()
    assert "fit" in fitted.get_label()


def test_the_analysis_modules_do_not_import_torch():
    code = ("import sys, commbench.model.fit, commbench.model.estimate, "
            "commbench.commands.model, commbench.commands.estimate, "
            "commbench.output.plots; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.1, 1e4), beta=st.floats(1e-3, 1e3))
def test_any_exact_line_is_recovered(alpha, beta):
    sizes = [1 << k for k in range(3, 31)]
    (segment,) = fit_curve(sizes, [alpha + s / (beta * 1e3) for s in sizes]).segments
    assert segment.alpha_us == pytest.approx(alpha, rel=1e-6)
    assert segment.beta_gbps == pytest.approx(beta, rel=1e-6)


def test_a_byte_term_within_its_noise_is_no_bandwidth():
    # 8-128 B at about 100 µs: the free fit finds some slope; it is noise, not 0.000 GB/s.
    (segment,) = fit_curve([8, 16, 32, 64, 128], [100.0, 104.0, 98.0, 103.0, 101.0]).segments
    assert segment.beta_gbps == math.inf
    assert segment.alpha_us == pytest.approx(101.2, rel=0.01)
    assert segment.usable and segment.note == "latency only"


def test_a_segment_no_line_fits_is_said_to_be_no_usable_fit(tmp_path, capsys):
    (flat,) = fit_curve([8, 16, 32, 64, 128], [100.0, 300.0, 120.0, 280.0, 110.0]).segments
    assert not flat.usable and "scatter" in flat.note
    sloped = fit_curve([1 << k for k in range(10, 15)], [100.0, 900.0, 150.0, 1000.0, 600.0])
    assert not sloped.segments[0].usable
    lines = fit_lines([sloped])
    assert np.isnan(next(iter(lines.values()))[1]).all()  # nothing drawn where no line fits
    # The table says so, with no α or β to copy.
    run = copy("model-exact", tmp_path)
    rows_ = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for row, scale in zip(rows_, [1.0, 3.0, 1.2, 2.8] * 10, strict=False):
        row["lat_us_p50"] = 100.0 * scale
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_))
    assert run_model([str(run)], json_out=False) == 0
    out = capsys.readouterr().out
    table = next(line for line in out.splitlines() if line.startswith("allreduce"))
    assert table.split()[7:10] == ["-", "-", "-"] and table.endswith("no usable fit")
    assert "no usable fit (times scatter" in out
    segments = json.loads((run / "model.json").read_text())["segments"]
    assert [s["usable"] for s in segments] == [False]


def test_model_keeps_in_place_and_out_of_place_apart_as_compare_does():
    """An nccl-tests import holds both column groups; one fit over both merged two curves
    (the in-place one here is 2 us faster at 1M) that compare keeps apart."""
    from commbench.model.fit import measured_curves

    imported = nccl("v2.13-allreduce.txt", op="allreduce")
    curves = measured_curves(imported.rows)
    assert sorted(key.variant for key in curves) == ["in-place", "out-of-place"]
    by_variant = {key.variant: dict(zip(*curves[key], strict=True)) for key in curves}
    assert by_variant["out-of-place"][1048576] == 50.0
    assert by_variant["in-place"][1048576] == 49.0
    assert all(key.describe().endswith(key.variant) for key in curves)
