"""The locate command's options: typed into a LocateSpec, then commands.locate runs it."""

import sys
from typing import Optional

import typer

from commbench.cli import options
from commbench.core.sizes import format_size
from commbench.specs.locate import LocateOutput, LocateSpec

DEFAULTS = LocateSpec()  # every default stated once, in the spec


def register(app: typer.Typer) -> None:
    @app.command("locate")
    def locate(
        level: Optional[str] = typer.Option(  # noqa: UP045
            None, "--level", help="gpu (each rank), node (a node's ranks together), rail "
            "(local rank r of every node) or switch (nodes grouped by leaf: needs --topology); "
            "default gpu on one node, node on several."),
        topology: Optional[str] = typer.Option(  # noqa: UP045
            None, "--topology", metavar="FILE", help="Where hosts sit: 'host leaf [spine]' "
            "lines or a SLURM topology.conf; a leaf slow only across leaves is named "
            "'bad switch'."),
        rounds: str = typer.Option(
            DEFAULTS.rounds, "--rounds", help="full (every pair: the round robin, N-1 rounds "
            "of N/2 concurrent pairs, run twice up to 16 entities so each pair is read twice), "
            "quick (about log2 N + 2 seeded rounds) or K (K rounds)."),
        sizes: str = typer.Option(f"{DEFAULTS.small},{format_size(DEFAULTS.large)}", "--sizes",
                                  "-s", help="SMALL,LARGE: latency at the "
                                  "small size, busbw (bidirectional p2p) at the large one."),
        confirm: int = typer.Option(
            DEFAULTS.confirm, "--confirm", help="Retests of each candidate per batch: known-good "
            "partners (a link: its pair again); batches until the pooled evidence settles."),
        min_effect: Optional[str] = typer.Option(  # noqa: UP045
            None, "--min-effect", help="A candidate is at least this much slower than the "
            "fleet median; bad when its pooled effect is too and its pooled z is beyond 3.5 "
            "raised for the candidates judged (3.9 at 20, 4.4 at 160); beyond the z but under "
            "this line: slow (exit 0). One share (10%) or per metric (busbw=20%,lat=15%). "
            "Default: drawn from the noise this run measured, 4 x its pair noise within "
            "10%-30% per metric (a metric left out too). The output states the z, the line and "
            "where each came from."),
        nproc: Optional[int] = typer.Option(  # noqa: UP045
            None, "--nproc", help="Local ranks to start (default: one per GPU, else 4; not "
            "under a launcher)."),
        timeout: float = options.timeout(
            DEFAULTS.timeout, "Seconds a pair (or the rendezvous) may take before the run "
            "fails naming it."),
        backend: str = typer.Option(DEFAULTS.backend, "--backend", help="nccl, gloo or auto."),
        seed: int = typer.Option(DEFAULTS.seed, "--seed", help="Shuffle of --rounds quick."),
        out: str = options.results_root(),
        name: Optional[str] = options.run_name(),  # noqa: UP045
        force: bool = options.force(),
        json_out: bool = options.json_output(),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        history: Optional[str] = options.history_url(),  # noqa: UP045
    ) -> None:
        """Find the slow GPU, node, rail or link: every pair of entities measured in concurrent
        rounds (bidirectional p2p), an N x N matrix and heatmap, suspects named with their
        evidence and retested against known-good partners. Exit 0: no suspect; 1: a confirmed
        suspect; 3: the run failed (partial matrix kept)."""
        from commbench.commands.locate import run_locate
        from commbench.specs.locate import parse_effect, parse_rounds, parse_sizes

        small, large = parse_sizes(sizes)
        spec = LocateSpec(level=level.lower() if level else None, rounds=parse_rounds(rounds),
                          small=small, large=large, confirm=confirm,
                          min_effect=parse_effect(min_effect), nproc=nproc, timeout=timeout,
                          backend=backend, seed=seed, topology_file=topology)
        output = LocateOutput(out=out, name=name, force=force, json_out=json_out, quiet=quiet,
                              history=history,
                              command_line=tuple(sys.argv))
        raise typer.Exit(run_locate(spec, output))
