"""locate's options as a frozen, torch-free spec: every default stated once (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = ("gpu", "node", "rail", "switch")  # switch: nodes grouped by --topology's leaves


@dataclass(frozen=True)
class MinEffect:
    """How much slower than the fleet an entity or link must be, per metric, before it is a
    candidate and before it can be bad (SPEC §8). Separate because the two metrics' noise is
    not alike (docs/project/accuracy.md, "locate: min-effect"): BUSBW_DEFAULT and LAT_DEFAULT
    say where each default comes from."""

    busbw: float = 0.30
    lat: float = 0.30

    def of(self, metric: str) -> float:
        """The share for ``metric``; ``both`` (the mean of the two log speeds) takes the
        smaller: a slowdown of that share in both metrics moves their mean by as much."""
        if metric == "both":
            return min(self.busbw, self.lat)
        return self.busbw if metric == "busbw" else self.lat

    def words(self) -> str:
        if self.busbw == self.lat:
            return f"{self.busbw:.0%}"
        return f"{self.busbw:.0%} (busbw) / {self.lat:.0%} (latency)"


@dataclass(frozen=True)
class LocateSpec:
    """locate's options, every default stated once."""

    level: str | None = None  # None: gpu on one node, node on several (SPEC §8)
    rounds: str = "full"  # full | quick | K
    small: int = 8  # bytes: latency
    large: int = 64 << 20  # bytes: bandwidth
    confirm: int = 3  # retests of a candidate a batch (known-good partners; a link: its pair)
    min_effect: MinEffect = MinEffect()
    follow_ups: int = 3  # batches of retests at most, until the pooled evidence settles
    nproc: int | None = None
    timeout: float = 300.0
    backend: str = "auto"
    seed: int = 0
    topology_file: str | None = None  # --topology FILE: where hosts sit (read by the command)
    topology: tuple[tuple[str, str, str], ...] = ()  # (host, leaf, spine) read from it


@dataclass(frozen=True)
class LocateOutput:
    out: str = "results"
    name: str | None = None
    force: bool = False
    json_out: bool = False
    history: str | None = None  # a history store's URL: the run is added when it ends
    command_line: tuple[str, ...] = field(default_factory=tuple)
