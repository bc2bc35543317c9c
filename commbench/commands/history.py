"""``commbench history add / show / check / report / export`` (docs/commands/history.md).
Specs in, exit code out.

The store, the series and the change points are commbench.history's; this module reads what
the user asked for, calls them, and hands plain data to the renderers in commbench.output
(console tables, trend PNGs, history.html). ``check`` is the CI side: exit 1 when a
regression change point lies within the last K complete runs of a series, so a nightly job can
fail on a slow drift that each pairwise gate let through.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from commbench.compare.runs import parse_threshold
from commbench.core.errors import EXIT_FINDING, EXIT_OK, UsageError
from commbench.core.sizes import parse_size
from commbench.history.store import DEFAULT_URL

FORMATS = ("openmetrics",)


@dataclass(frozen=True)
class ShowSpec:
    """history show's filters and outputs, every default stated once."""

    db: str = DEFAULT_URL
    op: str | None = None
    size: str | None = None
    backend: str | None = None
    cluster: str | None = None
    last: int = 10
    json_out: bool = False
    out: str = "results/history"
    plots: bool = True


@dataclass(frozen=True)
class CheckSpec:
    db: str = DEFAULT_URL
    threshold: str = "5%"
    last: int = 5
    json_out: bool = False


@dataclass(frozen=True)
class ReportSpec:
    db: str = DEFAULT_URL
    out: str = "results/history"
    threshold: str = "5%"
    last: int = 10


@dataclass(frozen=True)
class ExportSpec:
    db: str = DEFAULT_URL
    format: str = "openmetrics"
    last: int = 1
    out: str | None = None


def _positive(value: int, option: str) -> int:
    if value < 1:
        raise UsageError(f"bad {option} {value}: at least 1 run")
    return value


def _load(db: str):
    """(runs in start order, every series) from the store."""
    from commbench.history.series import build_series
    from commbench.history.store import Store

    with Store(db) as store:
        runs = store.runs()
        return runs, build_series(runs, store.points(), store.entities())


# ---- add --------------------------------------------------------------------------------------

def run_history_add(folders: list[str], db: str = DEFAULT_URL, cluster: str | None = None,
                    commit: str | None = None) -> int:
    from commbench.history import add_runs

    if not folders:
        raise UsageError("no run folders given")
    for line in add_runs(db, folders, cluster=cluster, commit=commit):
        print(line, file=sys.stderr if line.startswith("note:") else sys.stdout)
    return EXIT_OK


# ---- show -------------------------------------------------------------------------------------

def run_history_show(spec: ShowSpec) -> int:
    from commbench.history.series import changes, select

    _positive(spec.last, "--last")
    size = parse_size(spec.size) if spec.size else None
    runs, series = _load(spec.db)
    shown = select(series, op=spec.op, size_bytes=size, backend=spec.backend,
                   cluster=spec.cluster)
    if not shown:
        raise UsageError(f"no series in {spec.db} match the filters" if series else
                         f"{spec.db} holds no series yet")
    findings = {s.key: changes(s, 0.05) for s in shown}
    ids = list(dict.fromkeys(o.run.run_id for s in shown for o in s.observations))
    wanted = set(ids[-spec.last:])
    recent = [run for run in runs if run.run_id in wanted]
    if spec.json_out:
        print(json.dumps(_show_json(recent, shown, findings, spec.last)))
    else:
        for line in _show_lines(recent, shown, findings):
            print(line)
    if spec.plots:
        paths = [_trend_png(Path(spec.out), s, findings[s.key]) for s in shown]
        print(f"wrote {len(paths)} trend plot(s) to {spec.out}",
              file=sys.stderr if spec.json_out else sys.stdout)
    return EXIT_OK


