"""``commbench ab -- COMMAND``: one measuring command as side A and side B in alternated
launches (A B B A A B ...), judged on the paired launch ratios, shown as compare shows a
comparison (the same table, verdicts, --markdown, --json and exit codes).

Why alternated launches in one job: a fresh launch lands on a fast or a slow level of the
machine, and a slow hour moves every launch in it; launches of the two sides side by side in
time share both, so the ratio of a pair is what the sides' difference made (Chromium's
Pinpoint alternates repetitions, asv's ``continuous`` runs both sides in one job).

Each launch is a subprocess ``<python> -m commbench COMMAND ... --out <run>/launches --name
<side>-<pair>``, with the side's environment variables; its rows go into the side's folder
(``A/``, ``B/``) with ``launch`` = the pair, as ``--repeat`` writes them, so ``compare A B``
pools them too. Both folders, every launch's own folder and ``compare.json`` are kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from commbench.core.errors import (
    EXIT_FINDING,
    EXIT_OK,
    EXIT_USAGE,
    RunFailed,
    UsageError,
)
from commbench.specs.ab import ABSpec

SIDES = ("A", "B")
PROBE_TIMEOUT_S = 120.0


def launch_order(pairs: int) -> list[tuple[int, str]]:
    """(pair, side) in the order they run: A B, B A, A B ... (each side first in half the
    pairs, so a drift within a pair favours neither)."""
    return [(pair, side) for pair in range(pairs)
            for side in (SIDES if pair % 2 == 0 else SIDES[::-1])]


def run_ab(spec: ABSpec) -> int:
    from commbench import results
    from commbench.output.console import say

    pythons = {"A": _python(spec.python_a, "--python-a"), "B": _python(spec.python_b,
                                                                       "--python-b")}
    envs = {"A": dict(spec.env_a), "B": dict(spec.env_b)}
    for side in SIDES:  # the command's own options are refused now, not after side A ran
        _dry_run(pythons[side], spec.command, envs[side], side)
    run_id = spec.name or f"ab-{results.now()[:19].replace(':', '').replace('-', '')}"
    root = results.create(spec.out, run_id, force=spec.force, generated=spec.name is None)
    launches = root / "launches"
    launches.mkdir()
    order = launch_order(spec.pairs)
    wrong = 0
    for done, (pair, side) in enumerate(order):
        say(f"ab: launch {done + 1} of {len(order)}: side {side}, pair {pair + 1} of "
            f"{spec.pairs} ...")
        try:
            wrong += _launch(pythons[side], spec, envs[side], launches, root / side, side, pair)
        except RunFailed as error:
            for name in SIDES:
                _finish(root / name, "partial", str(error))
            say(f"error: {error}")
            say(f"kept every launch that ended in {root}")
            return error.exit_code
    for side in SIDES:
        _finish(root / side, "complete")
    code = _judge(root, spec)
    if wrong:
        say(f"error: {wrong} wrong element(s) in the launches (see the #wrong column of "
            f"{root / 'A'} and {root / 'B'})")
        return EXIT_FINDING
    return code


def _python(executable: str | None, flag: str) -> str:
    """The side's Python: the one running ab, or an executable that imports commbench."""
    if executable is None:
        return sys.executable
    if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        raise UsageError(f"bad {flag} {executable}: not an executable file")
    try:
        # Away from the working directory, whose commbench/ folder any Python would import.
        probe = subprocess.run([executable, "-c", "import commbench.cli"], capture_output=True,
                               text=True, timeout=PROBE_TIMEOUT_S, cwd=tempfile.gettempdir())
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(f"bad {flag} {executable}: it does not run ({error})") from None
    if probe.returncode != 0:
        raise UsageError(f"bad {flag} {executable}: commbench cannot be imported there "
                         f"(pip install it into that environment)")
    return executable


