"""The sweep's hooks for contention: --overlap (measure.overlap) and --background
(measure.background). The sweep calls these few functions; what they do lives in those two
modules, what the columns mean in measure.overlap_stats."""

from __future__ import annotations

import contextlib

from commbench import collectives
from commbench.measure.background import Background, running
from commbench.measure.overlap import (
    MatmulLoad,
    OverlapSamples,
    combined,
    combined_compute,
    measure_overlap,
)
from commbench.measure.overlap_stats import columns
from commbench.specs import contention as options
from commbench.specs.measure import MeasureSpec

__all__ = ["Background", "compute_load", "mark", "background_fields", "measure_overlap",
           "overlap_fields", "prepare_background", "running"]

# The load is an allreduce: its busbw factor is that descriptor's (nccl-tests' 2(n-1)/n).
LOAD_OP = "allreduce"


def prepare_background(session, spec: MeasureSpec) -> Background | None:
    """The load's process group, made on every rank (new_group is collective over the
    world) before anything is timed; None without --background."""
    if not spec.background:
        return None
    world = session.world
    ranks = options.background_ranks(spec.background, spec.background_ranks, world)
    backend = spec.backends[0]
    group = session.subgroup_for(backend, ranks)
    factor = collectives.get(LOAD_OP).busbw_factor(len(ranks))
    label = options.background_label(spec.background, spec.background_ranks, world)
    return Background(group, ranks, session.rank in ranks, spec.background,
                      spec.device_for(backend), factor, label, session.control)


def mark(background: Background | None) -> tuple[int, float] | None:
    return background.mark() if background is not None else None


def background_fields(background: Background | None, since) -> dict:
    """The row's background columns over the window since ``since`` (collective: every rank
    calls it at the same point); {} without --background."""
    if background is None or since is None:
        return {}
    return background.fields(since)


@contextlib.contextmanager
def compute_load(spec: MeasureSpec, device: str):
    """The --overlap kernel's thread for one op, closed after it."""
    load = MatmulLoad(options.overlap_side(spec.overlap), spec.dtype, device)
    try:
        yield load
    finally:
        load.close()


def overlap_fields(overlap: str, samples: OverlapSamples, combine, messages: int) -> dict:
    """The row's overlap columns (rank 0): comm sides combined over ranks as --rank-time
    says, compute sides as each rank's own mean."""
    return columns(overlap, options.overlap_side(overlap),
                   combined(samples.comm_alone, combine),
                   combined(samples.comm_beside, combine),
                   combined_compute(samples.compute_alone),
                   combined_compute(samples.compute_beside), messages).as_columns()
