"""A run folder of another kind is named as such (issue 29 point 12): compare, model, estimate
and replay --curves given a locate run used to say "no results at ...", as if the folder were
not a run at all; an empty interrupted run now says what its run.json says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from commbench.cli import main
from commbench.results import NotASweep, folder_kind, load_run

BASE = Path(__file__).parents[2] / "fixtures" / "base"


def _locate_run(root: Path) -> Path:
    folder = root / "loc1"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"command": "locate", "status": "complete"}))
    (folder / "pairs.jsonl").write_text('{"a": 0, "b": 1}\n')
    return folder


def _replay_run(root: Path) -> Path:
    folder = root / "rep1"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"command": "replay", "status": "complete"}))
    (folder / "replayed.jsonl").write_text("{}\n")
    return folder


def _one_line_exit_2(args, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_each_kind_of_folder_is_told_apart(tmp_path):
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "rank-0.jsonl").write_text("{}\n")
    assert folder_kind(BASE) == "sweep"
    assert folder_kind(_locate_run(tmp_path)) == "locate"
    assert folder_kind(_replay_run(tmp_path)) == "replay"
    assert folder_kind(trace) == "trace"
    assert folder_kind(tmp_path) is None


def test_loading_a_locate_run_as_a_sweep_names_its_kind(tmp_path):
    with pytest.raises(NotASweep) as refused:
        load_run(_locate_run(tmp_path))
    assert refused.value.kind == "locate" and "is a locate run" in str(refused.value)


@pytest.mark.parametrize("command", [
    ["model"], ["estimate", "--params", "1B", "--dp", "2", "--run"],
])
def test_analysis_commands_name_a_locate_run(command, tmp_path, capsys):
    err = _one_line_exit_2([*command, str(_locate_run(tmp_path))], capsys)
    assert "is a locate run, not a sweep" in err


def test_compare_of_a_sweep_and_a_locate_run_says_what_it_needs(tmp_path, capsys):
    err = _one_line_exit_2(["compare", str(BASE), str(_locate_run(tmp_path))], capsys)
    assert "is a locate run: compare needs two sweeps or two locate runs" in err


def test_an_empty_interrupted_run_is_named_with_its_status(tmp_path, capsys):
    empty = tmp_path / "cut"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"status": "failed", "error": "interrupted"}))
    (empty / "results.jsonl").write_text("")
    err = _one_line_exit_2(["compare", str(BASE), str(empty)], capsys)
    assert str(empty) in err and "failed: interrupted" in err and str(BASE) not in err


def test_report_names_a_replay_run_it_skips(tmp_path, capsys):
    copy = tmp_path / "base"
    shutil.copytree(BASE, copy)
    with pytest.raises(SystemExit) as exited:
        main(["report", str(copy), str(_replay_run(tmp_path)), "--out", str(tmp_path / "r")])
    assert exited.value.code == 0
    assert "rep1: a replay run (report shows sweeps and locate runs" in capsys.readouterr().err
    assert (tmp_path / "r" / "report.md").is_file()
