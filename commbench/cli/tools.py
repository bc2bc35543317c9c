"""The commands that read result folders (compare, report, model, estimate, import) and doctor:
options in, a command from commbench.commands called, its exit code out."""

from typing import Optional

import typer

from commbench.cli import options
from commbench.specs.measure import BACKENDS, OUTPUT_DEFAULTS, parse_list


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        nproc: Optional[int] = typer.Option(  # noqa: UP045
            None, "--nproc", help="Local ranks to start (default 2; not under a launcher)."
        ),
        timeout: float = options.timeout(30.0, "Seconds to wait for every rank."),
        backend: str = typer.Option("auto", "--backend",
                                    help="Backend(s) to try; auto: nccl with GPUs, else gloo."),
        json_out: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
    ) -> None:
        """Preflight: versions, devices, launcher, then a rendezvous, barrier and tiny allreduce
        across all ranks, naming any rank that does not arrive."""
        from commbench.commands.doctor import run_doctor

        backends = parse_list(backend, (*BACKENDS, "auto"), "backend")
        raise typer.Exit(run_doctor(nproc, timeout, backends, json_out))

    @app.command("compare")
    def compare(
        runs: list[str] = typer.Argument(..., help="Result folders (or the JSONL file of one): "
                                         "BASE NEW [NEW ...]; one run compares its backends."),
        threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that "
                                      "counts (5% or 0.05)."),
        metric: str = typer.Option("lat_us_p50", "--metric", help="lat_us_p50 or busbw_gbps."),
        sizes: Optional[str] = typer.Option(  # noqa: UP045
            None, "--sizes", "-s", help="Only these sizes or ranges, e.g. 1M-1G."
        ),
        fail_on_regression: bool = typer.Option(
            False, "--fail-on-regression", help="Exit 1 when a row is slower family-wise "
            "(see --alpha), or a run is partial or failed."
        ),
        allow_partial: bool = typer.Option(
            False, "--allow-partial", help="With --fail-on-regression: accept a partial run."
        ),
        markdown: Optional[str] = typer.Option(  # noqa: UP045
            None, "--markdown", help="Append the table as Markdown (e.g. $GITHUB_STEP_SUMMARY)."
        ),
        json_rows: bool = typer.Option(False, "--json", help="JSON rows on stdout, no table."),
        out: Optional[str] = typer.Option(  # noqa: UP045
            None, "--out", help="Folder for the overlay and ratio plots (default: none)."
        ),
        alpha: str = typer.Option(
            "1%", "--alpha", help="Family-wise level of the gate: --fail-on-regression fails "
            "only on slower rows that survive Holm's correction over the rows compared."
        ),
        noise_from: Optional[str] = typer.Option(  # noqa: UP045
            None, "--noise-from", help="A history store (URL or SQLite file): widen each "
            "ratio's interval by the run-to-run spread of its series (at least 5 past runs; "
            "default: the --history store the baseline was added to, if any)."
        ),
    ) -> None:
        """Compare runs: baseline, new, ratio and a verdict per (op, backend, size). A row is slower
        only beyond --threshold AND when the 95% interval of the ratio of medians (a bootstrap
        over each run's launches, rounds and blocks) lies wholly above 1; beyond the threshold
        with an interval that reaches 1 it is noisy. Rows that measured different things
        (reduce op, in-place, root, rank-time, mesh dim ...) are kept apart and named."""
        from commbench.commands.compare import run_compare
        from commbench.compare.familywise import parse_alpha

        raise typer.Exit(run_compare(runs, threshold, metric, sizes, fail_on_regression, markdown,
                                     json_rows, out, allow_partial, parse_alpha(alpha),
                                     noise_from))

    @app.command("report")
    def report(
        runs: list[str] = typer.Argument(..., help="Result folders to report on."),
        out: str = typer.Option("results/report", "--out", help="Folder for the report."),
    ) -> None:
        """Write report.md and a self-contained report.html (plots embedded) over the runs."""
        from commbench.commands.report import run_report

        raise typer.Exit(run_report(runs, out))

    @app.command("model")
    def model(
        runs: list[str] = typer.Argument(..., help="Result folders to fit."),
        json_out: bool = typer.Option(False, "--json", help="One JSON object per run on stdout."),
    ) -> None:
        """Fit t(n) = alpha + n/beta per op, backend, mesh dim, group size and dtype (piecewise, up
        to 3 segments chosen from the data): model.csv and model.json beside each run, the fitted
        lines dashed on its latency plot. A ps run's curves are also read as 2 alpha + max(n,
        W n/S) / beta beside allreduce over the same workers, with the size where the two
        cross (or none)."""
        from commbench.commands.model import run_model

        raise typer.Exit(run_model(runs, json_out))

    @app.command("estimate")
    def estimate(
        run: Optional[str] = typer.Argument(  # noqa: UP045
            None, help="The result folder whose curves to use (or --run)."),
        params: Optional[str] = typer.Option(  # noqa: UP045
            None, "--params", help="Model parameters: 7B, 350M, 7e9 ... (the idealised "
            "model; not with --trace)."),
        dtype: str = typer.Option("bf16", "--dtype", help="Gradient / activation dtype."),
        dp: int = typer.Option(1, "--dp", help="Data-parallel ranks."),
        tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks."),
        pp: int = typer.Option(1, "--pp", help="Pipeline stages."),
        zero: str = typer.Option("0", "--zero", help="0 (DDP), 1, 2, 3 or fsdp."),
        bucket: str = typer.Option("25M", "--bucket", help="Gradient bucket size (DDP: 25M)."),
        first_bucket: str = typer.Option("1M", "--first-bucket", help="DDP's first bucket."),
        layers: Optional[int] = typer.Option(None, "--layers", help="Transformer layers."),  # noqa: UP045
        hidden: Optional[int] = typer.Option(None, "--hidden", help="Hidden size."),  # noqa: UP045
        seq: Optional[int] = typer.Option(None, "--seq", help="Sequence length."),  # noqa: UP045
        micro_batch: int = typer.Option(1, "--micro-batch", help="Micro-batch size."),
        micro_batches: int = typer.Option(1, "--micro-batches", help="Micro-batches per step."),
        sequence_parallel: bool = typer.Option(False, "--sequence-parallel",
                                               help="Megatron sequence parallelism."),
        trace: Optional[str] = typer.Option(  # noqa: UP045
            None, "--trace", help="A trace folder (commbench record, or import "
            "torch-profiler): price its recorded calls instead of a model."),
        run_option: Optional[str] = typer.Option(  # noqa: UP045
            None, "--run", metavar="RUN", help="The result folder whose curves to use (as "
            "RUN)."),
        step: Optional[list[int]] = typer.Option(  # noqa: UP045
            None, "--step", help="With --trace: only this recorded step (repeatable; "
            "default every step)."),
        rank: Optional[int] = typer.Option(  # noqa: UP045
            None, "--rank", help="With --trace: show this rank's calls (default: the rank "
            "whose steps cost most)."),
        json_out: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
        overlap_from: Optional[str] = typer.Option(  # noqa: UP045
            None, "--overlap-from", metavar="RUN", help="An --overlap run: price the step's "
            "exposed communication with its measured overlap_efficiency (data-parallel "
            "terms beside compute, the rest on the critical path; said in the notes)."),
    ) -> None:
        """Communication time per training step from a run's measured curves, assuming no
        overlap with compute. With --params: an idealised step (DDP buckets, ZeRO/FSDP, Megatron
        TP, pipeline p2p). With --trace DIR: the calls a job really made (commbench record, or
        import torch-profiler), each read on the run's curve of its op, dtype and group size at
        its size (measured, interpolated, model fit or projected), per step."""
        from commbench.commands.estimate import choose_run, run_estimate, run_trace_estimate
        from commbench.specs.estimate import StepOptions

        path = choose_run(run, run_option)
        options = StepOptions(params, dtype, dp, tp, pp, zero, bucket, first_bucket, layers,
                              hidden, seq, micro_batch, micro_batches, sequence_parallel)
        if trace is not None:
            if overlap_from is not None:
                from commbench.core.errors import UsageError

                raise UsageError("--overlap-from prices an idealised step (--params); a "
                                 "--trace is priced as recorded")
            raise typer.Exit(run_trace_estimate(trace, path, step, rank, json_out,
                                                options.given()))
        raise typer.Exit(run_estimate(path, options, json_out, step=step, rank=rank,
                                      overlap_from=overlap_from))

    import_app = typer.Typer(help="Turn nccl-tests or OSU output into a commbench results folder, "
                             "so compare, report and model work on it; or torch.profiler "
                             "traces into a trace folder, so replay and estimate --trace "
                             "read them.", no_args_is_help=True)
    app.add_typer(import_app, name="import")

    def _importer(kind: str, description: str):
        def command(
            file: str = typer.Argument(..., help="The tool's output file."),
            op: Optional[str] = typer.Option(  # noqa: UP045
                None, "--op", help="The op, when the file does not name it (allreduce, ...)."),
            world_size: Optional[int] = typer.Option(  # noqa: UP045
                None, "--world-size", help="Ranks, when the file does not say."),
            out: str = options.results_root(OUTPUT_DEFAULTS.out),
            name: Optional[str] = options.run_name(),  # noqa: UP045
            force: bool = options.force(),
        ) -> None:
            from commbench.commands.imports import run_import

            raise typer.Exit(run_import(kind, file, op, out, name, force, world_size))

        command.__doc__ = description
        return command

    import_app.command("nccl-tests")(_importer(
        "nccl-tests", "nccl-tests output: the text table (2.13-2.19) or its -J JSON file."))
    import_app.command("osu")(_importer(
        "osu", "OSU micro-benchmarks output: osu_allreduce, allgather, bcast, alltoall, "
        "reduce_scatter, latency, bw, bibw."))



    @import_app.command("torch-profiler")
    def import_torch_profiler(
        source: str = typer.Argument(..., help="One rank's trace (.json or .json.gz, from "
                                     "prof.export_chrome_trace) or a folder of them, one per "
                                     "rank."),
        out: str = typer.Option(..., "--out", help="Trace folder to write (rank-<r>.jsonl)."),
        force: bool = typer.Option(False, "--force", help="Replace a trace already in --out."),
    ) -> None:
        """torch.profiler traces: each record_param_comms event (NCCL) becomes a call of the
        trace format, its NCCL kernel's duration the in-situ time; a trace without them (gloo)
        is read from its c10d:: ops (needs record_shapes=True; every call lands on the default
        group). Steps are the profiler's ProfilerStep#N. Every file is read before anything
        is written; a file that is not a profiler trace exits 2."""
        from commbench.commands.imports import run_import_profiler

        raise typer.Exit(run_import_profiler(source, out, force))

    def _dumps(kind: str, description: str):
        def command(
            sources: list[str] = typer.Argument(..., help="One file per rank, or their "
                                                "folder."),
            out: str = typer.Option(..., "--out", help="Trace folder to write "
                                    "(rank-<r>.jsonl)."),
            force: bool = typer.Option(False, "--force", help="Replace a trace in --out."),
        ) -> None:
            from commbench.commands.imports import run_import_dumps

            raise typer.Exit(run_import_dumps(kind, sources, out, force))

        command.__doc__ = description
        return command

    import_app.command("flight-recorder")(_dumps(
        "flight-recorder", "PyTorch Flight Recorder dumps (pickle or JSON, one per rank): "
        "calls lined up by collective_seq_id, issue times from time_created_ns, steps from "
        "the calls' rhythm. Then replay, estimate --trace and stragglers read the folder."))
    import_app.command("nccl-inspector")(_dumps(
        "nccl-inspector", "NCCL Inspector JSON logs (v4.x, one per process): coll_perf lines "
        "lined up by coll_sn per communicator, coll_exec_time_us as the in-situ time."))
