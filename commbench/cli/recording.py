"""``commbench record``: run a training job unchanged and keep its communication."""

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("record", context_settings={"allow_extra_args": True,
                                             "ignore_unknown_options": True})
    def record(
        command: Optional[list[str]] = typer.Argument(  # noqa: UP045
            None, metavar="-- CMD [ARGS...]", help="The job to run, after --: python train.py, "
            "torchrun ..., a script that spawns its ranks."
        ),
        out: Optional[str] = typer.Option(  # noqa: UP045
            None, "--out", "-o", help="Trace folder (default: results/trace-<time>)."
        ),
        steps: Optional[int] = typer.Option(  # noqa: UP045
            None, "--steps",
            help="Stop recording after this many steps: the job runs on without the recorder."
        ),
        flight_recorder: bool = typer.Option(
            False, "--flight-recorder", help="Let torch's Flight Recorder keep the calls (its "
            "C++ ring buffer, TORCH_FR_BUFFER_SIZE calls, 20000 unless set) instead of "
            "commbench's recorder: far cheaper, but issue times only on gloo (no in-situ "
            "durations) and the last calls only."),
        force: bool = typer.Option(False, "--force", help="Replace a trace already in --out."),
    ) -> None:
        """Run CMD unchanged and write DIR/rank-<r>.jsonl per rank: every collective and p2p
        call the dispatcher sees (DDP's and FSDP's C++ calls included), with its group, sizes,
        dtype, issue and completion time, and the step it belongs to (a step ends at each
        optimizer.step(), or at commbench.record.step()). The exit code is CMD's."""
        from commbench.commands.record import run_record

        raise typer.Exit(run_record(list(command or []), out, force, steps,
                                    flight_recorder))