def _environment(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def _dry_run(python: str, command: tuple[str, ...], env: dict[str, str], side: str) -> None:
    """The command's --dry-run on the side's Python: its bad options are one line, exit 2."""
    done = subprocess.run([python, "-m", "commbench", *command, "--dry-run"],
                          capture_output=True, text=True, env=_environment(env))
    if done.returncode == EXIT_USAGE:
        raise UsageError(f"side {side}: {_last_line(done.stderr)}")
    if done.returncode != EXIT_OK:
        raise UsageError(f"side {side}: `commbench {' '.join(command)} --dry-run` exited "
                         f"{done.returncode}: {_last_line(done.stderr)}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "no message"
    return last[len("error: "):] if last.startswith("error: ") else last


def _launch(python: str, spec: ABSpec, env: dict[str, str], launches: Path, side_folder: Path,
            side: str, pair: int) -> int:
    """One launch of one side; its rows appended to the side's folder as launch ``pair``.
    Returns the wrong elements it found; raises RunFailed when it did not end."""
    from commbench import results

    name = f"{side}-{pair}"
    done = subprocess.run([python, "-m", "commbench", *spec.command, "--out", str(launches),
                           "--name", name, "--quiet"], capture_output=True, text=True,
                          env=_environment(env))
    folder = launches / name
    if done.returncode not in (EXIT_OK, EXIT_FINDING) or not (folder / results.JSONL).exists():
        raise RunFailed(f"side {side}, pair {pair + 1}: the launch exited {done.returncode}: "
                        f"{_last_line(done.stderr)}")
    rows = results.read_rows(folder)
    meta = results.read_meta(folder)
    side_folder.mkdir(exist_ok=True)
    if not (side_folder / results.RUN_JSON).exists():
        (side_folder / results.RUN_JSON).write_text(json.dumps(
            {**meta, "name": side_folder.name, "repeat": spec.pairs, "launch": None,
             "ab": {"side": side, "env": dict(getattr(spec, f"env_{side.lower()}")),
                    "python": python, "command": list(spec.command)}}, indent=1) + "\n")
    with open(side_folder / results.JSONL, "a") as handle:
        for row in rows:
            handle.write(json.dumps({**row, "launch": pair}) + "\n")
    return sum(int(row.get("wrong") or 0) for row in rows)


def _finish(folder: Path, status: str, error: str = "") -> None:
    """The side's folder as a --repeat run ends: status, CSV, the pooled summary and plots."""
    from commbench import results
    from commbench.output.files import write_run_files
    from commbench.results.launches import pooled_run

    if not (folder / results.RUN_JSON).exists():
        return
    write_run_files(pooled_run(results.finalize(folder, status, error)))


def _judge(root: Path, spec: ABSpec) -> int:
    """compare's table and gate over the paired launch ratios."""
    from commbench.compare.familywise import judge
    from commbench.compare.gate import gate_failures, summary_lines
    from commbench.compare.paired import paired_rows
    from commbench.compare.runs import Comparison, incomplete_runs
    from commbench.output import gate as shown
    from commbench.results import load_run

    sides = [load_run(root / side) for side in SIDES]
    frame, apart, missing = paired_rows(sides[0].rows, sides[1].rows, spec.threshold)
    frame = frame.assign(base="A", candidate="B", noise=f"paired launches ({spec.pairs})",
                         run_spread=None)
    result = Comparison(frame=frame, apart=apart, missing=missing,
                        incomplete=incomplete_runs(sides))
    gate = judge(result.frame, spec.alpha)
    noise = (f"noise: paired launches (A B B A ..., {spec.pairs} pairs): each row's interval "
             "is Student's t over its launch ratios B/A")
    lines = summary_lines(result, spec.threshold, "lat_us_p50", gate, None, noise)
    notes = [*result.apart, *result.missing, *result.incomplete]
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    columns, rows = shown.gate_table(result.frame, "lat_us_p50", spec.alpha)
    summary = {**result.counts(), "threshold": spec.threshold, "metric": "lat_us_p50",
               "alpha": spec.alpha, "rule": gate.rule, "familywise_slower": gate.slower,
               "noise": noise, "pairs": spec.pairs, "env_a": dict(spec.env_a),
               "env_b": dict(spec.env_b), "command": list(spec.command),
               "folders": [str(root / side) for side in SIDES], "kept_apart": result.apart,
               "missing": result.missing, "incomplete": result.incomplete}
    shown.write_json(root / "compare.json", result.frame, summary)
    if spec.json_rows:
        shown.print_json(result.frame, summary)
    else:
        shown.print_table(columns, rows, lines, f"ab: B / A over {spec.pairs} pairs of "
                                                f"launches; A and B in {root}")
    if spec.markdown:
        shown.append_markdown(spec.markdown, "commbench ab", columns, rows, lines, notes)
    if spec.fail_on_regression:
        reasons = gate_failures(result, gate, allow_partial=False)
        if reasons:
            print(f"error: {'; '.join(reasons)}", file=sys.stderr)
            return EXIT_FINDING
    return EXIT_OK
