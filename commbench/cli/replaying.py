"""The replay command's options: typed into a ReplaySpec, then commands.replay runs it."""

import sys
from typing import Optional

import typer

from commbench.cli import options
from commbench.specs.replay import ReplayOutput, ReplaySpec

DEFAULTS = ReplaySpec()  # every default stated once, in the spec


def register(app: typer.Typer) -> None:
    @app.command("replay")
    def replay(
        trace: str = typer.Argument(..., help="A trace folder (rank-<r>.jsonl per rank), as "
                                    "`commbench record --out DIR -- CMD` writes it."),
        steps: Optional[str] = typer.Option(  # noqa: UP045
            DEFAULTS.steps, "--steps", help="Which recorded steps: K (K steps, cycling over "
            "the trace's steps), 1-3,7 (those recorded steps, once each) or all (every "
            "recorded step once); default: the trace's steps (not step 0's set-up traffic, "
            "not the tail after the last step end), in whole passes until at least 10 steps "
            "are replayed."),
        curves: Optional[str] = typer.Option(  # noqa: UP045
            DEFAULTS.curves, "--curves", help="Price the calls on this results folder's "
            "curves (another cluster's run: measured, interpolated or its α–β fit, as "
            "estimate reads it). Default: each distinct call of the trace timed alone in this "
            "launch, after the replay (a quick sweep at the trace's own sizes)."),
        gaps: str = typer.Option(
            DEFAULTS.gaps, "--gaps", help="none: calls back to back; recorded: each call "
            "first waits for the compute time recorded before it; compute: that time is "
            "spent multiplying matrices instead of sleeping (the contention the job had)."),
        nproc: Optional[int] = typer.Option(  # noqa: UP045
            DEFAULTS.nproc, "--nproc", help="Local ranks to start (default: the trace's world "
            "size; not under a launcher)."),
        timeout: float = options.timeout(
            DEFAULTS.timeout, "Seconds a call (or the rendezvous) may take before the run "
            "fails naming it."),
        backend: str = typer.Option(DEFAULTS.backend, "--backend", help="gloo, nccl or auto "
                                    "(the trace's backend)."),
        warmup: int = typer.Option(DEFAULTS.warmup, "--warmup", help="Untimed replays of the "
                                   "first step before the timed ones."),
        out: str = options.results_root(),
        name: Optional[str] = options.run_name(),  # noqa: UP045
        force: bool = options.force(),
        json_out: bool = options.json_output(),
    ) -> None:
        """Replay a recorded trace's calls with real collectives (same sizes, dtypes, groups
        and order, asynchronous where they were) and report per op and per step three times:
        in situ (the recording), replayed (here) and model (priced on measured curves). Exit
        0; 2: bad input; 3: the run failed."""
        from commbench.commands.replay import run_replay

        spec = ReplaySpec(trace=trace, steps=steps, curves=curves, gaps=gaps.lower(),
                          nproc=nproc, timeout=timeout, backend=backend.lower(), warmup=warmup)
        output = ReplayOutput(out=out, name=name, force=force, json_out=json_out,
                              command_line=tuple(sys.argv))
        raise typer.Exit(run_replay(spec, output))
