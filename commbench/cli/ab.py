"""``commbench ab``: one measuring command as side A and side B in alternated launches."""

from typing import Optional

import typer

from commbench.cli import options
from commbench.specs.ab import DEFAULT_PAIRS


def register(app: typer.Typer) -> None:
    @app.command("ab", context_settings={"allow_extra_args": True,
                                         "ignore_unknown_options": True})
    def ab(
        command: Optional[list[str]] = typer.Argument(  # noqa: UP045
            None, metavar="-- COMMAND [OPTIONS...]", help="The measuring command both sides "
            "run, after --: allreduce --sizes 1M-64M --nproc 2 ..."
        ),
        pairs: int = typer.Option(DEFAULT_PAIRS, "--pairs", help="Pairs of launches (A B, "
                                  "then B A, ...)."),
        env_a: Optional[list[str]] = typer.Option(  # noqa: UP045
            None, "--env-a", help="NAME=VALUE set for side A's launches (repeatable)."),
        env_b: Optional[list[str]] = typer.Option(  # noqa: UP045
            None, "--env-b", help="NAME=VALUE set for side B's launches (repeatable)."),
        python_a: Optional[str] = typer.Option(  # noqa: UP045
            None, "--python-a", help="Python of side A (default: this one); commbench must "
            "import there."),
        python_b: Optional[str] = typer.Option(  # noqa: UP045
            None, "--python-b", help="Python of side B (default: this one)."),
        threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that "
                                      "counts (5% or 0.05)."),
        alpha: str = typer.Option("1%", "--alpha", help="Family-wise level of the gate "
                                  "(Holm over the rows)."),
        fail_on_regression: bool = typer.Option(
            False, "--fail-on-regression", help="Exit 1 when a row of B is slower than A "
            "family-wise, or a launch failed."),
        markdown: Optional[str] = typer.Option(  # noqa: UP045
            None, "--markdown", help="Append the table as Markdown (e.g. $GITHUB_STEP_SUMMARY)."),
        json_rows: bool = typer.Option(False, "--json", help="JSON rows on stdout, no table."),
        out: str = options.results_root(),
        name: Optional[str] = options.run_name("Folder name under --out (default: "  # noqa: UP045
                                               "ab-<time>); it holds A/, B/ and launches/."),
        force: bool = options.force(),
    ) -> None:
        """Run COMMAND as side A and side B in alternated launches (A B B A A B ...), so the
        machine's slow spells land on both, and judge each row on its paired launch ratios
        B/A (Student's t over the pairs): compare's table, verdicts and exit codes. A/ and B/
        are --repeat folders (compare A B pools them too). Identical sides are the runner's
        own false-alarm check."""
        from commbench.cli.measuring import OP_COMMANDS
        from commbench.commands.ab import run_ab
        from commbench.compare.familywise import parse_alpha
        from commbench.compare.runs import parse_threshold
        from commbench.specs.ab import ABSpec, check_command, check_pairs, parse_env

        spec = ABSpec(
            command=check_command(list(command or []), (*OP_COMMANDS, "run")),
            pairs=check_pairs(pairs), env_a=parse_env(env_a or [], "--env-a"),
            env_b=parse_env(env_b or [], "--env-b"), python_a=python_a, python_b=python_b,
            threshold=parse_threshold(threshold), alpha=parse_alpha(alpha),
            fail_on_regression=fail_on_regression, markdown=markdown, json_rows=json_rows,
            out=out, name=name, force=force)
        raise typer.Exit(run_ab(spec))
