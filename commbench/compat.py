"""The one home for torch API names that changed between releases.

torch 2.13 deprecates ``all_gather_into_tensor`` / ``reduce_scatter_tensor`` in favour of
``all_gather_single`` / ``reduce_scatter_single``; older releases (2.4-2.12, and the 2.11 that
GPU images ship) have only the old names. Everything that calls them (descriptors, the control
channel, the self-benchmark) asks here, so a rename is fixed in one place. The lookup happens
at call time, so a wrapper installed on ``torch.distributed`` (fault injection) is honoured.
"""

from __future__ import annotations

from typing import Any


def all_gather_single(dist: Any):
    """``dist.all_gather_single`` where it exists, else ``dist.all_gather_into_tensor``."""
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def reduce_scatter_single(dist: Any):
    """``dist.reduce_scatter_single`` where it exists, else ``dist.reduce_scatter_tensor``."""
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
