"""locate: find the slow GPU, node, rail or link (docs/commands/locate.md). Specs in, exit code
out.

The flow, as measure's: refuse bad input before anything starts (specs.locate.validate, the
--topology file), then the one launch path (launch.ranks) with the ranks' job
(locate.callbacks: the schedule, the retests and the verdict rank 0 decides inside the run,
rank 0 writing each pair to pairs.jsonl as it is measured). Then the same findings
(locate.findings) are read from that file here, and the files, the table and the exit code
follow; a failed run still writes the partial matrix and exits 3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from commbench.core.sizes import format_size
from commbench.results.locate import PairSink, read_pairs
from commbench.specs.locate import LocateOutput, LocateSpec, check_world, validate


def run_locate(spec: LocateSpec, output: LocateOutput) -> int:
    from commbench.engine.failures import explain
    from commbench.launch import detect
    from commbench.launch.backends import resolve_backends
    from commbench.launch.ranks import LaunchConfig, check_nproc, place, run_ranks
    from commbench.locate import callbacks
    from commbench.locate.topology import with_topology
    from commbench.output.console import say

    env = detect()
    check_nproc(env, spec.nproc)
    validate(spec, env)
    spec = with_topology(spec, env)
    backend = resolve_backends((spec.backend,))[0]
    placement = place(spec.nproc, (backend,), default=None if backend == "nccl" else 4)
    check_world(placement.world)
    job = callbacks.job(spec, backend)  # torch: after the input is known good
    from commbench.locate.rank import run_locate_rank
    if output.history and placement.rank0:  # a typo in the URL is refused now, not after
        from commbench.history import check_store_url

        check_store_url(output.history)
    config = LaunchConfig(placement, (backend,), spec.timeout, job.device == "cuda",
                          what="locate", out=output.out, name=output.name, force=output.force,
                          command_line=tuple(output.command_line), meta={"command": "locate"},
                          waiting="the pairs of a round share the cores, which locate's "
                          "per-round median absorbs, but noise grows")
    folder: list[Path] = []
    finished: dict = {}

    def sinks(writer):
        from commbench.output.locate import RoundsBar

        folder.append(writer.path)
        # A live bar on a terminal only (a log or CI gets no redraws; --json keeps stdout
        # clean; --quiet asks for none).
        return RoundsBar(PairSink(writer), sys.stdout.isatty() and not output.json_out
                         and not output.quiet)

    if env is not None and placement.rank0:
        # Under a launcher, rank 0 finishes the folder inside the run, while the other ranks
        # wait for its verdict: were they to exit first, torchrun would stop rank 0 mid-write.
        def finish_in_rank(found_entities, records) -> int:
            finished.update(finish(folder[0], spec, output, "", backend))
            return finished["code"]

        job = dataclasses.replace(job, verdict=finish_in_rank)
    launched = run_ranks(config, run_locate_rank, job, sinks, say=say, explain=explain)
    path = launched.path
    if path is None:  # every rank exits as rank 0 will
        return int(launched.value)
    failure = launched.failure
    error = str(failure) if failure is not None else ""
    found = finished if finished and not error else finish(path, spec, output, error, backend)
    _add_to_history(output, path, failed=bool(error))
    if failure is not None:
        say(f"kept the {found['pairs']} measured pair(s) in {path}")
        return failure.exit_code
    return found["code"]


def _add_to_history(output: LocateOutput, path: Path, failed: bool) -> None:
    """``--history``: the run goes into the store as it ended (docs/commands/history.md)."""
    if output.history:
        from commbench.history import add_ended_run
        from commbench.output.console import say

        add_ended_run(output.history, path, failed, say)


def finish(path: Path, spec: LocateSpec, output: LocateOutput, error: str,
           backend: str) -> dict:
    """Findings from pairs.jsonl, every file of the folder, the console; what was found."""
    from commbench import results
    from commbench.locate.attribution import Z_LIMIT
    from commbench.locate.findings import entity_of, findings
    from commbench.output.console import say
    from commbench.output.locate import console_lines, fleet_words, write_files

    records = read_pairs(path)
    meta = results.read_meta(path)
    found = [entity_of(e) for e in meta.get("entities", [])]
    view = findings(found, records, spec)
    level = found[0].kind if found else spec.level or "gpu"
    head = {"entities": len(found), "level": level, "backend": backend,
            "pairs": view.main_pairs, "rounds": view.rounds,
            "confirm_rounds": view.confirm_rounds, "large": format_size(spec.large),
            "small": format_size(spec.small), "min_effect": _line_share(view.line, spec),
            "min_effect_line": _line_words(view.line, spec), "z_limit": Z_LIMIT,
            "measured_pairs": view.measured_pairs,
            "leaves": len({leaf for leaf in view.leaves if leaf is not None})}
    if view.rule is not None:  # what the decision used, not a constant
        head.update(z_limit=view.rule.z, candidates=view.rule.candidates,
                    slow_z=view.rule.slow_z, min_effect=view.rule.line_words(),
                    rule=view.rule.words())
    if not view.measured_pairs:
        status = "failed"  # no pair: no verdict, whatever stopped it
        error = error or (f"measured no pair: {fleet_words(head)} at this level, nothing "
                          "to pair")
    else:
        status = "complete" if not error else "partial"
    head["status"] = status
    meta.update(status=status, error=error or None, end_time=results.now(),
                suspects=view.suspects, transient=view.transient, slow=view.slow,
                min_effect=_line_dict(view.line), rule=_rule_dict(view.rule))
    results.RunWriter(path).update(meta)
    write_files(path, found, records, view, head, meta)
    stream = sys.stderr if output.json_out else sys.stdout
    for line in console_lines(view.suspects, view.transient, head, view.slow):
        print(line, file=stream)
    print(f"results: {path}", file=stream, flush=True)
    if not view.measured_pairs:
        say(f"error: {error}")
    if output.json_out:
        summary = {"entities": len(found), "pairs": view.main_pairs,
                   "rounds": view.rounds, "level": level, "status": status,
                   "suspects": [_json_suspect(s) for s in view.suspects],
                   "transient": [_json_suspect(s) for s in view.transient],
                   "slow": [_json_suspect(s) for s in view.slow],
                   "rule": _rule_dict(view.rule),
                   "min_effect": _line_dict(view.line), "results": str(path)}
        print(json.dumps(summary), flush=True)
    return {"pairs": len(records), "code": view.exit_code}


def _line_share(line, spec: LocateSpec) -> str:
    """The line in short ('12% (busbw) / 10% (latency)'), for the verdict's sentence."""
    if line is not None:
        return line.short()
    return spec.min_effect.words() if spec.min_effect is not None else "the noise-drawn line"


