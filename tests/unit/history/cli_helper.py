"""Drive the real CLI entry point (its error mapping included) in this process."""

from __future__ import annotations

import pytest


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``commbench ARGS`` through commbench.cli.main: (exit code, stdout, stderr)."""
    from commbench.cli import app, history, main

    if not any(group.name == "history" for group in app.registered_groups):
        history.register(app)  # until cli/__init__.py registers it itself
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    captured = capsys.readouterr()
    return ended.value.code, captured.out, captured.err
