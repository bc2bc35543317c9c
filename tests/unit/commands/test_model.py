"""commands/model.py through the real entry point: what it writes beside each run, its --json
(no infinity: JSON has none), and its refusals (one line, exit 2, nothing half-written)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.unit.history.cli_helper import run_cli

FIXTURES = Path(__file__).parents[2] / "fixtures"
WRITTEN = ("model.csv", "model.json", "latency.png")


def copy(tmp_path, name="model-exact") -> Path:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    return folder


def test_the_model_is_written_beside_the_run_and_named(tmp_path, capsys):
    run = copy(tmp_path)
    code, out, err = run_cli(capsys, "model", str(run))
    assert code == 0, err
    assert all((run / name).is_file() for name in WRITTEN)
    assert f"wrote {run / 'model.csv'}, {run / 'model.json'}, {run / 'latency.png'}" in out


def test_json_prints_the_document_it_wrote_with_no_infinity(tmp_path, capsys):
    run = copy(tmp_path)
    code, out, err = run_cli(capsys, "model", str(run), "--json")
    assert code == 0, err
    printed = json.loads(out, parse_constant=lambda name: (_ for _ in ()).throw(
        AssertionError(f"{name} is not JSON")))
    assert printed["segments"]
    assert printed == json.loads((run / "model.json").read_text(),
                                 parse_constant=lambda name: None)


def test_a_refused_run_leaves_no_model_written_for_the_others(tmp_path, capsys):
    """Every run is fitted before anything is written: a locate run among them is refused
    and the sweep before it gets no half-written model set."""
    run = copy(tmp_path)
    locate = tmp_path / "loc"
    locate.mkdir()
    (locate / "run.json").write_text(json.dumps({"command": "locate", "status": "complete"}))
    (locate / "pairs.jsonl").write_text('{"a": 0, "b": 1}\n')
    code, _, err = run_cli(capsys, "model", str(run), str(locate))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not any((run / name).exists() for name in WRITTEN)


def test_a_model_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, capsys):
    run = copy(tmp_path)
    (run / "model.csv").mkdir()  # a folder where the file goes
    code, out, err = run_cli(capsys, "model", str(run))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert f"cannot write the model beside {run}" in err
