"""The command line: parse -> typed specs -> a command -> exit code.

Typer only: ``measuring`` holds the options of the measuring commands and turns them into a
MeasureSpec and an OutputSpec; ``tools`` the commands that read result folders (compare,
report, model, estimate, import) and doctor. torch, pandas and matplotlib are imported inside
the commands, so ``commbench --help`` and shell completion stay fast. Every default shown is
read from the specs in specs/, where it is stated once.
"""

import os
import sys

import typer

from commbench.cli import (
    ab,
    history,
    locating,
    measuring,
    recording,
    replaying,
    stragglers,
    tools,
)
from commbench.core.errors import EXIT_OK, EXIT_USAGE, CommbenchError
from commbench.launch.environment import one_intra_op_thread

app = typer.Typer(
    name="commbench",
    help="Measure collective communication through torch.distributed (NCCL on GPUs, gloo on "
    "CPUs): latency and bandwidth tables and plots in results/. " + measuring.METRICS_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, as click and nccl-tests print it: rich's boxed panels spend a third of an
    # 80-column terminal on borders and a type column (<str>, <list[str]>, <bool> on --help).
    rich_markup_mode=None,
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
locating.register(app)
recording.register(app)
replaying.register(app)
history.register(app)
stragglers.register(app)
ab.register(app)


def _plain_metavars(command) -> None:
    """Help says ``--timeout TIMEOUT`` and ``--json``, not typer's ``<float>`` and ``<bool>``
    (which it shows even for flags): a placeholder named after the option, nothing for a
    flag. Only what help prints changes; an explicit metavar is kept."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif getattr(param, "metavar", None) is None and param.name:
            param.metavar = param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


def click_command():
    """The click command ``main`` runs, with the help users see: also read by
    scripts/docs_options.py, which writes each docs/commands page's option table from it."""
    command = typer.main.get_command(app)
    _plain_metavars(command)
    return command


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure becomes one line on stderr and an exit code."""
    # c10d's C++ warnings (socket poll time-outs) would bury the one-line diagnosis.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    one_intra_op_thread()  # before torch is imported
    command = click_command()
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
            args = sys.argv[1:] if argv is None else argv
            print(f"error: {_explained(error.format_message(), args, command)}",
                  file=sys.stderr)
            sys.exit(error.exit_code if error.exit_code else EXIT_USAGE)
        raise
    _flush_stdout()
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _explained(message: str, args: list[str], root) -> str:
    """A parse error in words a user can act on: an option an op does not take names the ops
    that take it (typer would guess at similar spellings); an unknown subcommand names the
    one it abbreviates ('import nccl' -> nccl-tests)."""
    import re

    option = re.match(r"No such option: (-{1,2}[\w-]+)", message)
    if option and args and args[0] in measuring.OP_COMMANDS:
        takers = measuring.commands_taking(option.group(1))
        others = [name for name in measuring.OP_COMMANDS if name != args[0]]
        if takers == others:
            return f"{args[0]} does not take {option.group(1)}; every other op does"
        if takers:
            ops = takers[0] if len(takers) == 1 else (
                f"{', '.join(takers[:-1])} and {takers[-1]}")
            return f"{args[0]} does not take {option.group(1)}; it is an option of {ops} (and run)"
        return message
    command = re.match(r"No such command '([^']+)'", message)
    if command and "Did you mean" not in message:
        group = root
        for arg in args:  # the group the unknown name was looked up in
            found = getattr(group, "commands", {}).get(arg)
            if found is None or not getattr(found, "commands", None):
                break
            group = found
        names = sorted(getattr(group, "commands", {}))
        close = [n for n in names if n.startswith(command.group(1))]
        if not close:
            import difflib

            close = difflib.get_close_matches(command.group(1), names, n=2)
        if close:
            return f"{message} Did you mean {' or '.join(close)}? (choose from {', '.join(names)})"
    return message


def _flush_stdout() -> None:
    """A reader that left (``| head``) is no failure: the exit code stays the command's."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        from commbench.core.streams import to_devnull

        to_devnull(sys.stdout)



