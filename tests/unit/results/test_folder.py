"""The one loader of run folders, and every way a folder can be damaged: each gives one line and
exit code 2 at the command line, never a traceback, except a line cut short at the end (what a
killed writer leaves), which is skipped with a warning."""

import json
import shutil
from pathlib import Path

import pytest

from commbench.cli import main
from commbench.core.errors import UsageError
from commbench.results import create, load_run, read_rows
from commbench.results.schema import COLUMNS, DEFAULTS, row_problem, with_defaults

FIXTURES = Path(__file__).parents[2] / "fixtures"


def copy_base(tmp_path, name="run"):
    folder = tmp_path / name
    shutil.copytree(FIXTURES / "base", folder)
    return folder


def lines_of(folder):
    return (folder / "results.jsonl").read_text().splitlines()


def write_lines(folder, lines):
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def cli(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda row: {**row, "size_bytes": "8"}, "'size_bytes' is '8', not an integer"),
        (lambda row: {**row, "inplace": "yes"}, "'inplace' is 'yes', not true or false"),
        (lambda row: {**row, "lat_us_p50": None}, "'lat_us_p50' is None, not a number"),
        (lambda row: [row], "a row must be a JSON object, not list"),
        (lambda row: {k: v for k, v in row.items() if k != "size_bytes"},
         "the row has no 'size_bytes'"),
    ],
)
def test_a_damaged_row_is_one_line_naming_file_and_line(tmp_path, capsys, damage, message):
    folder = copy_base(tmp_path)
    lines = lines_of(folder)
    lines[2] = json.dumps(damage(json.loads(lines[2])))
    write_lines(folder, lines)
    code, _, err = cli(["compare", str(folder), str(FIXTURES / "base")], capsys)
    assert code == 2, err
    assert err == f"error: {folder / 'results.jsonl'}:3: {message}\n"


def test_a_line_cut_short_at_the_end_is_skipped_with_a_warning(tmp_path, capsys):
    folder = copy_base(tmp_path)
    lines = lines_of(folder)
    write_lines(folder, [*lines[:-1], lines[-1][: len(lines[-1]) // 2]])
    run = load_run(folder)
    assert len(run.rows) == len(lines) - 1
    assert "results.jsonl:8 is cut short" in run.warnings[0]
    code, _, err = cli(["compare", str(folder), str(FIXTURES / "base")], capsys)
    assert code == 0 and "cut short (a killed writer?): skipped" in err
    with pytest.raises(UsageError, match=":8 is not JSON"):
        load_run(folder, strict=True)


def test_a_broken_line_in_the_middle_is_refused(tmp_path):
    folder = copy_base(tmp_path)
    lines = lines_of(folder)
    write_lines(folder, [lines[0], "{not json", *lines[1:]])
    with pytest.raises(UsageError, match="results.jsonl:2 is not JSON"):
        load_run(folder)


def test_a_corrupt_run_json_is_reported_not_ignored(tmp_path, capsys):
    folder = copy_base(tmp_path)
    (folder / "run.json").write_text('{"name": "run", "status": ')
    run = load_run(folder)
    assert run.meta == {} and "run.json is corrupt" in run.warnings[0]
    code, _, err = cli(["compare", str(folder), str(folder)], capsys)
    assert code == 0 and err.count("run.json is corrupt") == 2


def test_a_newer_format_is_refused_in_one_line(tmp_path, capsys):
    folder = copy_base(tmp_path)
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "format_version": "2.0"}))
    code, _, err = cli(["compare", str(folder), str(FIXTURES / "base")], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "results format 2.0, newer than this commbench reads" in err


def test_an_unwritable_compare_out_is_one_line_after_the_table(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = cli(["compare", str(FIXTURES / "base"), str(FIXTURES / "slower"), "--out",
                          str(blocker / "plots")], capsys)
    assert code == 2 and "8 slower" in out  # the table came first
    assert err.splitlines()[-1].startswith("error: cannot write --out")
    assert "Traceback" not in err


def test_an_unwritable_report_out_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = cli(["report", str(FIXTURES / "base"), "--out", str(blocker / "r")], capsys)
    assert code == 2 and err.startswith("error: cannot write --out") and err.count("\n") == 1


def test_older_rows_take_the_schema_defaults():
    row = json.loads(lines_of(FIXTURES / "base")[0])
    assert "rank_time" not in row
    filled = with_defaults(row)
    assert set(COLUMNS) <= set(filled)
    assert filled["group_size"] == row["world_size"] and filled["source"] == "commbench"
    assert filled["rank_time"] == DEFAULTS["rank_time"] == "max"  # how those rows were timed
    assert row_problem(filled) == ""


def test_a_taken_name_is_refused_unless_forced(tmp_path):
    first = create(str(tmp_path), "nightly")
    (first / "results.jsonl").write_text("{}\n")
    with pytest.raises(UsageError, match="already exists: choose another --name, or add --force"):
        create(str(tmp_path), "nightly")
    again = create(str(tmp_path), "nightly", force=True)
    assert again == first and read_rows(again) == []
    stamped = create(str(tmp_path), "nightly", generated=True)
    assert stamped.name == "nightly-2"


def test_a_run_interrupted_after_its_last_planned_row_is_complete(tmp_path):
    from commbench.commands.measure import finish

    folder = copy_base(tmp_path)
    rows = len(lines_of(folder))
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "planned_rows": rows}))
    assert finish(folder, "partial", "stopped by SIGINT").meta["status"] == "complete"
    (folder / "run.json").write_text(json.dumps({**meta, "planned_rows": rows + 1}))
    run = finish(folder, "partial", "stopped by SIGINT")
    assert run.meta["status"] == "partial" and run.meta["error"] == "stopped by SIGINT"


def test_a_run_cut_inside_its_rounds_is_partial_even_with_a_row_for_every_size(tmp_path):
    """A rank killed in the last op's rounds: rank 0 writes every size it had begun, unchecked
    and short of rounds (measure.sweep). Seen on torch 2.4.1: 22 of 22 planned rows, all from 1
    of 5 rounds, and run.json said complete, so the gate would have taken it."""
    from commbench.commands.measure import finish
    from commbench.results.schema import CUT_SHORT

    folder = copy_base(tmp_path)
    rows = [json.loads(line) for line in lines_of(folder)]
    (folder / "results.jsonl").write_text(
        "".join(json.dumps({**row, "validation": CUT_SHORT}) + "\n" for row in rows))
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "planned_rows": len(rows)}))
    run = finish(folder, "partial", "rank 1 died (SIGKILL)")
    assert run.meta["status"] == "partial" and run.meta["error"] == "rank 1 died (SIGKILL)"
