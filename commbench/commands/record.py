"""``commbench record [--out DIR] -- CMD ARGS...``: run the user's job unchanged and keep the
communication every rank issued, as ``DIR/rank-<r>.jsonl`` (docs/reference/trace-format.md).

The command is started as it is (python, torchrun, a script that spawns its ranks), with
``commbench/record/boot`` first on PYTHONPATH: its sitecustomize starts the recorder in every
process that calls ``init_process_group``. The user's exit status is passed through (128 + the
signal where it was killed); a job that crashed keeps what its ranks wrote up to their last
step.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from commbench.core.errors import UsageError
from commbench.launch.environment import users_environment
from commbench.launch.lifetime import die_with_parent

RECORD_JSON = "record.json"
BOOT = Path(__file__).resolve().parent.parent / "record" / "boot"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
FR_DUMPS = "flight-recorder"  # commbench.record.flight.DUMPS (that module imports torch)
FR_STEPS = "fr-steps-*.json"
FR_BUFFER = 20000  # calls kept per rank: minutes of a DDP job's steps, a few MB of memory


def run_record(command: list[str], out: str | None, force: bool, steps: int | None,
               flight_recorder: bool = False) -> int:
    """Run ``command`` with the recorder installed (or, with ``flight_recorder``, torch's own
    Flight Recorder, read back into a trace at the end); returns the command's own exit
    code."""
    from commbench import __version__, results
    from commbench.results import trace as trace_format

    if not command:
        raise UsageError("record needs a command to run: commbench record [--out DIR] -- "
                         "python train.py ...")
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be 1 or more, not {steps}")
    buffer = os.environ.get("TORCH_FR_BUFFER_SIZE", "").strip()
    if flight_recorder and buffer and not (buffer.isdigit() and int(buffer) > 0):
        raise UsageError(f"TORCH_FR_BUFFER_SIZE={buffer}: the Flight Recorder would keep no "
                         "call; unset it (record keeps 20000) or give a count of calls")
    if steps is not None and flight_recorder:
        raise UsageError("--steps and --flight-recorder do not go together: the Flight "
                         "Recorder keeps the last TORCH_FR_BUFFER_SIZE calls, not the first "
                         "steps")
    _check_runnable(command[0])  # before any folder is made: a typo leaves nothing behind
    folder = Path(out) if out else default_folder(Path("results"), datetime.now())
    old = sorted(folder.glob(trace_format.TRACE_GLOB)) if folder.is_dir() else []
    if (old or (folder / RECORD_JSON).exists()) and not force:
        what = f"a trace ({len(old)} rank files)" if old else "a record (record.json)"
        raise UsageError(f"{folder} already holds {what}; pass --force to replace it or "
                         "--out another folder")
    for file in old:
        file.unlink()
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)

    env = users_environment(os.environ)  # the job's own OMP_NUM_THREADS, not commbench's
    env["PYTHONPATH"] = os.pathsep.join(
        [str(BOOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env["COMMBENCH_RECORD_DIR"] = str(folder.resolve())
    env["COMMBENCH_RECORD_PATH"] = str(PACKAGE_ROOT)
    env.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")  # NCCL's own per-call durations
    if steps is not None:
        env["COMMBENCH_RECORD_STEPS"] = str(steps)
    if flight_recorder:
        env["COMMBENCH_RECORD_MODE"] = "flight-recorder"
        env.setdefault("TORCH_FR_BUFFER_SIZE", str(FR_BUFFER))
        for old_dump in [*(folder / FR_DUMPS).glob("fr-*"), *folder.glob(FR_STEPS)]:
            old_dump.unlink()

    started = results.now()
    try:
        code = _run(command, env)
    except UsageError:
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    meta = {"format": "commbench-record", "commbench": __version__, "command": command,
            "exit_code": code, "started": started, "ended": results.now()}
    if flight_recorder:
        meta["flight_recorder"] = {"buffer": int(env["TORCH_FR_BUFFER_SIZE"])}
        _trace_from_dumps(folder)
    (folder / RECORD_JSON).write_text(json.dumps(meta, indent=2) + "\n")
    _summarize(folder, code)
    return code


def _trace_from_dumps(folder: Path) -> None:
    """The ranks' Flight Recorder dumps as the trace's rank files, numbered into steps by
    the lowest rank's step ends; what cannot be read is said, and the job's exit code still
    comes through."""
    from commbench.importers import ImportFormatError, flight_recorder
    from commbench.results import trace as trace_format

    noted_files = sorted(folder.glob(FR_STEPS))  # one per rank that ran to its end
    ends: dict[int, list[int]] = {}
    hosts: dict[int, dict] = {}
    for path in noted_files:
        try:
            noted = json.loads(path.read_text())
            ends[int(noted["rank"])] = [int(t) for t in noted["step_ends_ns"]]
            hosts[int(noted["rank"])] = {"host": str(noted.get("host", "")),
                                         "torch": str(noted.get("torch", ""))}
        except (ValueError, KeyError, TypeError):
            print(f"commbench record: warning: {path}: unreadable step ends", file=sys.stderr)
    torch = next((h["torch"] for h in hosts.values() if h["torch"]), "?")
    nothing = ("commbench record: the ranks ran but torch's Flight Recorder kept no call "
               f"(torch {torch}: no dumper, or it does not record this backend; torch 2.4 and "
               "2.6 keep none on gloo): record without --flight-recorder")
    dumps = folder / FR_DUMPS
    if not dumps.is_dir() or not any(dumps.iterdir()):
        if noted_files:  # ranks ran and noted their steps, but dumped nothing
            print(nothing, file=sys.stderr)
        return  # else no rank started: _summarize says so
    try:
        imported = flight_recorder.read([str(dumps)], ends[min(ends)] if ends else None)
    except ImportFormatError as error:
        print(f"commbench record: the Flight Recorder dumps could not be read: {error}",
              file=sys.stderr)
        return
    if not any(rank.calls for rank in imported.trace.ranks.values()):
        print(nothing, file=sys.stderr)
        return
    for rank, rank_trace in sorted(imported.trace.ranks.items()):
        header = {**rank_trace.header, **hosts.get(rank, {})}
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", header, rank_trace.calls)
    for note in imported.notes:
        if not (hosts and note.startswith("the dumps name no host")):
            print(f"commbench record: note: {note}", file=sys.stderr)


def default_folder(root: Path, now: datetime) -> Path:
    """``root/trace-<time>``, never one that exists: two records in the same second (a
    failed one, then another) each get their own (-2, -3 ...), as run folders do."""
    base = root / now.strftime("trace-%Y%m%d-%H%M%S")
    folder, suffix = base, 1
    while folder.exists():
        suffix += 1
        folder = base.with_name(f"{base.name}-{suffix}")
    return folder


def _check_runnable(program: str) -> None:
    """The command's program must exist (a path, or a name on PATH) and be executable."""
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        if not path.exists():
            raise UsageError(f"cannot run {program!r}: no such command")
        if not os.access(path, os.X_OK) or path.is_dir():
            raise UsageError(f"cannot run {program!r}: permission denied")
    elif shutil.which(program) is None:
        raise UsageError(f"cannot run {program!r}: no such command on PATH")


