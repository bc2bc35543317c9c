"""The contention options of the measuring commands, declared once (specs.contention parses
them): ``--overlap``, ``--background``, ``--background-ranks``."""

from __future__ import annotations

from typing import Any

import typer

OPTION_NAMES = ("overlap", "background", "background_ranks")


def overlap() -> Any:
    """``--overlap KIND:SIZE``: compute beside the collective."""
    return typer.Option(
        None, "--overlap", help="Compute beside the collective on every rank, e.g. "
        "matmul:1024 (square 1024 x 1024 matrices of --dtype, again and again; a thread on "
        "CPU, a CUDA stream on GPU; matmul:0 = none, a control). Per size, alternated: the "
        "collective alone and beside the compute, the compute alone and beside the "
        "collective; rows add comm_slowdown, compute_slowdown (with 95% intervals), "
        "compute_gflops_alone/_beside and overlap_efficiency.")


def background() -> Any:
    """``--background SIZE``: another job's traffic beside the collective."""
    return typer.Option(
        None, "--background", help="Another job's traffic: an allreduce of SIZE bytes per "
        "rank (e.g. 16M) runs continuously on a second process group while each size is "
        "measured; rows add background and the load's achieved background_busbw.")


def background_ranks() -> Any:
    """``--background-ranks LIST``: the load's ranks."""
    return typer.Option(
        None, "--background-ranks", help="Ranks of the --background load, e.g. 0,1 or 0-3 "
        "(default: every rank).")
