"""``commbench compare``: runs in, table / Markdown / JSON / plots and a verdict out.

A CI gate must never pass on a gap it did not see: rows kept apart, sizes one run lacks and a
partial or failed run are all named, and --fail-on-regression fails on a partial or failed run
unless --allow-partial says that is expected.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from commbench.compare.runs import Comparison, compare_runs, parse_threshold
from commbench.core.errors import EXIT_FINDING, EXIT_OK, UsageError
from commbench.results import load_run

STYLES = {"slower": "red", "faster": "green", "noisy": "yellow"}


def run_compare(paths: list[str], threshold_text: str, metric: str, sizes: str | None,
                fail_on_regression: bool, markdown: str | None, json_rows: bool,
                out: str | None, allow_partial: bool = False) -> int:
    from commbench.output import console as tables
    from commbench.output.comparison import table_records
    from commbench.output.tables import Layout
    from commbench.results.locate import is_locate_run

    if paths and all(is_locate_run(path) for path in paths):  # locate runs: per entity
        return run_locate_compare(paths, json_rows, fail_on_regression)
    _refuse_mixed_kinds(paths)
    threshold = parse_threshold(threshold_text)
    runs = [load_run(path) for path in paths]
    result = compare_runs(runs, metric, threshold, sizes)
    notes = _notes(runs, result)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    columns, rows = with_ratio_interval(*table_records(result.frame, metric),
                                        result.frame)
    summary = _summary(result, threshold, metric)
    if json_rows:
        for record in result.frame.to_dict("records"):
            print(json.dumps({k: _plain(v) for k, v in record.items()}))
        print(json.dumps({"summary": {**result.counts(), "threshold": threshold,
                                      "metric": metric, "kept_apart": result.apart,
                                      "missing": result.missing,
                                      "incomplete": result.incomplete,
                                      "warnings": result.warnings}}))
    else:
        console = tables.make_console()
        if result.sources:
            base, new = result.sources
            overhead = (f" (run on the same machine: the overhead of torch.distributed over "
                        f"{base})" if new == "commbench" else "")
            console.print(f"{new} vs {base}: ratio = {new} / {base}; delta = the "
                          f"microseconds {new} adds per call{overhead}", markup=False)
        layout = Layout(columns, rows, tables.terminal_width())
        for line in layout.header():
            console.print(line, style="bold", markup=False, highlight=False, soft_wrap=True)
        verdict = [c.name for c in columns].index("verdict")
        for cells in rows:
            for line in layout.row(cells):
                console.print(line, style=STYLES.get(cells[verdict]), markup=False,
                              highlight=False, soft_wrap=True)
        console.print(summary, markup=False, soft_wrap=True)
    if markdown:
        _append_markdown(markdown, columns, rows, summary, notes)
    if out:
        from commbench.output.report import overlay_plots

        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            overlay_plots(runs, Path(out), result.frame, threshold, metric)
        except OSError as error:
            raise UsageError(f"cannot write --out {out}: {error.strerror or error}") from None
    if fail_on_regression:
        reasons = []
        if result.counts()["slower"]:
            reasons.append(f"{result.counts()['slower']} row(s) slower")
        if result.incomplete and not allow_partial:
            reasons.append(f"{'; '.join(result.incomplete)}: a partial or failed run cannot "
                           "pass the gate (add --allow-partial to accept it)")
        # A gap is no pass: rows kept apart were not compared, and sizes one side lacks were
        # not measured (in a partial run that --allow-partial accepts, lacking is expected).
        if result.apart:
            reasons.append(f"{len(result.apart)} row group(s) kept apart, not compared")
        if result.missing and not (allow_partial and result.incomplete):
            reasons.append(f"{len(result.missing)} series lack sizes the other run has")
        if reasons:
            print(f"error: {'; '.join(reasons)}", file=sys.stderr)
            return EXIT_FINDING
    return EXIT_OK


def with_ratio_interval(columns, rows, frame):
    """The table's columns with the ratio's 95 % interval after the ratio (the verdict's
    evidence: slower needs all of it above 1)."""
    from commbench.output.tables import Column

    at = [c.name for c in columns].index("ratio") + 1
    cells = [f"{lo:.2f}-{hi:.2f}" if lo == lo and hi == hi else "-"
             for lo, hi in zip(frame["ratio_lo"], frame["ratio_hi"], strict=True)]
    columns = [*columns[:at], Column("ratio CI", "95%", drop=2), *columns[at:]]
    return columns, [[*row[:at], cell, *row[at:]] for row, cell in zip(rows, cells, strict=True)]


def _notes(runs, result: Comparison) -> list[str]:
    notes = [warning for run in runs for warning in run.warnings]
    notes += result.warnings + result.incomplete + result.apart + result.missing
    return notes


def _summary(result: Comparison, threshold: float, metric: str) -> str:
    counts = result.counts()
    text = (f"{counts['slower']} slower, {counts['faster']} faster, {counts['noisy']} noisy, "
            f"{counts['same']} same (threshold {threshold:.0%}, metric {metric})")
    gaps = []
    if result.apart:
        gaps.append(f"{len(result.apart)} kind(s) of rows kept apart")
    if result.missing:
        gaps.append(f"{len(result.missing)} series with sizes missing")
    if result.incomplete:
        gaps.append("; ".join(result.incomplete))
    return text + (f"; {'; '.join(gaps)}" if gaps else "")


def _append_markdown(path: str, columns, rows, summary: str, notes: list[str]) -> None:
    from commbench.output.markdown import markdown_table
    from commbench.output.tables import headers_of

    text = "## commbench compare\n\n" + markdown_table(headers_of(columns), rows)
    text += f"\n\n{summary}\n"
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    try:
        with open(path, "a") as handle:
            handle.write(text + "\n")
    except OSError as error:
        raise UsageError(f"cannot write --markdown {path}: {error.strerror}") from None


def _plain(value):
    """JSON-friendly: numpy scalars as Python values, NaN as null."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


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
