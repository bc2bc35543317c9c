"""``commbench estimate``: communication time per training step from a run's measured curves."""

from __future__ import annotations

import json
import sys

from commbench.core.errors import EXIT_OK, UsageError
from commbench.results import load_run
from commbench.specs.estimate import StepOptions


def choose_run(argument: str | None, option: str | None) -> str:
    """RUN as an argument or as ``--run`` (the form that reads well beside ``--trace``)."""
    if argument and option and argument != option:
        raise UsageError(f"two runs given ({argument} and --run {option}): give one")
    path = argument or option
    if not path:
        raise UsageError("estimate needs a result folder: commbench estimate RUN --params 7B "
                         "--dp 8, or commbench estimate --trace DIR --run RUN")
    return path


def run_estimate(path: str, options: StepOptions, json_out: bool,
                 step: list[int] | None = None, rank: int | None = None,
                 overlap_from: str | None = None) -> int:
    from commbench.model.estimate import NO_OVERLAP, estimate, step_spec

    if options.params is None:
        raise UsageError("estimate needs --params (an idealised model: 7B, 350M ...) or "
                         "--trace DIR (the calls a job recorded)")
    if step or rank is not None:
        raise UsageError(f"{'--step' if step else '--rank'} reads a recorded trace: it needs "
                         "--trace DIR")

    # Inputs are checked before the run is read: a bad option is reported as itself.
    spec = step_spec(options.params, dtype=options.dtype, dp=options.dp, tp=options.tp,
                     pp=options.pp, zero=options.zero, bucket=options.bucket,
                     first_bucket=options.first_bucket, layers=options.layers,
                     hidden=options.hidden, seq=options.seq, micro_batch=options.micro_batch,
                     micro_batches=options.micro_batches,
                     sequence_parallel=options.sequence_parallel)
    run = load_run(path)
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = estimate(run.rows, spec)
    hidden = None
    if overlap_from is not None:  # estimate --overlap-from RUN (model.overlap_price)
        from commbench.model.overlap_price import exposed

        beside = load_run(overlap_from)
        hidden = exposed(result, beside.rows, beside.name)
    if json_out:
        print(json.dumps({**result.as_dict(),
                          **({"overlap": hidden.as_dict()} if hidden else {})}))
        return EXIT_OK
    _print(run.name, spec, result)
    if hidden is None:
        print(NO_OVERLAP)
        return EXIT_OK
    _print_exposed(hidden)
    return EXIT_OK


def _print_exposed(hidden) -> None:
    """The step's terms again, each with the share the --overlap run says stays exposed."""
    from commbench.core.sizes import format_size
    from commbench.output.console import make_console, terminal_width
    from commbench.output.tables import Column, render

    columns = [Column("", left=True), Column("collective", left=True), Column("size"),
               Column("alone", "ms"), Column("efficiency"), Column("exposed", "ms"),
               Column("from", left=True)]
    rows = [[t.term.parallelism, t.term.collective, format_size(t.term.nbytes),
             _seconds(t.term.time_s), "-" if t.efficiency != t.efficiency
             else f"{t.efficiency:.2f}", _seconds(t.exposed_s), t.basis]
            for t in hidden.terms]
    rows.append(["total", "", "", _seconds(sum(t.term.time_s for t in hidden.terms)), "",
                 _seconds(hidden.exposed_s), ""])
    console = make_console()
    console.print(f"# exposed communication beside {hidden.overlap}", markup=False,
                  highlight=False)
    for line in render(columns, rows, terminal_width()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in hidden.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def _count(value: float) -> str:
    """7e9 -> '7B', 1.3e9 -> '1.3B' (powers of 1000, as --params reads them)."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.4g}{unit}"
    return f"{value:.0f}"


def _seconds(value: float) -> str:
    return f"{value * 1e3:.3f}"


def _print(name: str, spec, result) -> None:
    from commbench.core.sizes import format_size
    from commbench.model.estimate import NO_OVERLAP
    from commbench.output.console import make_console, terminal_width
    from commbench.output.tables import Column, render

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


def run_trace_estimate(trace_dir: str, path: str, steps: list[int] | None, rank: int | None,
                       json_out: bool, layout_options: list[str] = ()) -> int:
    """``estimate --trace DIR --run RUN``: the recorded calls priced on RUN's curves."""
    if layout_options:
        raise UsageError(f"--trace prices the calls the job made; {', '.join(layout_options)} "
                         "describe an idealised model: give one or the other")
    from commbench.model.estimate import NO_OVERLAP
    from commbench.model.trace_price import price_trace
    from commbench.results.trace import load

    trace = load(trace_dir)  # a bad trace is reported before the run is read
    run = load_run(path)
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    from commbench.stragglers import waited_note

    waited = waited_note(trace) if len(trace.ranks) > 1 else None
    priced = price_trace(trace, run.rows, rank=rank, steps=steps, waited=waited)
    if json_out:
        print(json.dumps({"trace": str(trace.path), "run": run.name, **priced.as_dict()}))
        return EXIT_OK
    _print_trace(run.name, trace, priced)
    print(NO_OVERLAP)
    return EXIT_OK


def _optional_ms(value: float | None) -> str:
    return "-" if value is None else _seconds(value)


def _print_trace(name: str, trace, priced) -> None:
    from commbench.core.sizes import format_size
    from commbench.model.estimate import NO_OVERLAP
    from commbench.output.console import make_console, terminal_width
    from commbench.output.tables import Column, render

    head = trace.header
    source = head.get("source", "record")
    title = (f"{trace.path} ({source}, {head.get('backend', '?')}, {trace.world_size} ranks) "
             f"priced on {name}: rank {priced.rank}, step(s) "
             f"{', '.join(map(str, priced.steps))}")
    columns = [Column("step", left=True), Column("collective", left=True),
               Column("dtype", left=True, drop=2), Column("size"), Column("group"),
               Column("calls"), Column("per call", "us", drop=3), Column("per step", "ms"),
               Column("in situ", "ms", drop=1), Column("source", left=True)]
    rows = []
    for step in priced.steps:
        for line in (ln for ln in priced.lines if ln.step == step):
            per_call = "-" if line.per_call_s is None else f"{line.per_call_s * 1e6:.1f}"
            rows.append([str(step), line.op, line.dtype, format_size(line.nbytes),
                         str(line.group_size), str(line.calls), per_call,
                         _optional_ms(line.model_s), _optional_ms(line.in_situ_s),
                         line.source])
        rows.append([str(step), "step total", "", "", "", "", "",
                     _seconds(priced.step_model_s(step)),
                     _optional_ms(priced.step_in_situ_s(step)), ""])
    if len(priced.steps) > 1:
        rows.append(["mean", "per step", "", "", "", "", "", _seconds(priced.mean_model_s),
                     "", ""])
    console = make_console()
    console.print(f"# {title}", markup=False, highlight=False)
    for line in render(columns, rows, terminal_width()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in priced.notes:
        if note != NO_OVERLAP:
            console.print(f"note: {note}", markup=False, highlight=False)
