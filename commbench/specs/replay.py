"""replay's options as a frozen, torch-free spec: every default stated once
(docs/commands/replay.md, "Options")."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplaySpec:
    """replay's options, every default stated once."""

    trace: str = ""
    steps: str | None = None  # None: every step after the first (replay.plan)
    curves: str | None = None  # None: this launch's quick sweep at the trace's sizes
    gaps: str = "none"  # none | recorded (sleep) | compute (matmuls, replay.rank.ComputeGaps)
    nproc: int | None = None  # None: the trace's world size
    timeout: float = 300.0
    backend: str = "auto"  # auto: the trace's backend
    warmup: int = 1


@dataclass(frozen=True)
class ReplayOutput:
    out: str = "results"
    name: str | None = None
    force: bool = False
    json_out: bool = False
    command_line: tuple[str, ...] = field(default_factory=tuple)
