"""history: every run in one store, series across runs, change points found
(docs/commands/history.md).

``store`` is the database (SQLAlchemy Core, schema versioned), ``ingest`` reads run folders,
``series`` follows one quantity across runs, ``changepoints`` is the pure detection, and
``openmetrics`` the export. Nothing here imports torch: the store is read on laptops and CI
runners that never measure.

``add_finished_run`` is what a measuring command (or locate) calls when its run ends with
``--history URL``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["add_finished_run", "add_runs", "check_store_url"]


def add_runs(url: str, folders: list[str | Path], *, cluster: str | None = None,
             commit: str | None = None) -> list[str]:
    """Add run folders to the store at ``url``; one line per run saying what happened.

    Every folder is read before the store is touched, so a bad folder among many adds nothing.
    """
    from commbench.history.ingest import describe, read_run_folder
    from commbench.history.store import Store

    ingested = [read_run_folder(folder, cluster=cluster, commit=commit) for folder in folders]
    lines = []
    with Store(url, create=True) as store:
        for run in ingested:
            lines += [f"note: {note}" for note in run.notes]
            added = store.add(run)
            verb = "added" if added else "already stored"
            lines.append(f"{verb}: {describe(run)} in {store.shown}")
    return lines


def add_finished_run(url: str, folder: Path, *, cluster: str | None = None,
                     commit: str | None = None) -> str:
    """Add the run that just ended to the history store; returns the one line to print.

    Raises commbench.core.errors errors (UsageError: exit 2; StoreUnreachable: exit 3) with the
    text the user sees. A partial run is stored as partial: shown, never a baseline.
    """
    return add_runs(url, [folder], cluster=cluster, commit=commit)[-1]


def add_ended_run(url: str, folder: Path, failed: bool, say: Callable[[str], None]) -> None:
    """``--history`` at the end of a measuring or locate run: add it and ``say`` the line. A
    failed run keeps its own exit code, so the store's trouble is then only a warning; after
    a run that succeeded it is raised (exit 2 or 3)."""
    from commbench.core.errors import CommbenchError

    try:
        say(add_finished_run(url, folder))
    except CommbenchError as error:
        if not failed:
            raise
        say(f"warning: the run was not added to {url}: {error}")


def check_store_url(url: str) -> None:
    """Refuse a bad ``--history`` URL (syntax, unknown scheme, missing driver) before a run
    starts, not after it: nothing is connected to or created. Raises UsageError (exit 2)."""
    from commbench.history.store import _engine

    _engine(url).dispose()
