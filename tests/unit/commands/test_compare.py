"""compare's CI gate (commands/compare.py run_compare): it never passes on a gap."""

import json
from pathlib import Path

import pytest

from commbench.cli import main

FIXTURES = Path(__file__).parents[2] / "fixtures"


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def copy_of_base(tmp_path, name, keep=lambda row: True, change=lambda row: {}):
    """The base fixture, complete, with some rows dropped or changed."""
    source = FIXTURES / "base"
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    rows = [{**r, **change(r)} for r in rows if keep(r)]
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((source / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "name": name}))
    return str(folder)


def test_the_gate_passes_two_identical_complete_runs(tmp_path, capsys):
    code, _, err = run(["compare", str(FIXTURES / "base"), copy_of_base(tmp_path, "same"),
                        "--fail-on-regression"], capsys)
    assert code == 0, err


def test_the_gate_fails_when_a_complete_run_lacks_sizes(tmp_path, capsys):
    largest = max(json.loads(line)["size_bytes"] for line in
                  (FIXTURES / "base" / "results.jsonl").read_text().splitlines())
    new = copy_of_base(tmp_path, "fewer", keep=lambda r: r["size_bytes"] != largest)
    code, _, err = run(["compare", str(FIXTURES / "base"), new, "--fail-on-regression"],
                       capsys)
    assert code == 1, err
    assert "lack sizes the other run has" in err


def test_the_gate_fails_when_rows_are_kept_apart(tmp_path, capsys):
    """A row measured differently (out of place here) is not compared: no verdict, no pass."""
    smallest = min(json.loads(line)["size_bytes"] for line in
                   (FIXTURES / "base" / "results.jsonl").read_text().splitlines())
    new = copy_of_base(tmp_path, "apart", change=lambda r: {"inplace": False}
                       if r["size_bytes"] == smallest else {})
    code, _, err = run(["compare", str(FIXTURES / "base"), new, "--fail-on-regression"],
                       capsys)
    assert code == 1, err
    assert "kept apart, not compared" in err


def one_line_exit_2(args, capsys) -> str:
    """A refusal: exit 2, one line on stderr, no traceback."""
    code, out, err = run(args, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in out + err
    return err


def test_a_trace_folder_is_named_a_folder_not_a_run(tmp_path, capsys):
    """_refuse_mixed_kinds: a trace is "a trace folder" (it has no run.json), a replay "a
    replay run"; neither is compared as if it were a sweep."""
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "rank-0.jsonl").write_text("{}\n")
    err = one_line_exit_2(["compare", str(FIXTURES / "base"), str(trace)], capsys)
    assert f"{trace} is a trace folder: compare needs two sweeps or two locate runs" in err
    replay = tmp_path / "rep"
    replay.mkdir()
    (replay / "run.json").write_text(json.dumps({"command": "replay", "status": "complete"}))
    (replay / "replayed.jsonl").write_text("{}\n")
    err = one_line_exit_2(["compare", str(replay), str(FIXTURES / "base")], capsys)
    assert f"{replay} is a replay run: compare needs" in err


def test_an_out_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("in the way")
    err = one_line_exit_2(["compare", str(FIXTURES / "base"), copy_of_base(tmp_path, "same"),
                           "--out", str(tmp_path / "file" / "cmp")], capsys)
    assert f"cannot write --out {tmp_path / 'file' / 'cmp'}" in err


def test_out_writes_the_comparison_as_json(tmp_path, capsys):
    code, _, err = run(["compare", str(FIXTURES / "base"), copy_of_base(tmp_path, "same"),
                        "--out", str(tmp_path / "cmp")], capsys)
    assert code == 0, err
    written = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert written  # the rows and the summary the table showed, for a script to read


def test_noise_from_an_absent_store_is_one_line_and_exit_2(tmp_path, capsys):
    err = one_line_exit_2(["compare", str(FIXTURES / "base"), copy_of_base(tmp_path, "same"),
                           "--noise-from", str(tmp_path / "absent.db")], capsys)
    assert "no history store at" in err
