"""history add / show / check / report / export through the real entry point, on a real SQLite
file: a planted 1.25x step is found and fails check; bad input is one line and exit 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.unit.history.cli_helper import run_cli
from tests.unit.history.runs import make_run, night, sqlite_url


@pytest.fixture
def nightly(tmp_path):
    """14 nights of base's allreduce at 8 B and 1 MiB with 2 % noise, 1.25x slower from night
    10, and a partial night 12 that reads 3x (a run cut short must not look like a change)."""
    rng = np.random.default_rng(0)
    folders = []
    for number in range(14):
        scale = float(np.exp(rng.normal(0, 0.02))) * (1.25 if number >= 10 else 1.0)
        status = "complete"
        if number == 12:
            scale, status = 3.0, "partial"
        folders.append(make_run(tmp_path / "runs", f"night-{number:02d}", night(number), scale,
                                status, ops=("allreduce",), sizes=(8, 1 << 20)))
    url = sqlite_url(tmp_path / "history.db")
    return url, folders


def test_add_then_check_finds_the_planted_regression(capsys, nightly, tmp_path):
    url, folders = nightly
    code, out, err = run_cli(capsys, "history", "add", *map(str, reversed(folders)), "--db", url,
                             "--commit", "abc")
    assert code == 0, err
    assert out.count("added: ") == 14
    code, out, err = run_cli(capsys, "history", "check", "--db", url, "--json")
    assert code == 1
    assert err.strip().splitlines() == [
        "error: 2 regression change point(s) within the last 5 run(s) of their series"]
    result = json.loads(out)
    assert (result["series"], result["runs"]) == (2, 14)
    assert {(c["op"], c["run"], c["index"], c["verdict"]) for c in result["change_points"]} == {
        ("allreduce", "night-10", 10, "regression")}
    assert {c["size_bytes"] for c in result["change_points"]} == {8, 1048576}
    for change in result["change_points"]:
        assert change["ratio"] == pytest.approx(1.25, rel=0.04)
        assert change["after_us"] > change["before_us"]
        assert set(change) >= {"op", "size_bytes", "backend", "world_size", "cluster", "run",
                               "index", "before_us", "after_us", "ratio", "verdict"}


def test_check_passes_when_the_regression_is_older_than_last_k(capsys, nightly):
    url, folders = nightly
    run_cli(capsys, "history", "add", *map(str, folders), "--db", url)
    code, out, _err = run_cli(capsys, "history", "check", "--db", url, "--last", "2")
    assert code == 0
    assert "2 regression(s)" in out and "night-10" in out


def test_show_tables_the_last_runs_and_draws_a_trend_per_series(capsys, nightly, tmp_path):
    url, folders = nightly
    run_cli(capsys, "history", "add", *map(str, folders), "--db", url)
    out_dir = tmp_path / "plots"
    code, out, err = run_cli(capsys, "history", "show", "--db", url, "--last", "3", "--size",
                             "1M", "--out", str(out_dir))
    assert code == 0, err
    assert "night-11" in out and "night-13" in out and "night-10" not in out.split("series")[0]
    assert "partial" in out  # night-12, shown as what it is
    assert re.search(r"regression 1\.2\dx at night-10", out)
    assert [p.name for p in out_dir.iterdir()] == [
        "history-allreduce-gloo-1M-float32-n2-ci-runner.png"]
    code, out, _err = run_cli(capsys, "history", "show", "--db", url, "--json", "--out",
                              str(out_dir))
    shown = json.loads(out)
    assert len(shown["series"]) == 2 and len(shown["runs"]) == 10
    assert shown["series"][0]["points"][-2]["status"] == "partial"


def test_report_writes_a_self_contained_page(capsys, nightly, tmp_path):
    url, folders = nightly
    run_cli(capsys, "history", "add", *map(str, folders), "--db", url)
    code, out, _err = run_cli(capsys, "history", "report", "--db", url, "--out",
                              str(tmp_path / "report"))
    assert code == 0 and "2 change point(s)" in out
    page = (tmp_path / "report" / "history.html").read_text()
    assert "allreduce gloo 1M float32 n2 [ci-runner]" in page
    assert page.count("data:image/png;base64,") == 2
    assert "http://" not in page and "https://" not in page


def test_export_is_openmetrics_of_the_latest_complete_run(capsys, nightly):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    url, folders = nightly
    run_cli(capsys, "history", "add", *map(str, folders), "--db", url)
    code, out, _err = run_cli(capsys, "history", "export", "--format", "openmetrics",
                              "--db", url)
    assert code == 0
    families = {f.name: f for f in text_string_to_metric_families(out)}
    busbw = families["commbench_busbw_gbps"].samples
    assert len(busbw) == 2
    assert {s.labels["op"] for s in busbw} == {"allreduce"}
    latency = {s.labels["size"]: s.value for s in families["commbench_lat_us_p50"].samples}
    assert latency["8"] == pytest.approx(300.2 * 1.25, rel=0.1)  # night-13, not the partial 3x


BAD_INPUT = [
    (["history", "show", "--last", "0"], "bad --last 0"),
    (["history", "check", "--last", "0"], "bad --last 0"),
    (["history", "check", "--threshold", "lots"], "bad --threshold"),
    (["history", "export", "--format", "csv"], "bad --format 'csv'"),
    (["history", "show", "--db", "mongodb://x/y"], "unknown store URL scheme"),
    (["history", "check", "--db", "sqlite:///{tmp}/absent.db"], "no history store at"),
    (["history", "check", "--db", "sqlite:///{tmp}/notes.db"], "not a history store"),
    (["history", "add", "{tmp}"], "is not a run folder"),
    (["history", "report", "--last", "0"], "bad --last 0"),
    (["history", "export", "--last", "0"], "bad --last 0"),
    (["history", "show", "--size", "1Q"], "bad size '1Q'"),
    (["history", "show", "--op", "nosuch"], "match the filters"),
    (["history", "export", "--out", "{tmp}/notes.db/x.prom"], "cannot write --out"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.db").write_text("not a database, my notes\n" * 200)
    make_run(tmp_path / "runs", "n1", night(1))
    run_cli(capsys, "history", "add", str(tmp_path / "runs" / "n1"))
    code, out, err = run_cli(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert message in err
    assert "Traceback" not in out + err


def test_an_unreachable_store_is_one_line_and_exit_3(capsys):
    code, _out, err = run_cli(capsys, "history", "check", "--db",
                              "postgresql://nobody@127.0.0.1:1/history")
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and "cannot reach the history store" in err
