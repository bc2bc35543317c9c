"""``commbench compare``: runs in, table / Markdown / JSON / plots and a verdict out.

A CI gate must never pass on a gap it did not see: rows kept apart, sizes one run lacks and a
partial or failed run are all named, and --fail-on-regression fails on a partial or failed run
unless --allow-partial says that is expected. The gate is judged per run: it fails only on
slower rows that survive Holm's correction at --alpha (compare.familywise), and each row's
interval is widened by its series' run-to-run spread when a history store is named
(--noise-from, or the --history the baseline was stored in: compare.noise).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from commbench.compare.familywise import DEFAULT_ALPHA, judge
from commbench.compare.gate import gate_failures, summary_lines
from commbench.compare.noise import holds_from
from commbench.compare.runs import Comparison, compare_runs, parse_threshold
from commbench.core.errors import EXIT_FINDING, EXIT_OK, CommbenchError, UsageError
from commbench.results import load_run


def run_compare(paths: list[str], threshold_text: str, metric: str, sizes: str | None,
                fail_on_regression: bool, markdown: str | None, json_rows: bool,
                out: str | None, allow_partial: bool = False, alpha: float = DEFAULT_ALPHA,
                noise_from: str | None = None) -> int:
    from commbench.output import gate as shown
    from commbench.results.locate import is_locate_run

    if paths and all(is_locate_run(path) for path in paths):  # locate runs: per entity
        return run_locate_compare(paths, json_rows, fail_on_regression)
    _refuse_mixed_kinds(paths)
    threshold = parse_threshold(threshold_text)
    runs = [load_run(path) for path in paths]
    result = compare_runs(runs, metric, threshold, sizes)
    source = _history_noise(runs, result, threshold, metric, noise_from)
    if "noise" not in result.frame:  # --json and compare.json name the noise of every row
        result.frame["noise"], result.frame["run_spread"] = "within-run", None
    gate = judge(result.frame, alpha)
    notes = _notes(runs, result)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    columns, rows = shown.gate_table(result.frame, metric, alpha)
    floor = holds_from(result.frame, alpha, threshold)  # the line and --json say the same
    lines = summary_lines(result, threshold, metric, gate, source, floor=floor)
    summary = {**result.counts(), "threshold": threshold, "metric": metric, "alpha": alpha,
               "rule": gate.rule, "familywise_slower": gate.slower, "noise": lines[-1],
               "noise_from": source, "holds_from": floor,
               "kept_apart": result.apart, "missing": result.missing,
               "incomplete": result.incomplete, "warnings": result.warnings}
    if json_rows:
        shown.print_json(result.frame, summary)
    else:
        header = None
        if result.sources:
            base, new = result.sources
            overhead = (f" (run on the same machine: the overhead of torch.distributed over "
                        f"{base})" if new == "commbench" else "")
            header = (f"{new} vs {base}: ratio = {new} / {base}; delta = the microseconds "
                      f"{new} adds per call{overhead}")
        shown.print_table(columns, rows, lines, header)
    if markdown:
        shown.append_markdown(markdown, "commbench compare", columns, rows, lines, notes)
    if out:
        from commbench.output.report import overlay_plots

        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            shown.write_json(Path(out) / "compare.json", result.frame, summary)
            overlay_plots(runs, Path(out), result.frame, threshold, metric)
        except OSError as error:
            raise UsageError(f"cannot write --out {out}: {error.strerror or error}") from None
    if fail_on_regression:
        reasons = gate_failures(result, gate, allow_partial)
        if reasons:
            print(f"error: {'; '.join(reasons)}", file=sys.stderr)
            return EXIT_FINDING
    return EXIT_OK


def _store_url(text: str) -> str:
    """A SQLAlchemy URL as given, or a plain path read as a SQLite file."""
    return text if "://" in text else f"sqlite:///{text}"


def _history_of(run) -> str | None:
    """The --history URL the run was stored with (its command line), if any."""
    line = [str(part) for part in run.meta.get("command_line") or []]
    for index, part in enumerate(line):
        if part == "--history" and index + 1 < len(line):
            return line[index + 1]
        if part.startswith("--history="):
            return part.split("=", 1)[1]
    return None


def _history_noise(runs, result: Comparison, threshold: float, metric: str,
                   noise_from: str | None) -> str | None:
    """Widen the intervals by the baseline's series' spread in a history store: the one
    --noise-from names (its errors are the user's: exit 2 or 3), else the one the baseline
    was stored in with --history (where it cannot be read, within-run noise and a warning).
    Returns the store used, or None."""
    from commbench.compare.noise import apply_run_spread, robust_log_spread
    from commbench.history.spread import past_medians

    url = _store_url(noise_from) if noise_from else _history_of(runs[0])
    if url is None or len(runs) < 2:
        if noise_from:
            raise UsageError("--noise-from needs a baseline and a new run (two folders)")
        return None
    base = runs[0]
    try:
        found = past_medians(url, result.frame.to_dict("records"),
                             str(base.meta.get("name") or base.path.name),
                             [str(h) for h in base.meta.get("hosts") or []],
                             leave_out=[str(r.meta.get("name") or r.path.name)
                                        for r in runs[1:]])
    except CommbenchError as error:
        if noise_from:
            raise
        result.warnings.append(f"the baseline's --history store {url} cannot be read "
                               f"({error}): within-run noise only")
        return None
    if found.note:
        result.warnings.append(found.note)
    apply_run_spread(result.frame, [robust_log_spread(m) for m in found.medians], threshold,
                     metric, url)
    return url


def _notes(runs, result: Comparison) -> list[str]:
    notes = [warning for run in runs for warning in run.warnings]
    notes += result.warnings + result.incomplete + result.apart + result.missing
    return notes


def run_locate_compare(paths: list[str], json_rows: bool, fail_on_regression: bool) -> int:
    """Two locate runs per entity and link. An entity or link one side did not measure is
    'not measured' and fails --fail-on-regression, like a bad one: a gate must not pass on
    what it did not see."""
    from commbench.compare.locate import FAILING, compare, entity_counts, load, unmeasured
    from commbench.output.locate import compare_lines

    if len(paths) != 2:
        raise UsageError("compare of locate runs takes two folders: BEFORE AFTER")
    before, after = (load(p) for p in paths)
    if before["level"] != after["level"]:
        raise UsageError(f"{paths[0]} is at {before['level']} level and {paths[1]} at "
                         f"{after['level']}: their entities cannot be paired")
    rows = compare(before, after)
    if json_rows:
        for row in rows:
            print(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                              for k, v in row.items()}))
    else:
        for line in compare_lines(rows, paths):
            print(line)
    counts = [entity_counts(run) for run in (before, after)]
    missing = unmeasured(rows)
    if counts[0] != counts[1] or any(missing.values()):
        print(f"warning: {paths[0]} measured {counts[0][1]} of {counts[0][0]} entities, "
              f"{paths[1]} {counts[1][1]} of {counts[1][0]}"
              + "".join(f"; not measured in {path}: {', '.join(missing[side])}"
                        for side, path in zip(("before", "after"), paths, strict=True)
                        if missing[side]), file=sys.stderr)
    worse = [r for r in rows if r["change"] in FAILING]
    bad = [r for r in worse if r["change"] != "not measured"]
    if bad:
        print(f"warning: {len(bad)} entit(ies) or link(s) bad in {paths[1]}: "
              + ", ".join(f"{r['entity']} ({r['change']})" for r in bad), file=sys.stderr)
    if worse and fail_on_regression:
        print(f"error: {len(worse)} entit(ies) or link(s) bad or not measured on one side: "
              "--fail-on-regression fails", file=sys.stderr)
        return EXIT_FINDING
    return EXIT_OK


def _refuse_mixed_kinds(paths: list[str]) -> None:
    """compare pairs like with like: two sweeps (rows) or two locate runs (entities)."""
    from commbench.results import folder_kind

    kinds = {path: folder_kind(path) for path in paths}
    others = {path: kind for path, kind in kinds.items() if kind not in (None, "sweep")}
    if others:
        path, kind = next(iter(others.items()))
        article = "an" if kind[0] in "aeiou" else "a"
        raise UsageError(f"{path} is {article} {kind} {'folder' if kind == 'trace' else 'run'}: "
                         "compare needs two sweeps or two locate runs")
