"""A workload: an op that is more than one call (ps: workers and servers in roles, pushes and
pulls it counts itself, an allreduce baseline in a group of its own).

nccl-tests keeps a collective to a name and four functions; commbench's ``Collective`` stays
that small, and the hooks only a workload needs live on this subclass. The engine asks through
the functions below, which answer for a plain collective too (nothing counted, no extra
group, all ranks alike), so it never tests an op's name or type itself.
"""

from __future__ import annotations

from typing import Any

from commbench.collectives.base import Collective, OpContext


class Workload(Collective):
    """Base of a workload's descriptor: a Collective plus the hooks below."""

    def roles_text(self, spec: Any, world: int) -> str:
        """What the ranks are, for a message about them ('' = all alike; ps: ', 2 workers
        then 2 servers, and NCCL needs a GPU for every server too')."""
        return ""

    def counters(self, ctx: OpContext) -> list[float]:
        """Numbers this rank counted while it ran the size (ps: bytes it sent and received),
        all-gathered after the check; every rank returns the same length ([] = none)."""
        return []

    def subgroups(self, world: int, options: tuple[tuple[str, Any], ...] = (),
                  ) -> tuple[tuple[int, ...], ...]:
        """Groups (global ranks) the op's calls need besides the one it runs in (ps: the W
        workers of its allreduce baseline). The sweep makes them with the run's groups,
        before anything is timed, every rank in the same order; a call reads one with
        ``ctx.subgroup(ranks)``. () = none."""
        return ()

    def row_fields(self, ctx: OpContext, per_rank: Any, time_us: float = 0.0,
                   ) -> dict[str, Any]:
        """Extra row fields (schema.Row names) from every rank's ``counters`` (ranks x
        numbers) and the row's time (its median, µs: for rates per step), or fields of the
        row this variant names differently; {} = none."""
        return {}


def roles_text(op: Collective, spec: Any, world: int) -> str:
    return op.roles_text(spec, world) if isinstance(op, Workload) else ""


def counters(op: Collective, ctx: OpContext) -> list[float]:
    return op.counters(ctx) if isinstance(op, Workload) else []


def subgroups(op: Collective, world: int, options: tuple[tuple[str, Any], ...] = (),
              ) -> tuple[tuple[int, ...], ...]:
    return op.subgroups(world, options) if isinstance(op, Workload) else ()


def row_fields(op: Collective, ctx: OpContext, per_rank: Any, time_us: float = 0.0,
               ) -> dict[str, Any]:
    return op.row_fields(ctx, per_rank, time_us) if isinstance(op, Workload) else {}
