"""``commbench history``: the run store's sub-commands (add, show, check, report, export).

Typer only: options in, a spec, a command from commbench.commands.history, its exit code out.
The store's driver (SQLAlchemy) and the analysis are imported inside the commands, so
``commbench --help`` stays fast.
"""

from typing import Optional

import typer

from commbench.cli import options

DEFAULT_DB = "sqlite:///results/history.db"  # commbench.history.store.DEFAULT_URL, not imported
DB_HELP = ("The store: a SQLAlchemy URL, e.g. sqlite:///results/history.db (the default, one "
           "file) or postgresql://USER@HOST/DB (a team's shared store).")

app = typer.Typer(
    name="history",
    help="Every run in one store: series across runs, change points, a dashboard, metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _db() -> typer.models.OptionInfo:
    return typer.Option(DEFAULT_DB, "--db", help=DB_HELP)


@app.command("add")
def add(
    runs: list[str] = typer.Argument(..., help="Run folders (sweeps or locate runs)."),
    db: str = _db(),
    cluster: Optional[str] = typer.Option(  # noqa: UP045
        None, "--cluster", help="The cluster label (default: the run's host list)."),
    commit: Optional[str] = typer.Option(  # noqa: UP045
        None, "--commit", help="The commit label (default: $GITHUB_SHA or $CI_COMMIT_SHA)."),
) -> None:
    """Add run folders to the store. A run already stored (same run id) is left as it is; a
    partial run is stored as partial: shown, never a baseline."""
    from commbench.commands.history import run_history_add

    raise typer.Exit(run_history_add(runs, db, cluster, commit))


@app.command("show")
def show(
    op: Optional[str] = typer.Option(None, "--op", help="Only this op, e.g. allreduce."),  # noqa: UP045
    size: Optional[str] = typer.Option(None, "--size", help="Only this size, e.g. 1M."),  # noqa: UP045
    backend: Optional[str] = typer.Option(None, "--backend", help="Only this backend."),  # noqa: UP045
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only this cluster."),  # noqa: UP045
    last: int = typer.Option(10, "--last", help="Runs shown per series (at least 1)."),
    db: str = _db(),
    json_out: bool = options.json_output("One JSON object on stdout, no table."),
    out: str = typer.Option("results/history", "--out",
                            help="Folder for the history-<series>.png trend plots."),
) -> None:
    """The series (one per op, size, backend, dtype, world size, mesh dim and cluster) as a table
    of the last N runs, and a trend plot per series with its change points marked."""
    from commbench.commands.history import ShowSpec, run_history_show

    raise typer.Exit(run_history_show(ShowSpec(db, op, size, backend, cluster, last, json_out,
                                                out)))


@app.command("check")
def check(
    threshold: str = typer.Option("5%", "--threshold", "-t",
                                  help="Smallest change of the mean that counts (5% or 0.05)."),
    last: int = typer.Option(5, "--last", help="Exit 1 when a regression starts within the "
                             "last K complete runs of a series."),
    db: str = _db(),
    json_out: bool = options.json_output("One JSON object on stdout, no table."),
) -> None:
    """Change points in every series (ruptures' PELT, kept by a permutation test): exit 1 when
    a regression lies within the last K runs, 0 otherwise; 3 when the store cannot be
    reached."""
    from commbench.commands.history import CheckSpec, run_history_check

    raise typer.Exit(run_history_check(CheckSpec(db, threshold, last, json_out)))


@app.command("report")
def report(
    out: str = typer.Option("results/history", "--out", help="Folder for history.html."),
    db: str = _db(),
    threshold: str = typer.Option("5%", "--threshold", "-t",
                                  help="Smallest change of the mean that counts."),
    last: int = typer.Option(10, "--last", help="Runs in the latest runs' table."),
) -> None:
    """Write a self-contained history.html: a trend per series with its change points, and the
    latest runs with their labels."""
    from commbench.commands.history import ReportSpec, run_history_report

    raise typer.Exit(run_history_report(ReportSpec(db, out, threshold, last)))


@app.command("export")
def export(
    format: str = typer.Option("openmetrics", "--format", help="openmetrics."),  # noqa: A002
    last: int = typer.Option(1, "--last", help="Newest complete runs per series (1 for a "
                             "node-exporter textfile collector; more carry timestamps)."),
    db: str = _db(),
    out: Optional[str] = typer.Option(  # noqa: UP045
        None, "--out", help="Write to this file, renamed into place (default: stdout)."),
) -> None:
    """The latest values as OpenMetrics text (commbench_busbw_gbps{op,size,backend,cluster,...}
    and friends) for Prometheus' node-exporter textfile collector."""
    from commbench.commands.history import ExportSpec, run_history_export

    raise typer.Exit(run_history_export(ExportSpec(db, format, last, out)))


def register(root: typer.Typer) -> None:
    """Add ``history`` to the root app."""
    root.add_typer(app, name="history")
