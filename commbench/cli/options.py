"""Options that several commands share, declared once (pip's cmdoptions.py does the same).

Each factory returns a fresh ``typer.Option``; a command that needs another default or help
text passes it. Validation that an option always needs lives here with its declaration, so
``locate --timeout 0`` and ``allreduce --timeout 0`` are refused by the same words (a timeout of
0 used to reach the rendezvous of the commands that forgot to check it, and end in a
traceback).
"""

from __future__ import annotations

import math
from typing import Any

import typer

MIN_TIMEOUT_S = 1.0  # below this the ranks' own store connections time out before any call


def _positive_seconds(value: float | None) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise typer.BadParameter(f"{value:g}: it must be a positive number of seconds")
    if value is not None and value < MIN_TIMEOUT_S:
        # locate --timeout 0.001 ended in a DistNetworkError traceback: the store's own
        # connection got 1 ms to open.
        raise typer.BadParameter(f"{value:g}: at least {MIN_TIMEOUT_S:g} second is needed (a "
                                 "rank's store connection alone takes longer)")
    return value


def timeout(default: float, help: str) -> Any:  # noqa: A002 (typer's own name)
    """``--timeout/-T SECONDS``, refused unless positive."""
    return typer.Option(default, "--timeout", "-T", help=help, callback=_positive_seconds)


def results_root(default: str = "results", help: str = "Results root folder.") -> Any:  # noqa: A002
    """``--out DIR``: where the run folder is made."""
    return typer.Option(default, "--out", help=help)


def run_name(help: str = "Run folder name (default: a dated name).") -> Any:  # noqa: A002
    """``--name NAME``: the run folder's name under --out."""
    return typer.Option(None, "--name", help=help)


def force(help: str = "Replace a folder named --name.") -> Any:  # noqa: A002
    """``--force``: replace what --name (or --out) names instead of refusing."""
    return typer.Option(False, "--force", help=help)


def history_url() -> Any:
    """``--history URL``: add the run to a history store when it ends (docs/commands/history.md)."""
    return typer.Option(None, "--history", help="Add the run to this history store when it "
                        "ends (a SQLAlchemy URL, e.g. sqlite:///results/history.db); partial "
                        "runs are stored as partial.")


def json_output(help: str = "One JSON object on the last line of stdout (the table goes "  # noqa: A002
                "to stderr).") -> Any:
    """``--json``: machine-readable output on stdout."""
    return typer.Option(False, "--json", help=help)
