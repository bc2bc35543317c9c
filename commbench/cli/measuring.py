"""The measuring commands' options (nccl-tests' and OSU's short flags where they mean the
same), which of them each op takes (its descriptor says), and the typed specs they become."""

import inspect
import sys
from dataclasses import replace
from typing import Optional

import typer

from commbench import collectives
from commbench.cli import contention, op_options, options
from commbench.core.errors import UsageError
from commbench.specs.contention import parse_background, parse_overlap, parse_ranks
from commbench.specs.measure import (
    BACKENDS,
    DEFAULT_FACTOR,
    DEFAULT_SIZES,
    DEFAULTS,
    OUTPUT_DEFAULTS,
    MeasureSpec,
    OutputSpec,
    parse_dims,
    parse_dtype,
    parse_list,
    parse_mesh,
    parse_ops,
    parse_patterns,
    parse_peers,
    parse_rank_time,
    parse_split,
    sweep_sizes,
)

METRICS_HELP = (
    "Time = median over samples of the per-rank times per call combined as --rank-time says "
    "(default: the average over ranks, as nccl-tests). "
    "algbw = size / time; busbw = algbw x factor (nccl-tests): "
    + collectives.busbw_factors_text()
    + ". GB/s = 1e9 bytes/s."
)


def _measuring_options(
    sizes: Optional[str] = typer.Option(  # noqa: UP045 (typer reads the annotation)
        None, "--sizes", "-s", show_default=DEFAULT_SIZES,
        help="Sizes and ranges, e.g. 8-64M or 1K,64K,1M; bytes of the largest buffer per rank; "
        "units B, K, M, G are powers of 1024.",
    ),
    minbytes: Optional[str] = typer.Option(  # noqa: UP045
        None, "--minbytes", "-b", help="nccl-tests -b: smallest size of a range (with -e)."),
    maxbytes: Optional[str] = typer.Option(  # noqa: UP045
        None, "--maxbytes", "-e", help="nccl-tests -e: largest size of a range (with -b)."),
    factor: float = typer.Option(DEFAULT_FACTOR, "--factor", "-f",
                                 help="Multiplicative step of ranges (nccl-tests -f)."),
    step: Optional[str] = typer.Option(  # noqa: UP045
        None, "--step", "-i", help="nccl-tests -i: additive step of the -b/-e range instead "
        "of -f."),
    message_range: Optional[str] = typer.Option(  # noqa: UP045
        None, "--message-sizes", "-m", help="OSU -m MIN:MAX (or MAX): powers of two."),
    backend: str = typer.Option(
        ",".join(DEFAULTS.backends), "--backend",
        help="gloo, nccl, or a list (gloo,nccl) measured side by side; auto: nccl with GPUs.",
    ),
    device: str = typer.Option(DEFAULTS.device, "--device",
                               help="cpu or cuda (auto: cuda for nccl)."),
    nproc: Optional[int] = typer.Option(  # noqa: UP045
        DEFAULTS.nproc, "--nproc", help="Local ranks to start (default: GPUs for nccl, else 2)."
    ),
    dtype: str = typer.Option(DEFAULTS.dtype, "--dtype", "-d", help="float32, float16, "
                              "bfloat16, float64, int8, uint8, int32 or int64 (also nccl-tests' "
                              "and OSU's names: half, float, double, char, int, ...)."),
    op: str = typer.Option(DEFAULTS.reduce_op, "--op", "-o",
                           help="Reduction: sum, prod, min, max or avg (nccl-tests -o)."),
    root: int = typer.Option(DEFAULTS.root, "--root", "-r",
                             help="Root rank of rooted collectives."),
    pattern: str = typer.Option(
        ",".join(DEFAULTS.patterns), "--pattern",
        help="p2p pattern(s): pingpong, unidir, bidir, ring, a list, or all.",
    ),
    peers: Optional[str] = typer.Option(  # noqa: UP045
        None, "--peers", help="p2p pairs SENDER:RECEIVER, e.g. 0:8,1:9 (default 0:1,2:3,...)."),
    window: int = typer.Option(DEFAULTS.window, "--window", "-W",
                               help="p2p unidir/bidir: messages in flight (OSU -W)."),
    ops: str = typer.Option("allreduce", "--ops", help="Ops to run (comma list, or all)."),
    warmup: Optional[int] = typer.Option(  # noqa: UP045
        DEFAULTS.warmup, "--warmup", "-w", "-x",
        help="Untimed iterations per size, and before each group's first size (default: up "
        "to 5 per size, 0.5 s before the first); -x as in OSU.",
    ),
    iters: Optional[int] = typer.Option(  # noqa: UP045
        DEFAULTS.iters, "--iters", "-n", help="Fixed timed iterations per size (nccl-tests -n; "
        "default: adaptive)."
    ),
    min_time: float = typer.Option(
        DEFAULTS.min_time, "--min-time", help="Seconds of timed work per size (adaptive mode)."
    ),
    rounds: int = typer.Option(
        DEFAULTS.rounds, "--rounds", help="Interleaved passes over an op's sizes, each a share "
        "of --min-time; a size's interval comes from the spread between its rounds."),
    order: str = typer.Option(
        DEFAULTS.order, "--order", help="How each of --rounds visits the sizes: alternate "
        "(ascending, then descending) or shuffle (a new order every round, from --seed)."),
    seed: Optional[int] = typer.Option(  # noqa: UP045
        None, "--seed", help="Seed of --order shuffle (default 0; kept in run.json): the same "
        "seed, the same order, on every rank."),
    repeat: int = typer.Option(
        DEFAULTS.repeat, "--repeat", help="Independent launches (fresh ranks) into one run "
        "folder; compare pools them."),
    bind: str = typer.Option(
        DEFAULTS.bind, "--bind", help="auto, core or none: each rank's measuring thread on a "
        "core of its own (auto: where commbench starts CPU ranks that fit the cores)."),
    check: bool = typer.Option(
        DEFAULTS.check, "--check/--no-check", help="Verify every result element after timing."
    ),
    check_level: Optional[int] = typer.Option(  # noqa: UP045
        None, "-c", help="nccl-tests -c: 1 checks results, 0 does not."),
    rank_time: str = typer.Option(
        DEFAULTS.rank_time, "--rank-time", "-a", help="How per-rank times combine: avg, max, "
        "min or rank0 (nccl-tests -a 1, 3, 2, 0 also accepted)."),
    inplace: bool = typer.Option(DEFAULTS.inplace, "--inplace",
                                 help="The in-place variant (allgather, reduce-scatter)."),
    both_places: bool = typer.Option(
        DEFAULTS.both_places, "--both-places",
        help="Out-of-place and in-place in one launch, as nccl-tests' two column groups "
        "(allgather, reduce-scatter; one table each)."),
    blocking: bool = typer.Option(
        DEFAULTS.blocking, "--blocking",
        help="CUDA: wait for each call before the next (nccl-tests -z 1).",
    ),
    blocking_level: Optional[int] = typer.Option(  # noqa: UP045
        None, "-z", help="nccl-tests -z: 1 blocks after every call."),
    cuda_graph: bool = typer.Option(
        DEFAULTS.cuda_graph, "--cuda-graph",
        help="CUDA: capture a block in a CUDA graph, time replays.",
    ),
    graph_launches: Optional[int] = typer.Option(  # noqa: UP045
        None, "-G", help="nccl-tests -G N: N > 0 captures in CUDA graphs (--cuda-graph)."),
    host_timer: bool = typer.Option(
        DEFAULTS.host_timer, "--host-timer", help="CUDA: time with the host clock around a "
        "synchronize (nccl-tests' method) instead of CUDA events."
    ),
    timeout: float = options.timeout(
        DEFAULTS.timeout, "Seconds before a hung collective ends the run."),
    mesh: Optional[str] = typer.Option(  # noqa: UP045
        None, "--mesh", help="Lay the ranks out as a device mesh, e.g. dp=2,tp=4 (row-major, "
        "the last dimension contiguous)."),
    dim: Optional[str] = typer.Option(  # noqa: UP045
        None, "--dim", help="Mesh dimension(s) whose groups run the op concurrently: a name, a "
        "list, or all (each in turn)."),
    split: Optional[str] = typer.Option(  # noqa: UP045
        None, "--split", help="nccl-tests NCCL_TESTS_SPLIT: mod:K (dim 0 of an (N/K, K) mesh), "
        "div:K (dim 1), and:MASK, or:MASK."),
    per_group: bool = typer.Option(
        DEFAULTS.per_group, "--per-group", help="A row per group as well; the summary names a "
        "group 1.5x slower than the median group."),
    per_call: bool = typer.Option(
        DEFAULTS.per_call, "--per-call", help="Time every call on its own and keep every "
        "rank's calls (calls.parquet, or calls.jsonl without pyarrow); the summary adds p95, "
        "CV, spikes (calls over 1.5x the median) and which rank the others waited for."),
    overlap: Optional[str] = contention.overlap(),  # noqa: UP045
    background: Optional[str] = contention.background(),  # noqa: UP045
    background_ranks: Optional[str] = contention.background_ranks(),  # noqa: UP045
    out: str = options.results_root(OUTPUT_DEFAULTS.out),
    name: Optional[str] = options.run_name(),  # noqa: UP045
    force: bool = options.force(),
    json_rows: bool = options.json_output(
        "JSON Lines on stdout (one object per row; jq, python -m json.tool --json-lines), no "
        "table; warnings stay on stderr."),
    quiet: bool = typer.Option(OUTPUT_DEFAULTS.quiet, "--quiet", "-q", help="No progress bar."),
    history: Optional[str] = options.history_url(),  # noqa: UP045
    dry_run: bool = typer.Option(
        OUTPUT_DEFAULTS.dry_run, "--dry-run", help="Print the sizes, element counts and "
        "world-size rounding the sweep will use, then exit: nothing is launched or written."),
) -> None:
    """A signature only: the options every measuring command may take (see _command_for)."""


