"""``commbench estimate``: communication time per training step from a run's measured curves."""

from __future__ import annotations

import json
import sys

from commbench.errors import EXIT_OK
from commbench.results import load_run


def run_estimate(path: str, params: str, dtype: str, dp: int, tp: int, pp: int, zero: str,
                 bucket: str, first_bucket: str, layers: int | None, hidden: int | None,
                 seq: int | None, micro_batch: int, micro_batches: int,
                 sequence_parallel: bool, json_out: bool) -> int:
    from commbench.analysis.estimate import NO_OVERLAP, estimate, step_spec

    # Inputs are checked before the run is read: a bad option is reported as itself.
    spec = step_spec(params, dtype=dtype, dp=dp, tp=tp, pp=pp, zero=zero, bucket=bucket,
                     first_bucket=first_bucket, layers=layers, hidden=hidden, seq=seq,
                     micro_batch=micro_batch, micro_batches=micro_batches,
                     sequence_parallel=sequence_parallel)
    run = load_run(path)
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = estimate(run.rows, spec)
    if json_out:
        print(json.dumps(result.as_dict()))
        return EXIT_OK
    _print(run.name, spec, result)
    print(NO_OVERLAP)
    return EXIT_OK


def _count(value: float) -> str:
    """7e9 -> '7B', 1.3e9 -> '1.3B' (powers of 1000, as --params reads them)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.4g}{unit}"
    return f"{value:.0f}"


def _seconds(value: float) -> str:
    return f"{value * 1e3:.3f}"


def _print(name: str, spec, result) -> None:
    from commbench.analysis.estimate import NO_OVERLAP
    from commbench.output.console import make_console, terminal_width
    from commbench.output.tables import Column, render
    from commbench.sizes import format_size

    layout = f"dp={spec.dp} tp={spec.tp} pp={spec.pp}"
    zero = {"0": "DDP", "3": "ZeRO-3/FSDP"}.get(spec.zero, f"ZeRO-{spec.zero}")
    title = (f"{name}: {_count(spec.params)} parameters, {spec.dtype}, {layout}, {zero}, "
             f"{spec.micro_batches} micro-batch(es) per step")
    # At 80 columns the decoration goes first (per call = per step / calls); what a term is
    # and where its time comes from (measured ... projected) are kept, wrapped if need be.
    columns = [Column("", left=True), Column("collective", left=True),
               Column("what", left=True), Column("size"), Column("calls"),
               Column("per call", "us", drop=1), Column("per step", "ms"),
               Column("source", left=True)]
    rows = [[term.parallelism, term.collective, term.what, format_size(term.nbytes),
             str(term.calls), f"{term.per_call_us:.1f}", _seconds(term.time_s), term.source]
            for term in result.terms]
    rows += [[parallelism, "subtotal", "", "", "", "", _seconds(seconds), ""]
             for parallelism, seconds in result.subtotals().items()]
    rows.append(["total", "", "", "", "", "", _seconds(result.total_s), ""])
    console = make_console()
    console.print(f"# {title}", markup=False, highlight=False)
    for line in render(columns, rows, terminal_width()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in result.notes:
        if note != NO_OVERLAP:  # printed last, on its own line, by the caller
            console.print(f"note: {note}", highlight=False)
