"""locate's options as a frozen, torch-free spec: every default stated once (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = ("gpu", "node", "rail", "switch")  # switch: nodes grouped by --topology's leaves


@dataclass(frozen=True)
class MinEffect:
    """How much slower than the fleet an entity or link must be, per metric, before it is a
    candidate and before it can be bad (SPEC §8), as given by --min-effect. Separate because
    the two metrics' noise is not alike. A metric left None is drawn from the run's own pair
    noise (commbench.locate.noise: K x sigma within a floor and a cap), as the whole line is
    when --min-effect is not given (LocateSpec.min_effect None)."""

    busbw: float | None = 0.30
    lat: float | None = 0.30

    def of(self, metric: str) -> float:
        """The share for ``metric``; ``both`` (the mean of the two log speeds) takes the
        smaller: a slowdown of that share in both metrics moves their mean by as much."""
        if self.busbw is None or self.lat is None:
            raise ValueError("a --min-effect drawn from the noise is resolved before use")
        if metric == "both":
            return min(self.busbw, self.lat)
        return self.busbw if metric == "busbw" else self.lat

    def words(self) -> str:
        def share(value: float | None) -> str:
            return "from the noise" if value is None else f"{value:.0%}"

        if self.busbw == self.lat:
            return share(self.busbw)
        return f"{share(self.busbw)} (busbw) / {share(self.lat)} (latency)"


@dataclass(frozen=True)
class LocateSpec:
    """locate's options, every default stated once."""

    level: str | None = None  # None: gpu on one node, node on several (SPEC §8)
    rounds: str = "full"  # full | quick | K
    small: int = 8  # bytes: latency
    large: int = 64 << 20  # bytes: bandwidth
    confirm: int = 3  # retests of a candidate a batch (known-good partners; a link: its pair)
    # None: drawn from the noise this run measured (commbench.locate.noise); given, it wins
    min_effect: MinEffect | None = None
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