_COMMON = inspect.signature(_measuring_options)
_SIZE_OPTIONS = {"sizes", "minbytes", "maxbytes", "factor", "step", "message_range"}
_SIZED = _SIZE_OPTIONS | {"dtype", "order", "seed"}


def _takes(op: collectives.Collective | None, option: str) -> bool:
    """Whether the command for ``op`` (None: ``run``, which may run any op) offers ``option``:
    what an option means for an op is the op's descriptor's to say."""
    if option == "ops":
        return op is None
    if op is None:
        return True
    if option in _SIZED:
        return op.sized
    if option in ("inplace", "both_places"):
        return op.has_in_place
    if option == "root":
        return op.rooted
    if option == "op":
        return op.reduces
    if option in collectives.OP_OPTIONS:
        return option in op.extra_options
    if option in contention.OPTION_NAMES:
        return op.contended
    return True


def _command_for(op: collectives.Collective | None, description: str):
    """A typer command with the shared options, minus those that mean nothing for ``op``."""

    def command(**options) -> None:
        ops = (op.name,) if op is not None else parse_ops(options.pop("ops"))
        own = op_options.take(op, options)  # the op's own options (its descriptor's data)
        spec, output = measure_specs(ops, options)
        spec = replace(spec, op_options=own)
        from commbench.commands.measure import run_measure

        raise typer.Exit(run_measure(spec, output))

    keep = [p for p in _COMMON.parameters.values() if _takes(op, p.name)]
    keep = op_options.with_defaults(op, keep) + op_options.parameters(op)
    command.__signature__ = _COMMON.replace(parameters=keep, return_annotation=None)
    command.__doc__ = description + "\n\n" + METRICS_HELP
    return command


