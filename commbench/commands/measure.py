"""The measuring commands (allreduce, ..., p2p, run): specs in, exit code out.

Resolve backends and world size, refuse what cannot run (before any process starts), create the
run folder, launch (locally through the elastic agent, or as one rank of an external launcher),
then finish the folder and show the table. A failure keeps every measured row.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from commbench import collectives
from commbench.collectives.base import OpContext
from commbench.core.dtypes import ITEMSIZE
from commbench.core.errors import EXIT_FINDING, EXIT_OK, UsageError
from commbench.specs.measure import MeasureSpec, OutputSpec, resolve_layout, validate

CPU_MEMORY_SHARE = 0.8  # leave room for the OS, torch and the check's chunks
SHOWN_NOTES = 5  # unstable sizes listed on the console; summary.md has them all


def run_measure(spec: MeasureSpec, output: OutputSpec) -> int:
    from commbench.launch.backends import check_backends, resolve_backends
    from commbench.launch.ranks import place

    spec = replace(spec, backends=resolve_backends(spec.backends))
    # CUDA is checked with the buffers' devices (check_backends), in its own words
    placement = place(spec.nproc, spec.backends, check_cuda=False)
    env = placement.env
    if env is not None and spec.repeat > 1:
        raise UsageError(f"--repeat needs commbench to start the ranks itself: under "
                         f"{env.launcher}, run the job {spec.repeat} times instead")
    world = placement.world
    spec = resolve_layout(spec, world)
    validate(spec, world)
    check_backends(spec, placement.local_world, external=not placement.local)
    if placement.local:
        _check_host_memory(spec, world)
    if output.dry_run:
        return _dry_run(spec, world, placement.env)
    if output.history:  # a typo in the URL is refused now, not after the sweep
        from commbench.history import check_store_url

        check_store_url(output.history)
    return _launch(spec, output, placement)


def _dry_run(spec: MeasureSpec, world: int, env) -> int:
    """--dry-run: the sweep as the ranks would run it (sizes rounded to whole elements, and to
    a multiple of the group where the op splits its buffer), printed; nothing starts."""
    from commbench.output.console import dry_run_lines

    itemsize = ITEMSIZE[spec.dtype]
    plan = []
    for dim in spec.dims or ("",):
        group = dict(spec.mesh)[dim] if dim else world
        for name in spec.ops:
            op = collectives.get(name)
            for variant in op.variants(spec.patterns, spec.op_options):
                sizes = spec.sizes if op.sized else (0,)
                used = [(size, op.count_for(size, itemsize, group) if op.sized else 0)
                        for size in sizes]
                plan.append((op, variant, dim, group, used))
    launcher = env.launcher if env else "local"
    for line in dry_run_lines(plan, spec, world, launcher, itemsize):
        print(line)
    return EXIT_OK


def _check_host_memory(spec: MeasureSpec, world: int) -> None:
    """CPU buffers of every local rank must fit in available memory (GPU: see the sweep)."""
    if not any(spec.device_for(b) == "cpu" for b in spec.backends):
        return
    import psutil

    itemsize = ITEMSIZE[spec.dtype]
    largest = 0
    for name in spec.ops:
        op = collectives.get(name)
        if not op.sized:
            continue
        count = op.count_for(max(spec.sizes), itemsize, world)
        for rank in range(world):
            ctx = OpContext(rank, world, None, spec.dtype, spec.reduce_op, None,
                            root=spec.root, inplace=spec.inplace)
            largest = max(largest, op.bytes_needed(ctx, count, itemsize))
    need = largest * world
    available = psutil.virtual_memory().available
    if need > CPU_MEMORY_SHARE * available:
        raise UsageError(
            f"the largest size needs {need / 2**30:.1f} GiB for {world} ranks, but only "
            f"{available / 2**30:.1f} GiB is available; lower the top of --sizes"
        )


def _sink(output: OutputSpec, writer):
    """Rank 0's sinks: the run folder, and --json lines or the live table (with a progress
    bar on a terminal)."""
    from commbench.output.live import JsonRows, Live, Notes, Sinks

    folder = str(writer.path)
    if output.json_rows:
        return Sinks(writer, Notes(), JsonRows(folder))
    return Sinks(writer, Live(sys.stdout.isatty() and not output.quiet, folder))


def _launch(spec: MeasureSpec, output: OutputSpec, placement) -> int:
    from commbench import results
    from commbench.engine.failures import explain
    from commbench.launch.ranks import LaunchConfig, run_ranks
    from commbench.measure.worker import run_rank
    from commbench.output.console import say

    world = placement.world
    config = LaunchConfig(
        placement, spec.backends, spec.timeout, spec.uses_cuda(),
        what=spec.ops[0] if len(spec.ops) == 1 else f"{len(spec.ops)}ops",
        out=output.out, name=output.name, force=output.force,
        command_line=tuple(output.command_line), launches=spec.repeat)

    def sinks(writer):
        for name in spec.ops:  # the ops' own files (alltoallv's split matrices), before any rank
            for file, text in collectives.get(name).run_files(spec, world).items():
                writer.file(file, text)
        return _sink(output, writer)

    launched = run_ranks(config, run_rank, spec, sinks, say=say, explain=explain,
                         per_launch=Launch)
    path = launched.path
    if path is None:  # a rank other than 0 of an external launcher
        return EXIT_OK
    if launched.failure is not None:
        rows = results.read_rows(path)
        run = finish(path, "partial" if rows else "failed", str(launched.failure))
        say(f"kept {len(rows)} measured row(s) in {path} (status {run.meta['status']})")
        _add_to_history(output, path, failed=True)
        return launched.failure.exit_code
    run = finish(path, "complete")
    _add_to_history(output, path, failed=False)
    return _show(run, output)


def _add_to_history(output: OutputSpec, path: Path, failed: bool) -> None:
    """``--history``: the run goes into the store as it ended (docs/commands/history.md)."""
    if output.history:
        from commbench.history import add_ended_run
        from commbench.output.console import say

        add_ended_run(output.history, path, failed, say)


class Launch:
    """Rank 0's sink in launch ``index`` of ``--repeat``: its rows carry the launch id
    (compare pools the launches of a size), and run.json plans the rows of every launch."""

    def __init__(self, sink, index: int, total: int, start_time: str) -> None:
        self.sink, self.index, self.total, self.start_time = sink, index, total, start_time

    def begin(self, meta: dict, planned: int) -> None:
        self.sink.begin({**meta, "start_time": self.start_time, "repeat": self.total,
                         "launch": self.index}, planned * self.total)

    def row(self, record: dict) -> None:
        self.sink.row({**record, "launch": self.index})

    def position(self, where: str) -> None:
        self.sink.position(f"launch {self.index + 1}/{self.total}: {where}")

    def progress(self, done: int, total: int) -> None:
        """One bar over every launch: this launch's visits after those of the earlier."""
        self.sink.progress(self.index * total + done, total * self.total)

    def note(self, text: str) -> None:
        self.sink.note(text)

    def update(self, fields: dict) -> None:
        self.sink.update(fields)

    def calls(self, batch) -> None:
        self.sink.calls(replace(batch, launch=self.index))

    def close(self) -> None:
        self.sink.close()


