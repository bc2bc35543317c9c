"""ps's numbers as formulas: the traffic per step each role should move, the gradient bytes
reduced per second (sync and async), and which ranks are workers. Pure arithmetic, no torch:
the tests check the rows' counted bytes against ``traffic`` and the manual states the same
formulas (docs/commands/ps.md#traffic-per-step), so it stays apart from the descriptor that
does the counting.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traffic:
    """Bytes per step: what each role sends and receives."""

    worker_tx_bytes: int
    worker_rx_bytes: int
    server_tx_bytes: int
    server_rx_bytes: int


def traffic(size_bytes: int, workers: int, servers: int) -> Traffic:
    """The sync PS's traffic per step as formulas (n bytes, W workers, S servers): a worker
    pushes its n bytes and pulls n; a server receives each worker's n/S and returns as much.
    For the docs and the tests' independent check only: rows carry what was counted."""
    per_server = workers * size_bytes // servers
    return Traffic(size_bytes, size_bytes, per_server, per_server)


def reduced_gbps(size_bytes: int, workers: int, time_us: float) -> float:
    """Gradient bytes reduced per second, all workers together (GB/s): a step that ends with
    every worker holding the sum has reduced each worker's n bytes, W·n in t (sync PS and
    allreduce alike). Async steps are not one shared step: see ``async_reduced_gbps``."""
    return workers * size_bytes / (time_us * 1e3) if time_us > 0 else 0.0


def async_reduced_gbps(size_bytes: int, servers: int, step_rates, steps: float,
                       rejected: float) -> float:
    """Async: each worker's n bytes at its own steps per second (``step_rates``, one per
    worker), less the rejected pushes' bytes: a rejected push is one shard, n/S, of one of
    the S·steps pushes (``steps``: over every worker) that were made."""
    pushes = servers * steps
    applied = 1.0 - rejected / pushes if pushes > 0 else 0.0
    return size_bytes * float(sum(step_rates)) * applied / 1e9


def roles(world: int, servers: int) -> tuple[int, int]:
    """(W, S): the first W ranks are workers, the last S servers."""
    return world - servers, servers
