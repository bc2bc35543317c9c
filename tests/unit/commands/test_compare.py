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
