"""locate's options as a frozen, torch-free spec: every default stated once, the option texts
parsed, and the checks made before anything starts (``validate``; docs/commands/locate.md,
"Options")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from commbench.core.errors import UsageError
from commbench.core.sizes import parse_size

LEVELS = ("gpu", "node", "rail", "switch")  # switch: nodes grouped by --topology's leaves


@dataclass(frozen=True)
class MinEffect:
    """How much slower than the fleet an entity or link must be, per metric, before it is a
    candidate and before it can be bad (docs/commands/locate.md, "The min-effect line"), as
    given by --min-effect. Separate because
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

    level: str | None = None  # None: gpu on one node, node on several (docs/commands/locate.md)
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
    quiet: bool = False  # no live bar (the files and the verdict as ever)
    history: str | None = None  # a history store's URL: the run is added when it ends
    command_line: tuple[str, ...] = field(default_factory=tuple)


BACKENDS = ("auto", "gloo", "nccl")
EFFECT_USAGE = "a share such as 10% or 0.1, or busbw=30%,lat=30%"


def parse_rounds(text: str) -> str:
    value = text.strip().lower()
    if value in ("full", "quick") or (value.isdigit() and int(value) >= 1):
        return value
    raise UsageError(f"bad --rounds {text!r}: full, quick or a number of rounds (>= 1)")


def parse_sizes(text: str) -> tuple[int, int]:
    """--sizes SMALL,LARGE: latency at the small one, bandwidth at the large one."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) != 2:
        raise UsageError(f"bad --sizes {text!r}: two sizes, the small (latency) and the large "
                         "(bandwidth), e.g. 8,64M")
    small, large = sorted(parse_size(p) for p in parts)
    if small < 4:
        raise UsageError(f"bad --sizes {text!r}: at least 4 bytes (one float32)")
    if small == large:
        raise UsageError(f"bad --sizes {text!r}: the small size (latency) must be smaller "
                         "than the large one (bandwidth), e.g. 8,64M")
    return small, large


def parse_effect(text: str | None, default: MinEffect | None = None) -> MinEffect | None:
    """--min-effect: 10% or 0.1 (both metrics), or busbw=30%,lat=30% (either may be left out:
    it keeps ``default``'s, else it is drawn from the run's noise); None or 'auto': the whole
    line drawn from the noise (commbench.locate.noise)."""
    if text is None or text.strip().lower() == "auto":
        return default
    found = dataclasses.asdict(default or MinEffect(None, None))
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"bad --min-effect {text!r}: {EFFECT_USAGE}")
    for part in parts:
        metric, _, raw = part.rpartition("=")
        metric = metric.strip().lower()
        if metric not in ("", "busbw", "lat", "latency") or (metric == "" and len(parts) > 1):
            raise UsageError(f"bad --min-effect {text!r}: {EFFECT_USAGE}")
        value = _share(raw, text)
        for key in (("busbw", "lat") if metric == "" else ("lat",) if metric.startswith("lat")
                    else ("busbw",)):
            found[key] = value
    return MinEffect(**found)


def _share(raw: str, text: str) -> float:
    raw = raw.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"bad --min-effect {text!r}: {EFFECT_USAGE}") from None
    if not 0 <= value < 10:
        raise UsageError(f"bad --min-effect {text!r}: between 0% and 1000%")
    return value


def one_node(env: Any) -> bool:
    """Whether every rank is known to be on this node: local ranks (``env`` None, --nproc), or
    a launcher (launch.RankEnv) whose local world is the whole world (or that says one node).
    Node and rail levels have one entity there: nothing to pair, and a run that measures
    nothing must not start."""
    return env is None or env.local_world == env.world or env.nnodes == 1


def validate(spec: LocateSpec, env: Any) -> None:
    """Refuse what cannot run, before anything starts (exit 2); ``env``: the launcher's
    launch.RankEnv, None for local ranks. The --topology file is read after (locate.topology)."""
    if spec.level is not None and spec.level not in LEVELS:
        raise UsageError(f"bad --level {spec.level!r}: gpu, node, rail or switch (with "
                         "--topology)")
    if spec.level == "switch" and spec.topology_file is None:
        raise UsageError("--level switch needs --topology FILE: which leaf switch each "
                         "host is under ('host leaf [spine]' lines or a SLURM "
                         "topology.conf)")
    if spec.level in ("node", "rail", "switch") and one_node(env):
        raise UsageError(f"--level {spec.level} needs several nodes, and every rank of this "
                         "run is on one: use --level gpu (the default here)")
    if spec.confirm < 0:
        raise UsageError(f"bad --confirm {spec.confirm}: 0 or more partners")
    if spec.backend not in BACKENDS:
        raise UsageError(f"bad --backend {spec.backend!r}: gloo, nccl or auto")


def check_world(world: int) -> None:
    if world < 2:
        raise UsageError(f"locate needs at least 2 ranks to pair (got {world})")