def _run(command: list[str], env: dict) -> int:
    """The child's exit code; Ctrl-C reaches it from the terminal (same process group), a
    SIGTERM sent to commbench is passed on, and commbench waits for the child either way."""
    parent = os.getpid()
    try:
        # the command dies with commbench, kill -9 included: a test's timeout that killed
        # `commbench record` left its torchrun holding port 29500 (make compat, 2026-12-02);
        # SIGTERM lets torchrun stop its ranks, whose recorders flush on it
        child = subprocess.Popen(command, env=env, preexec_fn=lambda: die_with_parent(
            signal.SIGTERM, 128 + signal.SIGTERM, parent))
    except FileNotFoundError:
        raise UsageError(f"cannot run {command[0]!r}: no such command") from None
    except PermissionError:
        raise UsageError(f"cannot run {command[0]!r}: permission denied") from None

    def forward(signum, frame):
        child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def _summarize(folder: Path, code: int) -> None:
    """What was recorded, in a few lines on stderr (stdout stays the job's)."""
    from commbench.results import trace as trace_format

    try:
        trace = trace_format.load(folder)
    except trace_format.TraceError:
        print(f"commbench record: nothing recorded in {folder}: no process of the command "
              "called torch.distributed.init_process_group", file=sys.stderr)
        return
    calls = sum(len(rank.calls) for rank in trace.ranks.values())
    split = trace_format.step_split(trace)
    steps = list(split.steps) or trace.steps() or [0]
    left_out = split.left_out()
    print(f"commbench record: {calls} calls on {len(trace.ranks)} of {trace.world_size} ranks, "
          f"{len(split.steps)} step(s) ({_span(steps)}), in {folder}"
          + ("" if code == 0 else f" (the command exited {code})"), file=sys.stderr)
    if left_out:
        print(f"commbench record: not steps: {left_out}", file=sys.stderr)
    if split.fallback:
        print(f"commbench record: note: {split.fallback}", file=sys.stderr)
    for note in trace.notes:
        print(f"commbench record: warning: {note}", file=sys.stderr)
    for problem in trace_format.check_order(trace):
        print(f"commbench record: warning: {problem}", file=sys.stderr)
    rank0 = trace.ranks[min(trace.ranks)]
    step = steps[-1]
    per_op: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for call in rank0.calls:
        if call.step == step:
            per_op[(call.op, call.dtype)][0] += 1
            per_op[(call.op, call.dtype)][1] += call.size_bytes
    for (op, dtype), (count, size) in sorted(per_op.items()):
        print(f"  rank {rank0.rank}, step {step}: {op} {dtype}: {count} calls, {size} bytes",
              file=sys.stderr)
    _answer(trace, folder)


def _answer(trace, folder: Path) -> None:
    """Who made the others wait, in one line (commbench stragglers has the evidence)."""
    from commbench import stragglers

    try:
        analysis = stragglers.analyse(trace)
    except Exception as error:  # the job's own exit code must come through whatever the trace
        print(f"commbench record: stragglers could not judge this trace ({error}); "
              f"commbench stragglers {folder} says more", file=sys.stderr)
        return
    if len(trace.ranks) < 2 or (not analysis.steps and not analysis.missing):
        return
    print(f"commbench record: {stragglers.one_line(analysis)} (commbench stragglers {folder})",
          file=sys.stderr)


def _span(steps: list[int]) -> str:
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
