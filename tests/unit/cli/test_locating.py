"""locate's options (cli.locating)."""

from __future__ import annotations

import pytest

from commbench.cli import main


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_locate_takes_quiet_like_every_measuring_command(flag, tmp_path, capsys):
    """`locate -q` was refused ("No such option"); taken, the run goes on to its own checks
    (here a bad --level: exit 2 before anything starts)."""
    with pytest.raises(SystemExit) as stopped:
        main(["locate", flag, "--level", "bogus", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("error: bad --level 'bogus'"), err
