"""alltoallv's split identity in the history: a uniform and a zipf run of one op and size are two
series (so the routing changing is no change point), named so in labels and OpenMetrics, and a
store written before the store kept the identity still opens."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from commbench.history import add_runs, store
from commbench.history.ingest import read_run_folder, run_routing
from commbench.history.openmetrics import openmetrics_text
from commbench.history.series import Series, build_series, changes, select
from commbench.history.store import Store
from tests.unit.history.cli_helper import run_cli
from tests.unit.history.runs import make_alltoallv_run, make_run, night, sqlite_url

HERE = Path(__file__).resolve().parent
UNIFORM_ID, ZIPF_ID = "5d1e0c2a7b", "c3f9a81e04"  # any two ids: the store never reads a matrix
NOISE = (1.0, 1.01, 0.99, 1.0, 1.02, 0.98)  # a night's latency scale around its routing's level
ZIPF_COST = 2.4  # the zipf nights are 2.4x slower: the busiest rank moves 2.4x the mean


@pytest.fixture
def routed(tmp_path):
    """Six nights of uniform routing, then six of zipf:1.2 (the routing changed on night 6),
    alltoallv at 1 KiB and 1 MiB on the same cluster: the store and its runs."""
    folders = [make_alltoallv_run(tmp_path / "runs", f"u{n}", night(n), "uniform", UNIFORM_ID,
                                  1.0, scale, sizes=(1024, 1 << 20))
               for n, scale in enumerate(NOISE)]
    folders += [make_alltoallv_run(tmp_path / "runs", f"z{n}", night(6 + n), "zipf:1.2",
                                   ZIPF_ID, ZIPF_COST, ZIPF_COST * scale, sizes=(1024, 1 << 20))
                for n, scale in enumerate(NOISE)]
    url = sqlite_url(tmp_path / "history.db")
    add_runs(url, folders)
    with Store(url) as opened:
        runs = opened.runs()
        return url, build_series(runs, opened.points())


def test_a_point_keeps_the_runs_routing_and_its_rows_split(tmp_path):
    folder = make_alltoallv_run(tmp_path, "z", night(1), "zipf:1.2", ZIPF_ID, ZIPF_COST,
                                sizes=(1024,))
    (point,) = read_run_folder(folder).points
    assert (point.op, point.routing, point.split_id) == ("alltoallv/dispatch", "zipf:1.2",
                                                          ZIPF_ID)
    folder = make_alltoallv_run(tmp_path, "u", night(1), "uniform", UNIFORM_ID, 1.0,
                                sizes=(1024,))
    (point,) = read_run_folder(folder).points
    assert (point.routing, point.split_id) == ("uniform", UNIFORM_ID)  # null = the default


def test_other_ops_carry_no_split_identity(tmp_path):
    run = read_run_folder(make_run(tmp_path, "n1", night(1)))
    assert {(p.routing, p.split_id) for p in run.points} == {("", "")}


@pytest.mark.parametrize("meta, expected", [
    ({"config": {"op_options": [["routing", {"kind": "hot", "hot": 2, "share": 0.5}]]}},
     "hot:2:0.5"),
    ({"config": {"op_options": [["routing", {"kind": "file", "path": "m.csv"}]]}}, "file:m.csv"),
    ({"config": {"op_options": [["experts", 8]]}, "routing": "nccl-tests generated"},
     "nccl-tests generated"),
    ({"config": {"dtype": "float32"}}, ""),
])
def test_the_routing_is_read_from_run_json(meta, expected):
    assert run_routing(meta) == expected


def test_uniform_and_zipf_runs_are_two_series_without_a_change_point(routed):
    _url, series = routed
    alltoallv = select(series, op="alltoallv")
    assert len(alltoallv) == 4  # 2 sizes x 2 routings
    assert {(s.key.size_bytes, s.key.routing, s.key.split_id) for s in alltoallv} == {
        (size, routing, split) for size in (1024, 1 << 20)
        for routing, split in (("uniform", UNIFORM_ID), ("zipf:1.2", ZIPF_ID))}
    for one in alltoallv:
        names = {o.run.run_id[0] for o in one.observations}
        assert len(one.observations) == 6 and names == {one.key.routing[0]}
        assert changes(one, 0.05) == []


def test_one_series_over_both_routings_would_report_the_routing_change(routed):
    """What the split identity prevents: the same observations as one series (the key before
    it) have a 2.4x step where the routing changed, and check calls it a regression."""
    _url, series = routed
    pooled = [o for s in select(series, op="alltoallv", size_bytes=1 << 20)
              for o in s.observations]
    pooled.sort(key=lambda o: o.run.start_time)
    (finding,) = changes(Series(series[0].key, pooled), 0.05)
    assert (finding.run_id, finding.verdict) == ("z0", "regression")


def test_history_check_finds_nothing_and_shows_the_routings(capsys, routed):
    url, _series = routed
    code, out, err = run_cli(capsys, "history", "check", "--db", url, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["series"], result["runs"], result["change_points"]) == (4, 12, [])
    code, out, err = run_cli(capsys, "history", "show", "--db", url, "--op", "alltoallv",
                             "--json")
    assert code == 0, err
    shown = json.loads(out)["series"]
    assert {(s["routing"], s["split_id"]) for s in shown} == {("uniform", UNIFORM_ID),
                                                             ("zipf:1.2", ZIPF_ID)}
    assert any(s["label"].startswith("alltoallv/dispatch gloo 1M float32 n2 zipf:1.2 splits "
                                     f"{ZIPF_ID} [ci-runner]") for s in shown)


def test_labels_and_openmetrics_name_the_split(routed):
    _url, series = routed
    (zipf,) = select(series, op="alltoallv", size_bytes=1024)[1:]
    assert zipf.key.label() == (f"alltoallv/dispatch gloo 1K float32 n2 zipf:1.2 splits "
                                f"{ZIPF_ID} [ci-runner]")
    assert ZIPF_ID in zipf.key.slug()
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text(series))}
    samples = families["commbench_lat_us_p50"].samples
    assert {(s.labels["size"], s.labels["routing"], s.labels["split_id"]) for s in samples} == {
        (str(size), routing, split) for size in (1024, 1 << 20)
        for routing, split in (("uniform", UNIFORM_ID), ("zipf:1.2", ZIPF_ID))}


def test_other_series_keep_their_label(tmp_path):
    url = sqlite_url(tmp_path / "h.db")
    add_runs(url, [make_run(tmp_path, "n1", night(1), sizes=(8,), ops=("allreduce",))])
    with Store(url) as opened:
        (one,) = build_series(opened.runs(), opened.points())
    assert one.key.label() == "allreduce gloo 8 float32 n2 [ci-runner]"
    families = {f.name: f for f in text_string_to_metric_families(openmetrics_text([one]))}
    (sample,) = families["commbench_lat_us_p50"].samples
    assert sample.labels.get("routing", "") == "" and sample.labels.get("split_id", "") == ""


def old_store(path: Path) -> str:
    """A schema-1 store (store_v1.sql: written by commbench before the split identity)."""
    with sqlite3.connect(path) as connection:
        connection.executescript((HERE / "store_v1.sql").read_text())
    connection.close()
    return sqlite_url(path)


def test_a_store_written_before_the_split_identity_opens_and_takes_alltoallv_runs(tmp_path):
    url = old_store(tmp_path / "old.db")
    with Store(url) as opened:  # reading alone migrates it
        assert opened.schema_version() == store.SCHEMA_VERSION == 2
        ((run_id, point),) = opened.points()
        columns = {c["name"] for c in sa.inspect(opened.engine).get_columns("commbench_points")}
    assert {"routing", "split_id"} <= columns
    assert (run_id, point.op, point.size_bytes, point.routing, point.split_id) == (
        "old-night", "allreduce", 8, "", "")
    assert point.lat_us == pytest.approx(300.2085073603398)
    add_runs(url, [make_alltoallv_run(tmp_path, f"z{n}", night(2 + n), "zipf:1.2", ZIPF_ID,
                                      ZIPF_COST, sizes=(1024,)) for n in range(2)])
    with Store(url) as opened:
        series = build_series(opened.runs(), opened.points())
    assert [(s.key.op, s.key.split_id, len(s.observations)) for s in series] == [
        ("allreduce", "", 1), ("alltoallv/dispatch", ZIPF_ID, 2)]


def test_the_migration_is_one_step_that_a_second_opening_does_not_repeat(tmp_path):
    url = old_store(tmp_path / "old.db")
    Store(url).close()
    with Store(url) as opened:
        assert opened.schema_version() == 2
    with sqlite3.connect(tmp_path / "old.db") as connection:
        table = connection.execute("SELECT sql FROM sqlite_master WHERE name = "
                                   "'commbench_points'").fetchone()[0]
    connection.close()
    assert table.count("routing") == 1 and table.count("split_id") == 1
    assert "DEFAULT ''" in table
