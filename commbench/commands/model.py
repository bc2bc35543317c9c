"""``commbench model``: fit t = α + n/β per curve, write model.csv / model.json beside each run,
redraw its latency plot with the fits dashed, print the segments; a ps run's curves also
beside allreduce over the same workers, with the size where they cross (model/ps.py)."""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import asdict

from commbench.core.errors import EXIT_OK, UsageError
from commbench.results import LATENCY_PNG, load_run, rows_frame
from commbench.results.schema import op_label

MODEL_CSV = "model.csv"
MODEL_JSON = "model.json"
FORMULA = "t_us = alpha_us + size_bytes / (beta_gbps * 1e3)"


def _json_number(value):
    """JSON has no infinity: β = ∞ (no size dependence) and NaN are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_model(paths: list[str], json_out: bool) -> int:
    from commbench.model.fit import fit_run
    from commbench.model.ps import pair_with_baselines

    runs = [load_run(path) for path in paths]
    # Fit every run before writing anything, so a refused run leaves no half-written set.
    fitted = [(run, fit_run(run.rows, name=str(run.path))) for run in runs]
    for run, fits in fitted:
        for warning in run.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        pairs = pair_with_baselines(run.rows, fits)
        try:
            document = _write(run, fits, pairs)
        except OSError as error:
            raise UsageError(f"cannot write the model beside {run.path}: "
                             f"{error.strerror or error}") from None
        if json_out:
            print(json.dumps(document))
        else:
            _print_table(run.name, document["segments"])
            _print_beside(pairs)
            print(f"wrote {run.path / MODEL_CSV}, {run.path / MODEL_JSON}, "
                  f"{run.path / LATENCY_PNG}")
    return EXIT_OK


def _write(run, fits, pairs) -> dict:
    """model.csv, model.json and the latency plot with the fits, beside the run; a ps
    curve's busbw equivalent uses the factor its rows were measured with (max(1, W/S))."""
    from commbench.model.fit import COLUMNS, fit_lines, segment_records
    from commbench.output.plots import latency, series_label
    from commbench.results.launches import pooled_rows

    records = segment_records(fits)
    factors = {(p.ps.key.op, p.ps.key.pattern, p.ps.key.backend, p.ps.key.group_size,
                p.ps.key.dtype): p.load_factor for p in pairs}
    for record in records:
        factor = factors.get((record["op"], record["pattern"], record["backend"],
                              record["group_size"], record["dtype"]))
        if factor is not None:
            record["busbw_equiv_gbps"] = record["beta_gbps"] * factor
    with open(run.path / MODEL_CSV, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    document = {
        "run": run.name, "model": FORMULA,
        "segments": [{k: _json_number(v) for k, v in r.items()} for r in records],
    }
    if pairs:
        document["beside"] = [_json_numbers(pair.record()) for pair in pairs]
    (run.path / MODEL_JSON).write_text(json.dumps(document, indent=2) + "\n")
    with_dtype = len({fit.key.dtype for fit in fits}) > 1
    lines = {series_label(asdict(key), with_dtype): points
             for key, points in fit_lines(fits).items()}
    latency(rows_frame(pooled_rows(run.rows)), run.path / LATENCY_PNG, run.name, fits=lines)
    return document


def _json_numbers(value):
    """_json_number through dicts and lists."""
    if isinstance(value, dict):
        return {k: _json_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_numbers(v) for v in value]
    return _json_number(value)


def _print_beside(pairs) -> None:
    from commbench.output.console import make_console, terminal_width
    from commbench.output.crossover import beside_lines

    console = make_console()
    for line in beside_lines(pairs, terminal_width()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _number(value: float | None, digits: int) -> str:
    if value is None:  # model.json's null: an infinite beta (no size dependence)
        return "inf"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


def _columns():
    from commbench.output.tables import Column

    return [
        Column("op", left=True), Column("backend", drop=3, left=True),
        Column("dim", drop=4, left=True), Column("ranks", drop=5), Column("dtype", drop=6,
                                                                          left=True),
        Column("seg"), Column("sizes", left=True), Column("alpha", "us"),
        Column("beta", "GB/s"), Column("busbw", "GB/s", drop=2), Column("R2", drop=1),
        Column("worst", "%", drop=1), Column("fit", left=True),
    ]


def _fit_word(record: dict) -> str:
    """What the segment may be used for: a line, latency only, or nothing."""
    if not record["usable"]:
        return "no usable fit"
    return "latency only" if record["note"] == "latency only" else "alpha-beta"


def _print_table(name: str, records: list[dict]) -> None:
    from commbench.core.sizes import format_size
    from commbench.output.console import make_console, terminal_width
    from commbench.output.tables import render

    rows, notes = [], []
    for r in records:
        sizes = f"{format_size(r['size_lo'])}-{format_size(r['size_hi'])}"
        usable = r["usable"]
        flat = r["beta_gbps"] is None or math.isinf(r["beta_gbps"])
        rows.append([
            op_label(r["op"], r["pattern"]), r["backend"], r["dim"] or "world",
            str(r["group_size"]), r["dtype"], str(r["segment"]), sizes,
            _number(r["alpha_us"], 2) if usable else "-",
            _number(r["beta_gbps"], 3) if usable else "-",
            _number(r["busbw_equiv_gbps"], 3) if usable else "-",
            "-" if flat else _number(r["r2"], 4),  # flat: nothing for R² to explain
            _number(r["worst_residual_pct"], 1), _fit_word(r),
        ])
        if not usable:
            notes.append(f"{op_label(r['op'], r['pattern'])} {r['backend']} "
                         f"{r['dim'] or 'world'} {sizes}: no usable fit ({r['note']}); the "
                         "estimate will not read it (rerun with a larger --min-time, on an "
                         "idle machine)")
    console = make_console()
    console.print(f"# {name}: t = alpha + n / beta", markup=False, soft_wrap=True)
    for line in render(_columns(), rows, terminal_width()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in notes:
        console.print(f"note: {note}", markup=False, highlight=False)
