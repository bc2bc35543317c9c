"""Synthetic DDP-like traces for the stragglers tests and bench: every step each rank computes
(a base time, plus noise, plus any slowdown given), then issues ``buckets`` async allreduces
on the world group; each call ends when its last member arrived plus a transfer time. Written
with the trace format's own writer, so the analysis reads them as it reads a recording.
"""

from __future__ import annotations

import random
from pathlib import Path

from commbench.results import trace as trace_format


def ddp_job(folder: Path, world: int = 4, steps: int = 12, buckets: int = 3,
            compute_s: float = 0.02, noise_s: float = 0.0005,
            slow: dict[int, float] | None = None, slow_steps: tuple[int, int] | None = None,
            clock_offset_s: dict[int, float] | None = None, hosts: dict[int, str] | None = None,
            clock: str = "monotonic", hang: tuple[int, int] | None = None, seed: int = 0,
            with_issue: bool = True, noisy: dict[int, float] | None = None) -> Path:
    """A trace folder. ``slow``: rank -> extra compute per step (s), in ``slow_steps``
    (first, last) only where given; ``clock_offset_s``: rank -> how far its clock is off;
    ``hang``: (rank, step) from which that rank issues nothing more; ``noisy``: rank -> its
    own noise (s), in place of ``noise_s``."""
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    group = trace_format.Group("0", tuple(range(world)), "gloo", "default_pg")
    slow, offsets, hosts = slow or {}, clock_offset_s or {}, hosts or {}
    calls: dict[int, list[trace_format.Call]] = {r: [] for r in range(world)}
    now = 1.0
    for step in range(steps + 1):  # step 0 is set-up, as DDP's
        arrive = {}
        for rank in range(world):
            extra = slow.get(rank, 0.0)
            if slow_steps and not slow_steps[0] <= step <= slow_steps[1]:
                extra = 0.0
            spread = (noisy or {}).get(rank, noise_s)
            arrive[rank] = now + compute_s + abs(rng.gauss(0, spread)) + extra
        for bucket in range(buckets):
            issue = {r: arrive[r] + bucket * 0.001 + abs(rng.gauss(0, noise_s / 4))
                     for r in range(world)}
            end = max(issue.values()) + 0.002
            for rank in range(world):
                if hang and rank == hang[0] and step >= hang[1]:
                    continue
                off = offsets.get(rank, 0.0)
                calls[rank].append(trace_format.Call(
                    seq=len(calls[rank]), pg="0", op="allreduce", dtype="float32",
                    in_numel=1024, out_numel=1024, step=step, reduce_op="sum", is_async=True,
                    t_issue_ns=round((issue[rank] + off) * 1e9) if with_issue else None,
                    t_end_ns=round((end + off) * 1e9) if with_issue else None,
                    dur_ns=None if with_issue else round((end - issue[rank]) * 1e9)))
        now = max(arrive.values()) + buckets * 0.001 + 0.004
    for rank in range(world):
        head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=world,
                                   rank=rank, host=hosts.get(rank, "node0"),
                                   groups={"0": group}, clock=clock, steps_ended=steps + 1)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls[rank],
                                [None] * (steps + 1))
    return folder
