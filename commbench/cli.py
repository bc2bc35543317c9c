"""The command line: parse -> a frozen RunConfig -> launch -> render -> exit code.

The only module that imports typer and rich. torch, pandas and matplotlib are imported inside
the commands, so ``commbench --help`` and shell completion stay fast.
"""


import inspect
import os
import sys
from typing import Optional

import typer

from commbench import collectives
from commbench.config import DEFAULT_MIN_TIME, DEFAULT_SIZES, DEFAULT_TIMEOUT
from commbench.errors import EXIT_OK, EXIT_USAGE, CommbenchError

METRICS_HELP = (
    "Time = median over samples of the slowest rank's time per call. "
    "algbw = size / time; busbw = algbw x factor (nccl-tests): allreduce 2(n-1)/n; "
    "allgather, reduce-scatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce 1; "
    "p2p 1 (bidir 2). GB/s = 1e9 bytes/s."
)

app = typer.Typer(
    name="commbench",
    help="Measure collective communication through torch.distributed (NCCL on GPUs, gloo on "
    "CPUs): latency and bandwidth tables and plots in results/. " + METRICS_HELP,
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


def _measuring_options(
    sizes: str = typer.Option(
        DEFAULT_SIZES, "--sizes", "-s",
        help="Sizes and ranges, e.g. 8-64M or 1K,64K,1M; bytes of the largest buffer per rank; "
        "units B, K, M, G are powers of 1024.",
    ),
    factor: float = typer.Option(2.0, "--factor", "-f", help="Multiplicative step of ranges."),
    backend: str = typer.Option(
        "auto", "--backend", "-b",
        help="gloo, nccl, or a list (gloo,nccl) measured side by side; auto: nccl with GPUs.",
    ),
    device: str = typer.Option("auto", "--device", help="cpu or cuda (auto: cuda for nccl)."),
    nproc: Optional[int] = typer.Option(  # noqa: UP045 (typer reads the annotation)
        None, "--nproc", "-n", help="Local ranks to start (default: GPUs for nccl, else 2)."
    ),
    dtype: str = typer.Option("float32", "--dtype", "-d", help="float32, float16, bfloat16, "
                              "float64, int8, uint8, int32 or int64."),
    op: str = typer.Option("sum", "--op", help="Reduction: sum, prod, min, max or avg."),
    root: int = typer.Option(0, "--root", help="Root rank of rooted collectives."),
    pattern: str = typer.Option(
        "pingpong", "--pattern",
        help="p2p pattern(s): pingpong, unidir, bidir, ring, a list, or all.",
    ),
    ops: str = typer.Option("allreduce", "--ops", help="Ops to run (comma list, or all)."),
    warmup: Optional[int] = typer.Option(  # noqa: UP045
        None, "--warmup", "-w", help="Untimed iterations per size (default: up to 5)."
    ),
    iters: Optional[int] = typer.Option(  # noqa: UP045
        None, "--iters", "-i", help="Fixed timed iterations per size (default: adaptive)."
    ),
    min_time: float = typer.Option(
        DEFAULT_MIN_TIME, "--min-time", help="Seconds of timed work per size (adaptive mode)."
    ),
    check: bool = typer.Option(
        True, "--check/--no-check", help="Verify every result element after timing."
    ),
    inplace: bool = typer.Option(False, "--inplace", help="In-place variant where one exists."),
    blocking: bool = typer.Option(
        False, "--blocking", help="CUDA: wait for each call before the next (nccl-tests -z 1)."
    ),
    cuda_graph: bool = typer.Option(
        False, "--cuda-graph", help="CUDA: capture a block in a CUDA graph, time replays."
    ),
    host_timer: bool = typer.Option(
        False, "--host-timer", help="CUDA: time with the host clock around a synchronize "
        "(nccl-tests' method) instead of CUDA events."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT, "--timeout", help="Seconds before a hung collective ends the run."
    ),
    out: str = typer.Option("results", "--out", "-o", help="Results root folder."),
    name: Optional[str] = typer.Option(None, "--name", help="Run name (folder name)."),  # noqa: UP045
    json_rows: bool = typer.Option(False, "--json", help="JSON rows on stdout, no table."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> dict:
    return dict(locals())


_COMMON = inspect.signature(_measuring_options)
_ONLY = {"root": "rooted", "pattern": "p2p", "ops": "run"}
_UNSIZED = {"sizes", "factor", "op", "inplace", "dtype", "root", "pattern"}


def _command_for(names: tuple[str, ...] | None, description: str, *, rooted: bool, p2p: bool,
                 sized: bool, reduces: bool):
    """A typer command with the shared options, minus those that mean nothing for it."""

    def command(**options) -> None:
        ops = names or _parse_ops(options.pop("ops"))
        _exit(_measure(ops, options))

    keep = []
    for parameter in _COMMON.parameters.values():
        role = _ONLY.get(parameter.name)
        if role == "rooted" and not rooted:
            continue
        if role == "p2p" and not p2p:
            continue
        if role == "run" and names is not None:
            continue
        if not sized and parameter.name in _UNSIZED:
            continue
        if parameter.name == "op" and not reduces:
            continue
        keep.append(parameter)
    command.__signature__ = _COMMON.replace(parameters=keep, return_annotation=None)
    command.__doc__ = description + "\n\n" + METRICS_HELP
    return command


def _parse_ops(text: str) -> tuple[str, ...]:
    from commbench.config import parse_ops

    return parse_ops(text)


for _op in collectives.REGISTRY.values():
    app.command(_op.name)(
        _command_for(
            (_op.name,),
            f"{_op.summary} busbw factor: {_op.factor_text}.",
            rooted=_op.rooted,
            p2p=_op.name == "p2p",
            sized=_op.sized,
            reduces=_op.reduces,
        )
    )
app.command("run")(
    _command_for(
        None,
        "Run several ops (--ops allreduce,allgather or --ops all) in one launch, one folder.",
        rooted=True,
        p2p=True,
        sized=True,
        reduces=True,
    )
)


@app.command("doctor")
def doctor(
    nproc: Optional[int] = typer.Option(  # noqa: UP045
        None, "--nproc", "-n", help="Local ranks to start (default 2; not under a launcher)."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for every rank."),
    backend: str = typer.Option("gloo", "--backend", "-b", help="Backend(s) to try."),
) -> None:
    """Preflight: versions, devices, launcher, then a rendezvous, barrier and tiny allreduce
    across all ranks, naming any rank that does not arrive."""
    from commbench.doctor import run_doctor

    _exit(run_doctor(nproc, timeout, backend))


@app.command("compare")
def compare(
    runs: list[str] = typer.Argument(..., help="Result folders (or their results.jsonl): "
                                     "BASE NEW [NEW ...]; one run compares its backends."),
    threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that "
                                  "counts (5% or 0.05)."),
    metric: str = typer.Option("lat_us_p50", "--metric", help="lat_us_p50 or busbw_gbps."),
    sizes: Optional[str] = typer.Option(  # noqa: UP045
        None, "--sizes", "-s", help="Only these sizes or ranges, e.g. 1M-1G."
    ),
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="Exit 1 when any row is slower."
    ),
    markdown: Optional[str] = typer.Option(  # noqa: UP045
        None, "--markdown", help="Append the table as Markdown (e.g. $GITHUB_STEP_SUMMARY)."
    ),
    json_rows: bool = typer.Option(False, "--json", help="JSON rows on stdout, no table."),
    out: Optional[str] = typer.Option(  # noqa: UP045
        None, "--out", "-o", help="Folder for the overlay plots (default: none)."
    ),
) -> None:
    """Compare runs: baseline, new, ratio and a verdict per (op, backend, size). A row is slower
    only beyond --threshold AND when the 95% intervals of the medians do not overlap."""
    from commbench.compare_command import run_compare

    _exit(run_compare(runs, threshold, metric, sizes, fail_on_regression, markdown, json_rows,
                      out))


@app.command("report")
def report(
    runs: list[str] = typer.Argument(..., help="Result folders to report on."),
    out: str = typer.Option("results/report", "--out", "-o", help="Folder for the report."),
) -> None:
    """Write report.md and a self-contained report.html (plots embedded) over the runs."""
    from commbench.report import build

    md_path, html_path = build(runs, out)
    print(f"wrote {md_path} and {html_path}")


def _measure(ops: tuple[str, ...], options: dict) -> int:
    from commbench.measure_command import measure

    return measure(ops, options)


def _exit(code: int) -> None:
    raise typer.Exit(code)


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
    except Exception as error:
        # Parse errors from typer: one line, exit 2, no traceback.
        if hasattr(error, "format_message") and hasattr(error, "exit_code"):
            print(f"error: {error.format_message()}", file=sys.stderr)
            sys.exit(error.exit_code if error.exit_code else EXIT_USAGE)
        raise
    sys.exit(code if isinstance(code, int) else EXIT_OK)