_OUTPUT_FIELDS = {"out", "name", "force", "json_rows", "quiet", "dry_run", "history"}
# CLI option -> MeasureSpec field, for options whose text needs parsing.
_PARSED = {
    "backend": ("backends", lambda text: parse_list(text, (*BACKENDS, "auto"), "backend")),
    "op": ("reduce_op", None),
    "dtype": ("dtype", parse_dtype),
    "pattern": ("patterns", parse_patterns),
    "peers": ("peers", parse_peers),
    "rank_time": ("rank_time", parse_rank_time),
    "mesh": ("mesh", parse_mesh),
    "dim": ("dims", parse_dims),
    "split": ("split", parse_split),
    "order": ("order", str.lower),
    "bind": ("bind", str.lower),
    "overlap": ("overlap", parse_overlap),
    "background": ("background", parse_background),
    "background_ranks": ("background_ranks", parse_ranks),
}
# Read together with another option, or turned into a spec field below.
_NCCL_TESTS_LEVELS = {"check_level": "check", "blocking_level": "blocking",
                      "graph_launches": "cuda_graph"}


def measure_specs(ops: tuple[str, ...], options: dict) -> tuple[MeasureSpec, OutputSpec]:
    """The typed boundary: what the user typed, over the defaults stated in specs/measure.py."""
    measure: dict = {"ops": ops}
    output: dict = {"command_line": ("commbench", *sys.argv[1:])}
    for option, value in options.items():
        if option in _OUTPUT_FIELDS:
            output[option] = value
        elif option in _SIZE_OPTIONS:
            continue
        elif option in _NCCL_TESTS_LEVELS:
            if value is not None:  # -c 0, -z 1, -G 1: nccl-tests' numbers for flags
                measure[_NCCL_TESTS_LEVELS[option]] = value > 0
        elif value is None and option in _PARSED:
            continue
        else:
            field, parse = _PARSED.get(option, (option, None))
            measure[field] = parse(value) if parse else value
    if options.get("seed") is not None and measure.get("order", DEFAULTS.order) != "shuffle":
        raise UsageError("--seed orders the sizes of --order shuffle; give --order shuffle "
                         "too")
    if "dtype" in options:
        measure["sizes"] = tuple(sweep_sizes(
            options.get("sizes"), options.get("minbytes"), options.get("maxbytes"),
            options.get("factor", DEFAULT_FACTOR), options.get("step"),
            options.get("message_range"),
        ))
    return MeasureSpec(**measure), OutputSpec(**output)


OP_COMMANDS = tuple(collectives.REGISTRY)  # the measuring commands named after an op


def commands_taking(flag: str) -> list[str]:
    """The op commands that offer ``flag`` (e.g. --inplace: allgather, reduce-scatter), for
    the message when another op is given it."""
    names = [p.name for p in _COMMON.parameters.values() if flag in p.default.param_decls]
    return [op.name for op in collectives.REGISTRY.values()
            if names and _takes(op, names[0])]


def register(app: typer.Typer) -> None:
    """A command per collective of the registry, and ``run``."""
    for op in collectives.REGISTRY.values():
        app.command(op.name)(
            _command_for(op, f"{op.summary} busbw factor: {op.factor_text}.")
        )
    app.command("run")(_command_for(
        None, "Run several ops (--ops allreduce,allgather or --ops all) in one launch, one "
        "folder."))


