"""Run folders read into what the store keeps."""

from __future__ import annotations

import json

import pytest

from commbench.core.errors import UsageError
from commbench.history.ingest import read_run_folder, sweep_points
from tests.unit.history.runs import FIXTURES, make_locate_run, make_run, night


def test_a_sweep_gives_one_point_per_series_and_its_labels():
    run = read_run_folder(FIXTURES / "base", env={"GITHUB_SHA": "abc123"})
    labels = run.labels
    assert (labels.run_id, labels.status, labels.kind) == ("base", "complete", "sweep")
    assert (labels.cluster, labels.commit, labels.world_size, labels.backend) == (
        "ci-runner", "abc123", 2, "gloo")
    assert labels.torch == "2.13.0+cpu"
    assert labels.start_time == "2026-11-30T00:00:00+00:00"
    assert len(run.points) == 8
    assert {p.op for p in run.points} == {"allreduce", "allgather"}
    assert all(p.variant == "" for p in run.points)  # allreduce is in place by nature


def test_labels_given_by_the_caller_win():
    run = read_run_folder(FIXTURES / "base", cluster="a100-pod", commit="c0ffee",
                          env={"GITHUB_SHA": "abc123"})
    assert (run.labels.cluster, run.labels.commit) == ("a100-pod", "c0ffee")


def test_repeat_launches_are_pooled_into_one_point_per_series():
    rows = [json.loads(line) for line in
            (FIXTURES / "repeat" / "results.jsonl").read_text().splitlines()]
    points = sweep_points(rows)
    assert len(points) == len({(r["op"], r["size_bytes"]) for r in rows}) < len(rows)
    eight = [r["lat_us_p50"] for r in rows if r["size_bytes"] == 8]
    assert [p.lat_us for p in points if p.size_bytes == 8] == [sorted(eight)[1]]


def test_per_group_rows_are_left_out():
    rows = [json.loads(line) for line in
            (FIXTURES / "base" / "results.jsonl").read_text().splitlines()]
    rows.append({**rows[0], "group": 0, "lat_us_p50": 1e6})
    assert max(p.lat_us for p in sweep_points(rows)) < 1e6


def test_a_partial_run_says_so(tmp_path):
    folder = make_run(tmp_path, "cut", night(1), status="partial")
    assert read_run_folder(folder).labels.status == "partial"
    assert not read_run_folder(folder).labels.usable


def test_a_locate_run_keeps_its_entity_ratios(tmp_path):
    folder = make_locate_run(tmp_path, "burnin", night(1), {"n1": 1.0, "n2": 0.62})
    run = read_run_folder(folder)
    assert run.labels.kind == "locate"
    assert run.points == ()
    assert {(e.entity, e.level, e.busbw_ratio, e.verdict) for e in run.entities} == {
        ("n1", "node", 1.0, "ok"), ("n2", "node", 0.62, "bad")}


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    (tmp_path / "plots").mkdir()
    with pytest.raises(UsageError, match="is not a run folder"):
        read_run_folder(tmp_path / "plots")
    with pytest.raises(UsageError, match="no such folder"):
        read_run_folder(tmp_path / "nowhere")


def test_a_run_without_a_start_time_is_ordered_by_its_files_and_said(tmp_path):
    folder = make_run(tmp_path, "imported", night(1))
    meta = json.loads((folder / "run.json").read_text())
    del meta["start_time"], meta["end_time"]
    (folder / "run.json").write_text(json.dumps(meta))
    run = read_run_folder(folder)
    assert run.labels.start_time.endswith("+00:00")
    assert any("no start_time" in note for note in run.notes)
