"""The registry of collectives: one module per op, each exporting ``COLLECTIVE``.

Adding a collective = adding a module here and its name to ``_MODULES``; the CLI grows a command
for it. Importing this package does not import torch.
"""

from __future__ import annotations

import importlib

from commbench.collectives.base import Collective

_MODULES = (
    "allreduce",
    "allgather",
    "broadcast",
    "reduce_scatter",
    "alltoall",
    "alltoallv",
    "reduce",
    "gather",
    "scatter",
    "barrier",
    "p2p",
    "ps",
)

REGISTRY: dict[str, Collective] = {}
for _module in _MODULES:
    _collective = importlib.import_module(f"{__name__}.{_module}").COLLECTIVE
    REGISTRY[_collective.name] = _collective

# Options that belong to some ops only: a descriptor lists those it takes in extra_options.
OP_OPTIONS = frozenset().union(*(c.extra_options for c in REGISTRY.values()))


def get(name: str) -> Collective:
    """Look up by command name (``reduce-scatter``) or row name (``reduce_scatter``)."""
    return REGISTRY[name.replace("_", "-")]


def row_name(name: str) -> str:
    """The ``op`` column holds the command name with ``_`` for ``-``
    (docs/reference/results-layout.md#csv-columns)."""
    return name.replace("-", "_")


def busbw_factors_text() -> str:
    """Every sized op's busbw factor, grouped, for --help (from the descriptors, not by hand)."""
    groups: dict[str, list[str]] = {}
    for op in REGISTRY.values():
        if op.sized:
            groups.setdefault(op.factor_text, []).append(op.name)
    return "; ".join(f"{', '.join(names)} {factor}" for factor, names in groups.items())
