"""commands/report.py through the real entry point: folders that are not runs are skipped with
a note (``report results/*`` matches the report's own folder), no run at all is one line and
exit 2, and so is an --out that cannot be made."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.unit.history.cli_helper import run_cli

BASE = Path(__file__).parents[2] / "fixtures" / "base"


def test_no_run_folder_among_the_arguments_is_one_line_and_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_cli(capsys, "report", str(empty), "--out", str(tmp_path / "r"))
    assert code == 2, err
    assert err.splitlines() == [f"note: skipping {empty}: not a run folder (no results.jsonl)",
                                "error: no run folders among the arguments"]
    assert not (tmp_path / "r").exists()


def test_the_reports_own_folder_is_skipped_and_the_runs_reported(tmp_path, capsys):
    run = tmp_path / "base"
    shutil.copytree(BASE, run)
    old = tmp_path / "report"
    old.mkdir()
    code, out, err = run_cli(capsys, "report", str(run), str(old), "--out", str(old))
    assert code == 0, err
    assert f"note: skipping {old}: not a run folder" in err
    assert (old / "report.md").is_file() and f"wrote {old / 'report.md'}" in out


def test_an_out_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("in the way")
    code, out, err = run_cli(capsys, "report", str(BASE), "--out",
                             str(tmp_path / "file" / "r"))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert f"cannot write --out {tmp_path / 'file' / 'r'}" in err