def _value_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _show_lines(recent, shown, findings) -> list[str]:
    from commbench.output.console import terminal_width
    from commbench.output.tables import Column, render

    lines = [f"runs, oldest first (the last {len(recent)}):"]
    for number, run in enumerate(recent, start=1):
        commit = f"  commit {run.commit[:12]}" if run.commit else ""
        lines.append(f"  #{number:<3} {run.run_id}  {run.start_time}  {run.status}"
                     f"  cluster {run.cluster}{commit}")
    columns = [Column("series", left=True), Column("metric", left=True)]
    columns += [Column(f"#{n}") for n in range(1, len(recent) + 1)]
    columns.append(Column("last change", left=True, drop=1))
    rows, hidden = [], 0
    for one in shown:
        values = {o.run.run_id: o.value for o in one.observations}
        if not any(run.run_id in values for run in recent):
            hidden += 1
            continue
        found = findings[one.key]
        last = found[-1] if found else None
        change = (f"{last.verdict} {last.change.ratio:.2f}x at {last.run_id}" if last else "-")
        metric = "lat_us_p50 (us)" if one.key.higher_is_worse else "busbw ratio"
        rows.append([one.key.label(), metric,
                     *[_value_text(values.get(run.run_id)) for run in recent], change])
    lines += render(columns, rows, terminal_width())
    if hidden:
        lines.append(f"({hidden} series without a value in these runs left out: --cluster, "
                     "--op or a larger --last shows them)")
    return lines


def _show_json(recent, shown, findings, last: int) -> dict:
    return {
        "runs": [_run_json(run) for run in recent],
        "series": [{**one.key.as_json(), "label": one.key.label(),
                    "points": [{"run": o.run.run_id, "start_time": o.run.start_time,
                                "status": o.run.status, "value": o.value,
                                "busbw_gbps": o.busbw_gbps}
                               for o in one.observations[-last:]],
                    "change_points": [_finding_json(f) for f in findings[one.key]]}
                   for one in shown]}


def _run_json(run) -> dict:
    return {"run": run.run_id, "start_time": run.start_time, "status": run.status,
            "kind": run.kind, "cluster": run.cluster, "commit": run.commit, "torch": run.torch,
            "nccl": run.nccl, "world_size": run.world_size, "backend": run.backend}


def _trend_png(out: Path, one, found) -> Path:
    from commbench.output.history_plots import TrendChange, trend

    observations = one.observations
    usable_positions = [i for i, o in enumerate(observations) if o.run.usable]
    marks = []
    for finding in found:
        change = finding.change
        # The change's segments are counted in complete runs; the plot shows every run.
        before_start = usable_positions[_segment_start(found, finding)]
        end_index = _segment_end(found, finding, len(usable_positions))
        marks.append(TrendChange(position=usable_positions[change.index],
                                 verdict=finding.verdict, ratio=change.ratio,
                                 before=change.before, after=change.after, start=before_start,
                                 end=usable_positions[end_index - 1] + 1))
    ylabel = "median latency (us)" if one.key.higher_is_worse else "busbw / fleet median"
    path = out / f"history-{one.key.slug()}.png"
    try:
        trend(path, one.key.label(), [o.run.run_id for o in observations],
              [o.value for o in observations], [o.run.usable for o in observations], marks,
              ylabel, [o.lat_ci for o in observations] if one.key.higher_is_worse else None)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def _segment_start(found, finding) -> int:
    earlier = [f.change.index for f in found if f.change.index < finding.change.index]
    return max(earlier, default=0)


def _segment_end(found, finding, total: int) -> int:
    later = [f.change.index for f in found if f.change.index > finding.change.index]
    return min(later, default=total)


# ---- check ------------------------------------------------------------------------------------

def _finding_json(finding) -> dict:
    key, change = finding.series, finding.change
    sides = ({"before_us": round(change.before, 3), "after_us": round(change.after, 3)}
             if key.higher_is_worse else
             {"before": round(change.before, 4), "after": round(change.after, 4)})
    return {"op": key.op, "size_bytes": key.size_bytes, "backend": key.backend,
            "world_size": key.world_size, "cluster": key.cluster, "run": finding.run_id,
            "index": change.index, **sides, "ratio": round(change.ratio, 4),
            "verdict": finding.verdict, "dtype": key.dtype, "dim": key.dim,
            "variant": key.variant, "metric": key.metric, "p_value": round(change.p_value, 4),
            "routing": key.routing, "split_id": key.split_id,
            "runs_since": finding.recent}


def run_history_check(spec: CheckSpec) -> int:
    from commbench.history.series import changes

    threshold = parse_threshold(spec.threshold)
    _positive(spec.last, "--last")
    runs, series = _load(spec.db)
    findings = [f for one in series for f in changes(one, threshold)]
    failing = [f for f in findings if f.verdict == "regression" and f.recent <= spec.last]
    if spec.json_out:
        print(json.dumps({"series": len(series), "runs": len(runs),
                          "change_points": [_finding_json(f) for f in findings]}))
    else:
        for line in _check_lines(series, runs, findings, threshold, spec.last):
            print(line)
    if failing:
        print(f"error: {len(failing)} regression change point(s) within the last {spec.last} "
              "run(s) of their series", file=sys.stderr)
        return EXIT_FINDING
    return EXIT_OK


