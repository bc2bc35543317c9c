"""``commbench stragglers``: who made a live job wait."""

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("stragglers")
    def stragglers(
        sources: list[str] = typer.Argument(..., help="A trace folder (commbench record, or "
                                            "an import), or Flight Recorder dumps: one file "
                                            "per rank, or their folder."),
        steps: Optional[str] = typer.Option(  # noqa: UP045
            None, "--steps", help="Only steps K..M (default: every step; set-up and a cut "
            "tail are left out)."),
        group: Optional[str] = typer.Option(  # noqa: UP045
            None, "--group", help="Only this process group's calls (its name in the trace)."),
        json_out: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
        out: Optional[str] = typer.Option(  # noqa: UP045
            None, "--out", help="Write stragglers.csv/.json, lateness.png, summary.md and "
            "run.json here."),
        force: bool = typer.Option(False, "--force", help="Replace a stragglers run in --out."),
    ) -> None:
        """Name the rank that made the others wait: calls matched across each group, every
        rank's lateness (on one host's clock, or clock-free from the waits), a verdict per
        rank (culprit, transient in steps k..m, ok) against the run's own noise, and a rank
        missing at call N in a hang. Exit 0 nobody late, 1 someone late or missing, 2 usage,
        3 an unreadable source."""
        import sys

        from commbench.commands.stragglers import run_stragglers
        from commbench.specs.stragglers import StragglersSpec, parse_steps

        spec = StragglersSpec(tuple(sources), parse_steps(steps), group, json_out, out, force,
                              ("commbench", *sys.argv[1:]))
        raise typer.Exit(run_stragglers(spec))
