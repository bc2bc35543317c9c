"""The one launch path of every measuring command (measure, locate, replay, and whatever comes
next): where the ranks come from, the checks before any of them starts, the run folder, and how
a failure comes back. A command says what to run (an entry, a job, rank 0's sinks) and what to
do with the folder after; it holds no launch code of its own.

Two steps, because a command must check its own input against the world size before it builds
the job the ranks run:

1. ``place(nproc, backends)``: the external launcher's environment or local ranks, the world
   size, ``--nproc`` refused under a launcher (it already started the ranks) or below 1, and a
   backend that needs CUDA refused where no GPU is visible. Exit 2, nothing started.
2. ``run_ranks(config, entry, job, sinks, ...)``: a rank other than 0 of an external launcher
   just runs ``entry`` (no folder: rank 0 owns it). Rank 0 creates the run folder (the run id
   from ``results.run_id``), starts run.json, builds its sinks on the writer, then starts the
   local ranks through torch's elastic agent (with a warning when they outnumber the CPU cores)
   or runs as its launcher's rank 0. A failed or interrupted run comes back as
   ``Launched.failure`` (already said in one line), never as an exception, so that the command
   keeps what was measured.

launch sits beside engine and below output (pyproject.toml's layers), so the words (``say``)
and the failure's one line (``explain``, engine.failures) are handed in by the command.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commbench.core.errors import Interrupted, RunFailed, UsageError
from commbench.launch.environment import RankEnv, detect

Say = Callable[[str], None]
# The rank side of a command: entry(rank_env, job, sink), where sink is rank 0's only.
Entry = Callable[[RankEnv, Any, Any], Any]
WAITING = "ranks wait for a core and times include that wait"


@dataclass(frozen=True)
class Placement:
    """Where the ranks come from: ``env`` the external launcher's (None: local ranks that
    commbench starts) and the world size."""

    env: RankEnv | None
    world: int

    @property
    def local(self) -> bool:
        return self.env is None

    @property
    def rank0(self) -> bool:
        """Whether this process is rank 0 (local ranks: the launcher owns the folder)."""
        return self.env is None or self.env.rank == 0

    @property
    def local_world(self) -> int:
        return self.env.local_world if self.env is not None else self.world


def check_nproc(env: RankEnv | None, nproc: int | None) -> None:
    """``--nproc`` is for local ranks only, and at least 1 (exit 2)."""
    if env is not None and nproc is not None:
        raise UsageError(
            f"--nproc cannot be used under {env.launcher}: it already started {env.world} ranks"
        )
    if nproc is not None and nproc < 1:
        raise UsageError(f"bad --nproc {nproc}: at least 1 rank is needed")


def require_cuda(backends: tuple[str, ...], refusal: str = "") -> None:
    """nccl needs a visible CUDA GPU; ``refusal``: the command's own words for it."""
    if "nccl" not in backends:
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError(refusal or "--backend nccl needs CUDA GPUs, and none is visible here")


def place(nproc: int | None, backends: tuple[str, ...], default: int | None = None,
          cuda_refusal: str = "", check_cuda: bool = True) -> Placement:
    """The launcher's ranks, or ``nproc`` local ones (else ``default``, else one per GPU for
    nccl and 2 for gloo), after the checks every command shares; ``backends`` resolved.
    ``check_cuda`` False: the command checks the devices itself (the sweep's buffers may be
    on the CPU or a GPU per backend)."""
    from commbench.launch.backends import default_nproc

    env = detect()
    check_nproc(env, nproc)
    if check_cuda:
        require_cuda(backends, cuda_refusal)
    if env is not None:
        return Placement(env, env.world)
    return Placement(None, nproc or default or default_nproc(backends))


