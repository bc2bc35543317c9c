"""What a measuring command does between parsing and exit code.

Resolve backends and world size, refuse what cannot run (before any process starts), create the
run folder, launch (locally through the elastic agent, or as one rank of an external launcher),
then finish the folder and print the table. Failures keep every measured row.
"""

from __future__ import annotations

import sys

from commbench import collectives
from commbench.config import BACKENDS, ITEMSIZE, RunConfig, parse_list, validate
from commbench.errors import (
    EXIT_FINDING,
    EXIT_OK,
    Interrupted,
    RunFailed,
    UsageError,
)
from commbench.sizes import parse_sizes

CPU_MEMORY_SHARE = 0.8  # leave room for the OS, torch and the check's chunks
SHOWN_NOTES = 5  # unstable sizes listed on the console; summary.md has them all


def measure(ops: tuple[str, ...], options: dict) -> int:
    from commbench import launch

    env = launch.detect()
    nproc = options["nproc"]
    if env is not None and nproc is not None:
        raise UsageError(
            f"--nproc cannot be used under {env.launcher}: it already started {env.world} ranks"
        )
    if nproc is not None and nproc < 1:
        raise UsageError(f"bad --nproc {nproc}: at least 1 rank is needed")
    sized = any(collectives.get(name).sized for name in ops)
    sizes = parse_sizes(options.get("sizes", "8"), options.get("factor", 2.0)) if sized else [8]
    backends = resolve_backends(options["backend"])
    world = env.world if env else (nproc or _default_nproc(backends))
    config = RunConfig(
        ops=ops,
        backends=backends,
        device=options["device"],
        sizes=tuple(sizes),
        dtype=options.get("dtype", "float32"),
        reduce_op=options.get("op", "sum"),
        warmup=options["warmup"],
        iters=options["iters"],
        min_time=options["min_time"],
        check=options["check"],
        inplace=options.get("inplace", False),
        timeout=options["timeout"],
        root=options.get("root", 0),
        patterns=_patterns(options.get("pattern", "pingpong")),
        blocking=options["blocking"],
        cuda_graph=options["cuda_graph"],
        host_timer=options["host_timer"],
        json_rows=options["json_rows"],
        progress=sys.stdout.isatty() and not options["quiet"] and not options["json_rows"],
        command_line=tuple(["commbench", *sys.argv[1:]]),
    )
    validate(config, world)
    check_backends(config, env.local_world if env else world)
    if env is None:
        _check_host_memory(config, world)
    return _launch(config, env, world, options)


def _patterns(text: str) -> tuple[str, ...]:
    from commbench.collectives.p2p import PATTERNS

    if text.strip().lower() == "all":
        return PATTERNS
    return parse_list(text, PATTERNS, "pattern")


def resolve_backends(text: str) -> tuple[str, ...]:
    """Parse --backend; ``auto`` is nccl when CUDA GPUs are visible, else gloo."""
    names = parse_list(text, (*BACKENDS, "auto"), "backend")
    if "auto" not in names:
        return names
    import torch

    auto = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"
    return tuple(dict.fromkeys(auto if name == "auto" else name for name in names))


def _default_nproc(backends: tuple[str, ...]) -> int:
    if "nccl" in backends:
        import torch

        return max(1, torch.cuda.device_count())
    return 2


def check_backends(config: RunConfig, local_ranks: int) -> None:
    """A listed backend this machine lacks is refused before anything runs (exit 2)."""
    import torch
    import torch.distributed as dist

    for backend in config.backends:
        if backend == "gloo" and not dist.is_gloo_available():
            raise UsageError("gloo is not available in this torch build")
        if backend == "nccl" and not dist.is_nccl_available():
            raise UsageError("nccl is not available in this torch build (a CPU-only torch?)")
        if config.device_for(backend) == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise UsageError(f"{backend} with CUDA buffers needs a GPU, and none is visible")
            if backend == "nccl" and local_ranks > count:
                raise UsageError(
                    f"{local_ranks} ranks on this node but only {count} GPU(s) are visible"
                )


def _check_host_memory(config: RunConfig, world: int) -> None:
    """CPU buffers of every local rank must fit in available memory (GPU: see the worker)."""
    if all(config.device_for(b) == "cuda" for b in config.backends):
        return
    import psutil

    from commbench.collectives.base import OpContext

    itemsize = ITEMSIZE[config.dtype]
    largest = 0
    for name in config.ops:
        op = collectives.get(name)
        if not op.sized:
            continue
        count = op.count_for(max(config.sizes), itemsize, world)
        for rank in range(world):
            ctx = OpContext(rank, world, None, config.dtype, config.reduce_op, None,
                            root=config.root, inplace=config.inplace)
            layout = op.layout(ctx, count)
            largest = max(largest, (layout.send + layout.recv) * itemsize)
    need = largest * world
    available = psutil.virtual_memory().available
    if need > CPU_MEMORY_SHARE * available:
        raise UsageError(
            f"the largest size needs {need / 2**30:.1f} GiB for {world} ranks, but only "
            f"{available / 2**30:.1f} GiB is available; lower the top of --sizes"
        )


def _launch(config: RunConfig, env, world: int, options: dict) -> int:
    from dataclasses import replace

    from commbench.results import rundir
    from commbench.results.finish import finish

    run_id = options["name"] or rundir.default_run_id(config.ops, config.backends, world)
    if env is not None and env.rank != 0:
        return _run_external(replace(config, run_dir=""), env)
    path = rundir.create(options["out"], run_id)
    config = replace(config, run_dir=str(path))
    if env is not None:
        _run_external(config, env)
        return _render(finish(path, "complete"), path, config)

    from commbench.agent import run_local
    from commbench.engine.worker import run_worker

    try:
        cuda = any(config.device_for(b) == "cuda" for b in config.backends)
        run_local(run_worker, (config,), world, config.timeout, cuda)
    except (RunFailed, Interrupted) as error:
        rows = rundir.RunDir(path).read_rows()
        finish(path, "partial" if rows else "failed", str(error))
        print(f"error: {error}", file=sys.stderr)
        print(f"kept {len(rows)} measured row(s) in {path}", file=sys.stderr)
        return error.exit_code
    return _render(finish(path, "complete"), path, config)


def _run_external(config: RunConfig, env) -> int:
    from commbench.engine.worker import run_worker

    run_worker(config, env)
    return EXIT_OK


def _render(rows: list[dict], path, config: RunConfig) -> int:
    """The console table (unless --json), where the files are, and the exit code."""
    from commbench import render
    from commbench.results.finish import load_frame
    from commbench.stats import UNSTABLE_ADVICE

    wrong = sum(int(row.get("wrong", 0)) for row in rows)
    if rows and not config.json_rows:
        console = render.console()
        frame = load_frame(rows)
        for table in render.console_tables(frame):
            console.print(table)
        notes = render.unstable_notes(frame)
        if notes:
            print(f"warning: {len(notes)} of {len(rows)} {UNSTABLE_ADVICE}:", file=sys.stderr)
            for note in notes[:SHOWN_NOTES]:
                print(f"  {note}", file=sys.stderr)
            if len(notes) > SHOWN_NOTES:
                print(f"  ... {len(notes) - SHOWN_NOTES} more in {path}/summary.md",
                      file=sys.stderr)
        console.print(f"results: {path}")
    if wrong:
        print(f"error: {wrong} wrong element(s) in the results (see the #wrong column)",
              file=sys.stderr)
        return EXIT_FINDING
    return EXIT_OK