def finish(path: Path, status: str, error: str = ""):
    """The end of every run, whatever happened: status, CSV, summary and plots.

    A run stopped (Ctrl-C) after its last planned row was measured and checked is complete;
    rows written as it was cut inside an op's rounds do not count.
    """
    from commbench import results
    from commbench.measure.groups import slow_groups
    from commbench.output.console import say
    from commbench.output.files import write_run_files
    from commbench.results.launches import pooled_run

    if status != "complete" and _all_rows_measured(path):
        status, error = "complete", ""
    say("writing results.csv, summary.md and plots ...")
    run = results.finalize(path, status, error)
    shown = pooled_run(run)  # --repeat: one row per size over every launch
    write_run_files(shown, slow_groups(shown.rows))
    return run


def _all_rows_measured(path: Path) -> bool:
    from commbench import results
    from commbench.results.schema import CUT_SHORT

    planned = results.read_meta(path).get("planned_rows")
    finished = [r for r in results.read_rows(path) if r.get("validation") != CUT_SHORT]
    return bool(planned) and len(finished) >= planned


def _show(run, output: OutputSpec) -> int:
    """After the live table: what to distrust, where the files are, and the exit code."""
    from commbench.core.stats import unstable_advice
    from commbench.measure.groups import slow_groups
    from commbench.output.console import say, to_devnull, unstable_notes
    from commbench.results import rows_frame
    from commbench.results.launches import pooled_rows

    rows = pooled_rows(run.rows)  # --repeat: judged over every launch, one row per size
    wrong = sum(int(row.get("wrong", 0)) for row in rows)
    for line in slow_groups(rows):
        say(f"warning: {line}")
    if len(rows) < len(run.rows) and not output.json_rows:  # --repeat: what compare judges
        from commbench.output.pooled import print_pooled_table

        print_pooled_table(rows, int(run.meta.get("repeat") or 0))
    if rows:  # --json keeps stderr: only stdout is for the JSON lines
        notes = unstable_notes(rows_frame(rows))
        if notes:
            advice = unstable_advice(run.meta.get("config"))
            say(f"warning: {len(notes)} of {len(rows)} {advice}:")
            for note in notes[:SHOWN_NOTES]:
                say(note, indent="  ")
            if len(notes) > SHOWN_NOTES:
                say(f"... {len(notes) - SHOWN_NOTES} more in {run.path}/summary.md", indent="  ")
        try:
            print(f"results: {run.path}", flush=True,
                  file=sys.stderr if output.json_rows else sys.stdout)
        except BrokenPipeError:  # the reader left (| head): rank 0 said so while measuring
            to_devnull(sys.stdout)
    if wrong:
        say(f"error: {wrong} wrong element(s) in the results (see the #wrong column)")
        return EXIT_FINDING
    return EXIT_OK
