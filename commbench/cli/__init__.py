"""The command line: parse -> typed specs -> a command -> exit code.

Typer only: ``measuring`` holds the options of the measuring commands and turns them into a
MeasureSpec and an OutputSpec; ``tools`` the commands that read result folders (compare,
report, model, estimate, import) and doctor. torch, pandas and matplotlib are imported inside
the commands, so ``commbench --help`` and shell completion stay fast. Every default shown is
read from the specs in config.py, where it is stated once.
"""

import os
import sys

import typer

from commbench.cli import measuring, tools
from commbench.errors import EXIT_OK, EXIT_USAGE, CommbenchError

app = typer.Typer(
    name="commbench",
    help="Measure collective communication through torch.distributed (NCCL on GPUs, gloo on "
    "CPUs): latency and bandwidth tables and plots in results/. " + measuring.METRICS_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from commbench import __version__

        print(f"commbench {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Measure collective communication through torch.distributed."""



measuring.register(app)
tools.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure becomes one line on stderr and an exit code."""
    # c10d's C++ warnings (socket poll time-outs) would bury the one-line diagnosis.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    command = typer.main.get_command(app)
    try:
        code = command.main(
            args=sys.argv[1:] if argv is None else argv,
            prog_name="commbench",
            standalone_mode=False,
        )
    except CommbenchError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # a reader that left (compare ... | head) is no failure
        code = EXIT_OK
    except Exception as error:
        # Parse errors from typer: one line, exit 2, no traceback.
        if hasattr(error, "format_message") and hasattr(error, "exit_code"):
            print(f"error: {error.format_message()}", file=sys.stderr)
            sys.exit(error.exit_code if error.exit_code else EXIT_USAGE)
        raise
    _flush_stdout()
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _flush_stdout() -> None:
    """A reader that left (``| head``) is no failure: the exit code stays the command's."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        from commbench.output.console import to_devnull

        to_devnull(sys.stdout)