@dataclass(frozen=True)
class LaunchConfig:
    """What one launch of a command is: who runs, for how long, and where its folder goes.

    ``what`` names the run in its generated id (``<stamp>-<what>-<backends>-n<world>``);
    ``meta`` is what run.json says from its first moment beside the name and the command
    line (``command``: locate, replay; a sweep says none). ``starting`` ends the line said as
    local ranks start, ``waiting`` what a rank waiting for a CPU core does to the numbers.
    ``launches`` > 1 (``--repeat``) starts fresh local ranks that many times into one folder.
    """

    placement: Placement
    backends: tuple[str, ...]
    timeout: float
    cuda: bool
    what: str
    out: str = "results"
    name: str | None = None
    force: bool = False
    command_line: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    starting: str = ""
    waiting: str = WAITING
    launches: int = 1

    @property
    def world(self) -> int:
        return self.placement.world

    @property
    def env(self) -> RankEnv | None:
        return self.placement.env


@dataclass
class Launched:
    """How a launch ended, as the command needs it: the folder (None on a rank other than 0),
    what ``entry`` returned (this rank's; local: rank -> value), and the failure, if any."""

    path: Path | None
    value: Any = None
    failure: RunFailed | Interrupted | None = None
    writer: Any = None


# Rank 0's sink in launch ``index`` of ``launches``, made from the run's sink (--repeat).
PerLaunch = Callable[[Any, int, int, str], Any]


def run_ranks(config: LaunchConfig, entry: Entry, job: Any, sinks: Callable[[Any], Any], *,
              say: Say, explain: Callable[..., str],
              per_launch: PerLaunch | None = None) -> Launched:
    """Run ``entry(rank_env, job, sink)`` on every rank of ``config``; see the module's words.

    ``sinks(writer)`` makes rank 0's sinks once run.json exists (the place to write a
    command's own files before any rank starts). A rank other than 0 of an external launcher
    raises what its entry raises, as before: its launcher reports it.
    """
    from commbench import results

    env = config.env
    if env is not None and env.rank != 0:
        return Launched(None, _external(env, entry, job, None))
    path = results.create(config.out, config.name or results.run_id(
        config.what, config.backends, config.world), force=config.force,
        generated=config.name is None)
    writer = results.RunWriter(path, {"name": path.name, **config.meta,
                                      "command_line": list(config.command_line)})
    writer.start()  # run.json from the first moment: a run that never starts says so
    sink = sinks(writer)
    try:
        if env is not None:
            value = _external(env, entry, job, sink)
        else:
            value = _local(config, entry, job, sink, path, say, explain, per_launch)
    except (RunFailed, Interrupted) as failure:
        say(f"error: {failure}")
        return Launched(path, None, failure, writer)
    return Launched(path, value, None, writer)


def _external(env: RankEnv, entry: Entry, job: Any, sink: Any) -> Any:
    from commbench.launch.external import as_external_rank

    return as_external_rank(env, lambda: entry(env, job, sink))


def _local(config: LaunchConfig, entry: Entry, job: Any, sink: Any, folder: Path, say: Say,
           explain: Callable[..., str], per_launch: PerLaunch | None) -> dict:
    """commbench starts the ranks itself, through torch's elastic agent."""
    from commbench.launch.local import run_local

    world = config.world
    say(f"starting {world} local {'+'.join(config.backends)} rank(s){config.starting} ...")
    cores = os.cpu_count() or 1
    if world > cores:
        say(f"warning: {world} ranks on {cores} CPU cores: {config.waiting}")

    def launch(sink: Any) -> dict:
        return run_local(entry, (job, sink), nproc=world, timeout=config.timeout,
                         cuda=config.cuda, explain=explain, folder=folder)

    if config.launches == 1 or per_launch is None:
        return launch(sink)
    from commbench.results import now

    started = now()
    value: dict = {}
    for index in range(config.launches):  # fresh ranks each time, like pyperf's workers
        say(f"launch {index + 1} of {config.launches} ...")
        value = launch(per_launch(sink, index, config.launches, started))
    return value