def _check_lines(series, runs, findings, threshold: float, last: int) -> list[str]:
    from commbench.output.console import terminal_width
    from commbench.output.tables import Column, render

    regressions = sum(f.verdict == "regression" for f in findings)
    head = (f"{len(series)} series over {len(runs)} runs: {regressions} regression(s), "
            f"{len(findings) - regressions} improvement(s) (threshold {threshold:.0%})")
    if not findings:
        return [head]
    columns = [Column("series", left=True), Column("first run after", left=True),
               Column("index"), Column("before"), Column("after"), Column("ratio"),
               Column("verdict", left=True), Column("runs since"), Column("p", drop=1)]
    rows = [[f.series.label(), f.run_id, str(f.change.index), _value_text(f.change.before),
             _value_text(f.change.after), f"{f.change.ratio:.2f}x",
             f.verdict + (" (recent)" if f.verdict == "regression" and f.recent <= last else ""),
             str(f.recent), f"{f.change.p_value:.3f}"] for f in findings]
    return [head, *render(columns, rows, terminal_width())]


# ---- report -----------------------------------------------------------------------------------

def run_history_report(spec: ReportSpec) -> int:
    from commbench.history.series import changes
    from commbench.output.history_html import Table, TrendSection, write_history_html

    threshold = parse_threshold(spec.threshold)
    _positive(spec.last, "--last")
    runs, series = _load(spec.db)
    out = Path(spec.out)
    findings = {s.key: changes(s, threshold) for s in series}
    flat = [f for found in findings.values() for f in found]
    trends = []
    for one in series:
        png = _trend_png(out, one, findings[one.key])
        latest = one.observations[-1]
        trends.append(TrendSection(one.key.label(), png,
                                   f"{len(one.observations)} runs; latest {latest.run.run_id}: "
                                   f"{_value_text(latest.value)}"
                                   f"{' us' if one.key.higher_is_worse else ''}"))
    change_table = Table(
        ["series", "first run after", "before", "after", "ratio", "verdict", "runs since"],
        [[f.series.label(), f.run_id, _value_text(f.change.before),
          _value_text(f.change.after), f"{f.change.ratio:.2f}x", f.verdict, str(f.recent)]
         for f in flat], verdict_column=5)
    latest_runs = Table(
        ["run", "started (UTC)", "status", "kind", "cluster", "commit", "torch", "NCCL",
         "world size", "backend"],
        [[r.run_id, r.start_time, r.status, r.kind, r.cluster, r.commit[:12] or "-",
          r.torch or "-", r.nccl or "-", str(r.world_size), r.backend or "-"]
         for r in reversed(runs[-spec.last:])])
    summary = [f"{len(series)} series over {len(runs)} runs in {_shown(spec.db)}; change points "
               f"beyond {threshold:.0%} (partial runs are shown hollow and never judged)."]
    try:
        path = write_history_html(out / "history.html", "commbench history", summary,
                                  change_table, trends, latest_runs)
    except OSError as error:
        raise UsageError(f"cannot write --out {spec.out}: {error.strerror or error}") from None
    print(f"wrote {path} ({len(series)} series, {len(flat)} change point(s))")
    return EXIT_OK


def _shown(db: str) -> str:
    import sqlalchemy as sa

    return sa.make_url(db).render_as_string(hide_password=True)


# ---- export -----------------------------------------------------------------------------------

def run_history_export(spec: ExportSpec) -> int:
    from commbench.history.openmetrics import openmetrics_text

    if spec.format not in FORMATS:
        raise UsageError(f"bad --format {spec.format!r}: {', '.join(FORMATS)}")
    _positive(spec.last, "--last")
    _runs, series = _load(spec.db)
    text = openmetrics_text(series, spec.last)
    if spec.out is None:
        sys.stdout.write(text)
        return EXIT_OK
    target = Path(spec.out)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:  # renamed into place: a textfile collector never reads half a file
        temporary.write_text(text)
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):  # no folder to hold it: nothing to remove either
            temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write --out {spec.out}: {error.strerror or error}") from None
    print(f"wrote {target} ({sum(len(s.usable[-spec.last:]) for s in series)} series values)",
          file=sys.stderr)
    return EXIT_OK

