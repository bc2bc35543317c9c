"""The shared option factories: one refusal for a bad --timeout in every command that takes it
(locate and replay used to pass 0 on to the rendezvous and end in a traceback)."""

from __future__ import annotations

import pytest

from commbench.cli import main

COMMANDS = (["allreduce"], ["locate"], ["replay", "no-such-trace"], ["doctor"], ["run"])


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "0.001"])
def test_a_timeout_that_is_not_positive_is_one_line_and_exit_2(command, value, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*command, "--timeout", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "--timeout" in err and "Traceback" not in err
    assert ("at least 1 second" if value == "0.001" else "positive") in err


@pytest.mark.parametrize("command", [["locate"], ["replay"], ["allreduce"], ["import", "osu"]],
                         ids=lambda c: c[0])
def test_the_shared_output_options_read_the_same_in_every_command(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    for flag in ("--out", "--name", "--force"):
        assert flag in text