def _line_words(line, spec: LocateSpec) -> str:
    """The line and where it came from: 'busbw 14% (4.0 x measured noise 0.034), lat 10%
    (floor; measured noise 0.012)'; nothing measured: what it would have been drawn from."""
    if line is not None:
        return line.words()
    if spec.min_effect is not None and None not in (spec.min_effect.busbw, spec.min_effect.lat):
        return f"{spec.min_effect.words()} (--min-effect)"
    return "from the run's noise (nothing measured to draw it from)"


def _rule_dict(rule) -> dict | None:
    """The rule applied (locate.rule.Rule.as_dict); None where nothing was judged."""
    return rule.as_dict() if rule is not None else None


def _line_dict(line) -> dict | None:
    return line.as_dict() if line is not None else None


def _json_suspect(s: dict) -> dict:
    def number(value):
        return None if value is None or not math.isfinite(value) else round(value, 4)

    return {"kind": s["kind"], "entity": s["entity"], "ranks": s["ranks"], "hosts": s["hosts"],
            "busbw_ratio": number(s["busbw_ratio"]), "lat_ratio": number(s["lat_ratio"]),
            "evidence": s["evidence"], "confirmed": s["confirmed"], "verdict": s["verdict"],
            "metric": s.get("metric"), "interval": [number(v) for v in s.get("interval", [])],
            "measurements": s.get("measurements"), "z": number(s.get("pooled_z"))}
