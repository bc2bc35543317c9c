"""replay: a recorded training step's communication, run again here and priced
(docs/commands/replay.md).

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
import sys
from dataclasses import asdict
from pathlib import Path

from commbench.core.errors import EXIT_OK, EXIT_RUN_FAILED, UsageError
from commbench.results.replay import (
    CHART,
    OP_COLUMNS,
    RANK_COLUMNS,
    RANKS_CSV,
    REPLAY_CSV,
    STEP_COLUMNS,
    STEPS_CSV,
    ReplaySink,
    read_replayed,
    write_table,
)
from commbench.specs.replay import ReplayOutput, ReplaySpec


def run_replay(spec: ReplaySpec, output: ReplayOutput) -> int:
    from commbench.launch import detect
    from commbench.launch.ranks import check_nproc, place
    from commbench.replay.plan import check_trace, make_plan, select_steps
    from commbench.replay.rank import ReplayJob
    from commbench.results.trace import load, step_split

    env = detect()
    check_nproc(env, spec.nproc)
    if spec.warmup < 0:
        raise UsageError(f"bad --warmup {spec.warmup}: 0 or more steps")
    trace = load(spec.trace)
    backend = _backend(spec.backend, trace)
    placement = place(spec.nproc, (backend,), default=trace.world_size,
                      cuda_refusal=_cuda_refusal(trace))
    world = placement.world
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
    _check_dtypes(trace)
    curves = _curves(spec.curves, trace)
    plan = make_plan(trace, steps, spec.gaps, isolated=curves[0] is None)
    device = "cuda" if backend == "nccl" else "cpu"
    job = ReplayJob(trace=trace, plan=plan, backend=backend, device=device,
                    timeout=spec.timeout, warmup=spec.warmup,
                    config={**asdict(spec), "backend": backend, "world": world})
    return _launch(spec, output, placement, trace, job, curves,
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
    return name


def _cuda_refusal(trace) -> str:
    """Words for nccl without a visible GPU: a trace recorded on nccl can still be replayed on
    CPUs."""
    if str(trace.header.get("backend") or "") == "nccl":
        return ("the trace was recorded on nccl, which needs CUDA GPUs, and none is visible "
                "here: replay it on CPUs with --backend gloo")
    return ""


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


def _launch(spec: ReplaySpec, output: ReplayOutput, placement, trace, job, curves,
            left_out: str) -> int:
    from commbench import results
    from commbench.engine.failures import explain
    from commbench.launch.ranks import LaunchConfig, run_ranks
    from commbench.output.console import say
    from commbench.replay.rank import run_replay_rank

    force = output.force
    if (placement.rank0 and output.name is not None and not force
            and _failed_before(Path(output.out) / output.name)):
        force = True
        say(f"replacing {Path(output.out) / output.name}: a replay that failed and kept "
            "nothing")
    config = LaunchConfig(placement, (job.backend,), job.timeout, job.device == "cuda",
                          what="replay", out=output.out, name=output.name, force=force,
                          command_line=tuple(output.command_line),
                          meta={"command": "replay", "trace": str(Path(spec.trace).resolve())},
                          starting=f" to replay {len(job.plan.steps)} step(s)",
                          waiting="ranks wait for a core and the replayed times include that "
                          "wait")
    launched = run_ranks(config, run_replay_rank, job, ReplaySink, say=say, explain=explain)
    path = launched.path
    if path is None:  # a rank other than 0 of an external launcher
        return EXIT_OK
    if launched.failure is not None:
        launched.writer.update({"status": "failed", "error": str(launched.failure),
                                "end_time": results.now()})
        say(f"run.json in {path} says why; a replay keeps no part of its steps (the figures "
            f"need every rank's numbers, handed over at the end): run it again with --name "
            f"{path.name}, no --force needed")
        return launched.failure.exit_code
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
    write_table(path / REPLAY_CSV, summary.ops, OP_COLUMNS)
    write_table(path / RANKS_CSV, summary.ranks, RANK_COLUMNS)
    write_table(path / STEPS_CSV, _step_rows(replayed), STEP_COLUMNS)
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
