"""replay: a recorded training step's communication, run again here and priced (SPEC §9).

The flow, as locate's: read and check the trace before anything starts (no such folder, not a
trace, ranks that disagree on their calls, more ranks than the launch has, a --curves run that
cannot price the calls: one line, exit 2); plan the replay (replay.plan); price on
--curves now, so a curve the run lacks is refused before launching; create the run folder;
launch (local ranks through the elastic agent, or this process as one rank of an external
launcher), rank 0 writing every rank's numbers to replayed.jsonl; then the figures, the files,
the table or --json, and the exit code. A failed or hung rank ends the run in bounded time
(the engine's failure handling) with exit 3 and run.json saying why.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from commbench.core.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    Interrupted,
    RunFailed,
    UsageError,
)
from commbench.results.replay import (
    CHART,
    RANKS_CSV,
    REPLAY_CSV,
    STEPS_CSV,
    ReplaySink,
    read_replayed,
)
from commbench.specs.replay import ReplayOutput, ReplaySpec


def run_replay(spec: ReplaySpec, output: ReplayOutput) -> int:
    from commbench.launch import detect
    from commbench.replay.plan import check_trace, make_plan, select_steps
    from commbench.replay.rank import ReplayJob
    from commbench.results.trace import load, step_split

    env = detect()
    if env is not None and spec.nproc is not None:
        raise UsageError(f"--nproc cannot be used under {env.launcher}: it already started "
                         f"{env.world} ranks")
    if spec.nproc is not None and spec.nproc < 1:
        raise UsageError(f"bad --nproc {spec.nproc}: at least 1 rank is needed")
    if spec.warmup < 0:
        raise UsageError(f"bad --warmup {spec.warmup}: 0 or more steps")
    trace = load(spec.trace)
    world = env.world if env else (spec.nproc or trace.world_size)
    split = step_split(trace)
    steps = select_steps(split, trace.steps(), spec.steps)
    check_trace(trace, world, steps)
    if env is None or env.rank == 0:
        from commbench.output.console import say
        from commbench.stragglers import waited_note

        for note in trace.notes:
            say(f"warning: {note}")
        if waited := waited_note(trace):
            say(f"note: {waited}")
    if world > trace.world_size and (env is None or env.rank == 0):
        from commbench.output.console import say

        extra = (f"rank {world - 1} only takes" if world - trace.world_size == 1 else
                 f"ranks {trace.world_size}-{world - 1} only take")
        say(f"note: the launch has {world} ranks and the trace {trace.world_size}: {extra} "
            "part in making the groups")
    backend = _backend(spec.backend, trace)
    _check_dtypes(trace)
    curves = _curves(spec.curves, trace)
    plan = make_plan(trace, steps, spec.gaps, isolated=curves[0] is None)
    device = "cuda" if backend == "nccl" else "cpu"
    job = ReplayJob(trace=trace, plan=plan, backend=backend, device=device,
                    timeout=spec.timeout, warmup=spec.warmup,
                    config={**asdict(spec), "backend": backend, "world": world})
    if env is not None and env.rank != 0:
        _run_external(env, job, None)
        return EXIT_OK
    return _launch(spec, output, env, world, trace, job, curves,
                   _left_out(split, spec.steps, steps))


def _left_out(split, asked: str | None, steps: list[int]) -> str:
    """What the replay leaves out of the recording, in words, for the table's head: with the
    default and a count, set-up and tail (results.trace.step_split); named steps say
    themselves."""
    if split.fallback and set(steps) == {0}:
        return split.fallback
    if asked is not None and not asked.strip().isdigit() and asked.strip().lower() not in (
            "", "default"):
        return ""
    return split.left_out()


def _backend(name: str, trace) -> str:
    from commbench.launch.backends import resolve_backends

    if name not in ("auto", "gloo", "nccl"):
        raise UsageError(f"bad --backend {name!r}: gloo, nccl or auto (the trace's)")
    recorded = str(trace.header.get("backend") or "")
    if name == "auto":
        name = recorded if recorded in ("gloo", "nccl") else resolve_backends(("auto",))[0]
    if name == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("the trace was recorded on nccl, which needs CUDA GPUs, and none "
                             "is visible here: replay it on CPUs with --backend gloo"
                             if recorded == "nccl" else "--backend nccl needs CUDA GPUs, and "
                             "none is visible here")
    return name


def _check_dtypes(trace) -> None:
    from commbench.replay.calls import torch_dtype

    names = sorted({c.dtype for rank in trace.ranks.values() for c in rank.calls})
    unknown = [name for name in names if torch_dtype(name) is None]
    if unknown:
        raise UsageError(f"{trace.path}: this torch has no dtype {', '.join(unknown)}, which "
                         "the trace's calls use")


def _curves(path: str | None, trace) -> tuple:
    """--curves RUN: (a pricer on that run's curves, as estimate --trace prices: an op the run
    lacks is left unpriced, with a note; the run's name); (None, '') for the quick sweep."""
    if path is None:
        return None, ""
    from commbench.model.trace_price import CurvePricer
    from commbench.output.console import say
    from commbench.results import load_run

    run = load_run(path)
    for warning in run.warnings:
        say(f"warning: {warning}")
    return CurvePricer(run.rows, trace.groups), run.name


def _launch(spec: ReplaySpec, output: ReplayOutput, env, world: int, trace, job,
            curves, left_out: str) -> int:
    from commbench import results
    from commbench.output.console import say

    run_id = output.name or _run_id(job.backend, world)
    force = output.force or _failed_before(Path(output.out) / run_id)
    if force and not output.force:
        say(f"replacing {Path(output.out) / run_id}: a replay that failed and kept nothing")
    path = results.create(output.out, run_id, force=force, generated=output.name is None)
    writer = results.RunWriter(path, {"name": path.name, "command": "replay",
                                      "command_line": list(output.command_line),
                                      "trace": str(Path(spec.trace).resolve())})
    writer.start()
    sink = ReplaySink(writer)
    try:
        if env is not None:
            _run_external(env, job, sink)
        else:
            _run_local(job, sink, world, path)
    except (RunFailed, Interrupted) as failure:
        say(f"error: {failure}")
        writer.update({"status": "failed", "error": str(failure), "end_time": results.now()})
        say(f"run.json in {path} says why; a replay keeps no part of its steps (the figures "
            f"need every rank's numbers, handed over at the end): run it again with --name "
            f"{path.name}, no --force needed")
        return failure.exit_code
    return finish(path, spec, output, trace, job, curves, left_out)


def _failed_before(path: Path) -> bool:
    """A folder of a replay that failed: it holds no figures (they are handed over at the
    end), only the reason, so running the same --name again replaces it without --force."""
    from commbench import results

    if not path.is_dir():
        return False
    meta = results.read_meta(path)
    return (meta.get("command") == "replay" and meta.get("status") == "failed"
            and not (path / REPLAY_CSV).exists())


def _run_id(backend: str, world: int) -> str:
    from datetime import datetime

    return f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-replay-{backend}-n{world}"


def _run_local(job, sink, world: int, folder: Path) -> None:
    from commbench.engine.failures import explain
    from commbench.launch.local import run_local
    from commbench.output.console import say
    from commbench.replay.rank import run_replay_rank

    say(f"starting {world} local {job.backend} rank(s) to replay {len(job.plan.steps)} "
        "step(s) ...")
    if world > (os.cpu_count() or 1):
        say(f"warning: {world} ranks on {os.cpu_count()} CPU cores: ranks wait for a core "
            "and the replayed times include that wait")
    run_local(run_replay_rank, (job, sink), world, job.timeout, job.device == "cuda", explain,
              folder=folder)


def _run_external(env, job, sink) -> None:
    from commbench.launch.external import as_external_rank
    from commbench.replay.rank import run_replay_rank

    as_external_rank(env, lambda: run_replay_rank(env, job, sink))


def finish(path: Path, spec: ReplaySpec, output: ReplayOutput, trace, job,
           curves: tuple, left_out: str = "") -> int:
    """The figures from replayed.jsonl, every file of the folder, the console; exit code."""
    from commbench import results
    from commbench.output import replay as render
    from commbench.output.console import say, terminal_width
    from commbench.replay.figures import RankResult, mismatches, summarise
    from commbench.replay.price import isolated_prices

    found = [RankResult.from_json(record) for record in read_replayed(path)]
    replayed = {r.rank: r for r in found if r.rank in trace.ranks}
    pricer, run_name = curves
    price = pricer if pricer is not None else isolated_prices(trace, job.plan, replayed)
    summary = summarise(trace, job.plan, replayed, price)
    if pricer is not None:
        summary.notes[:0] = [f"--curves: {note}" for note in pricer.notes]
    model = (f"priced on the curves of {run_name} (measured, interpolated, its α–β fit or "
             "projected)" if pricer is not None else "each distinct call timed alone in this "
             "launch")
    head = {"trace": str(spec.trace), "world": trace.world_size, "backend": job.backend,
            "gaps": spec.gaps, "model": model, "left_out": left_out}
    summary.left_out = left_out
    # The bytes every call hands torch were checked before timing (exit 3), and the ranks
    # replay the plan's calls by construction: a difference here is commbench's own fault,
    # a failed run, not a finding about the job.
    wrong = mismatches(summary)
    meta = results.read_meta(path)
    meta.update(status="complete", error=None, end_time=results.now(), replay=summary.as_json(),
                head=head)
    results.RunWriter(path).update(meta)
    render.write_csv(path / REPLAY_CSV, summary.ops, render.OP_COLUMNS)
    render.write_csv(path / RANKS_CSV, summary.ranks, render.RANK_COLUMNS)
    render.write_csv(path / STEPS_CSV, _step_rows(replayed), render.STEP_COLUMNS)
    (path / results.SUMMARY).write_text(render.summary_markdown(summary, head, meta))
    if summary.ops:
        render.bar_chart(path / CHART, summary, path.name)
    stream = sys.stderr if output.json_out else sys.stdout
    for line in render.table_lines(summary, head, terminal_width()):
        print(line, file=stream)
    print(f"results: {path}", file=stream, flush=True)
    if output.json_out:
        print(json.dumps({**summary.as_json(), "results": str(path)}), flush=True)
    if wrong:
        say(f"error: the replay differs from the trace (a commbench fault): {wrong[0]}")
        return EXIT_RUN_FAILED
    return EXIT_OK


def _step_rows(replayed: dict) -> list[dict]:
    """Per rank and replayed step: its wall, its calls' time, and the bytes its calls handed
    torch (each call's largest buffer; an all-to-all's bytes sent and received)."""
    rows = []
    for rank, result in sorted(replayed.items()):
        for s in result.steps:
            calls = [(*c, None, None)[:6] for c in s["calls"]]
            rows.append({"rank": rank, "index": s["index"], "step": s["step"],
                         "wall_s": s["wall_s"], "calls": len(calls),
                         "calls_s": sum(max(0.0, c[2] - c[1]) for c in calls),
                         "bytes": sum(int(c[3]) for c in calls),
                         "sent_bytes": sum(int(c[4] or 0) for c in calls),
                         "received_bytes": sum(int(c[5] or 0) for c in calls)})
    return rows
