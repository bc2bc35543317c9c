"""locate's options as a frozen, torch-free spec: every default stated once (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = ("gpu", "node", "rail")


@dataclass(frozen=True)
class LocateSpec:
    """locate's options, every default stated once."""

    level: str | None = None  # None: gpu on one node, node on several (SPEC §8)
    rounds: str = "full"  # full | quick | K
    small: int = 8  # bytes: latency
    large: int = 64 << 20  # bytes: bandwidth
    confirm: int = 3
    min_effect: float = 0.10
    nproc: int | None = None
    timeout: float = 300.0
    backend: str = "auto"
    seed: int = 0


@dataclass(frozen=True)
class LocateOutput:
    out: str = "results"
    name: str | None = None
    force: bool = False
    json_out: bool = False
    history: str | None = None  # a history store's URL: the run is added when it ends
    command_line: tuple[str, ...] = field(default_factory=tuple)
