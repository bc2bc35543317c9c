"""What rank 0 and the measure command print: the end of a run's console output, the live
table's rows and footer, on stored fixture runs (tests/fixtures)."""

import json
from pathlib import Path

import pytest

from commbench.commands.measure import _show
from commbench.config import OutputSpec
from commbench.results import load_run

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize("json_rows", [False, True])
def test_json_keeps_the_warnings_on_stderr_and_stdout_pure(capsys, json_rows):
    run = load_run(str(FIXTURES / "noisy-a"))
    assert _show(run, OutputSpec(json_rows=json_rows)) == 0
    captured = capsys.readouterr()
    assert "rows are unstable" in captured.err
    where = captured.err if json_rows else captured.out
    assert f"results: {run.path}" in where
    if json_rows:  # stdout is JSON Lines and nothing else
        assert all(json.loads(line) for line in captured.out.splitlines())


def test_help_says_json_is_json_lines(capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit):
        main(["allreduce", "--help"])
    assert "JSON Lines" in " ".join(capsys.readouterr().out.replace("│", " ").split())
