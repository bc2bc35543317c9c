"""The one launch path (launch.ranks): the checks before any rank starts, the folder and how a
failure comes back. No rank is started here: the entry runs in this process as an external
launcher's rank would, and local ranks are faked where only the words around them are checked
(real local launches: tests/integration)."""

from __future__ import annotations

import json
import os

import pytest

from commbench.core.errors import RunFailed, UsageError
from commbench.launch.environment import RankEnv
from commbench.launch.ranks import LaunchConfig, Placement, check_nproc, place, run_ranks


@pytest.fixture(autouse=True)
def _interfaces(monkeypatch):
    """An external rank pins its interfaces in os.environ: restored after each test."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "lo")


def under_torchrun(monkeypatch, rank: int, world: int = 2) -> None:
    for name, value in {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                        "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                        "TORCHELASTIC_RUN_ID": "t"}.items():
        monkeypatch.setenv(name, value)


def env_of(rank: int) -> RankEnv:
    return RankEnv("torchrun", rank, 2, rank, 2, "127.0.0.1", 29500, False)


def test_nproc_under_a_launcher_and_below_one_are_refused(monkeypatch):
    under_torchrun(monkeypatch, 0)
    with pytest.raises(UsageError, match="--nproc cannot be used under torchrun: it already "
                                         "started 2 ranks"):
        place(4, ("gloo",))
    assert place(None, ("gloo",)).world == 2
    with pytest.raises(UsageError, match="bad --nproc 0"):
        check_nproc(None, 0)


def test_local_world_is_nproc_else_the_commands_default(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert place(3, ("gloo",), default=4) == Placement(None, 3)
    assert place(None, ("gloo",), default=4) == Placement(None, 4)
    assert place(None, ("gloo",)).world == 2


def test_nccl_without_a_gpu_is_refused_in_the_commands_words(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="needs CUDA GPUs"):
        place(2, ("nccl",))
    with pytest.raises(UsageError, match="replay it on CPUs"):
        place(2, ("nccl",), cuda_refusal="replay it on CPUs")
    assert place(2, ("nccl",), check_cuda=False).world == 2


def config(tmp_path, placement, **kw) -> LaunchConfig:
    return LaunchConfig(placement, ("gloo",), 10.0, False, what="probe", out=str(tmp_path),
                        command_line=("commbench", "probe"), meta={"command": "probe"}, **kw)


def test_a_rank_other_than_0_makes_no_folder_and_returns_its_entrys_value(tmp_path):
    said = []
    launched = run_ranks(config(tmp_path, Placement(env_of(1), 2)),
                         lambda env, job, sink: (env.rank, job, sink), "job",
                         lambda writer: pytest.fail("only rank 0 has sinks"),
                         say=said.append, explain=str)
    assert launched.path is None and launched.failure is None
    assert launched.value == (1, "job", None)
    assert list(tmp_path.iterdir()) == [] and said == []


def test_rank_0_starts_run_json_before_its_sinks_and_keeps_a_failure(tmp_path):
    """run.json exists (name, command, command line) before the sinks are made and the entry
    runs; a failing entry comes back as Launched.failure, said in one line, never raised."""
    seen = []

    def sinks(writer):
        seen.append(json.loads((writer.path / "run.json").read_text()))
        return "sink"

    def entry(env, job, sink):
        assert sink == "sink"
        raise RunFailed("rank 1 hung")

    said = []
    launched = run_ranks(config(tmp_path, Placement(env_of(0), 2), name="mine"), entry, None,
                         sinks, say=said.append, explain=str)
    assert launched.path == tmp_path / "mine"
    assert seen[0]["name"] == "mine" and seen[0]["command"] == "probe"
    assert seen[0]["command_line"] == ["commbench", "probe"]
    assert isinstance(launched.failure, RunFailed)
    assert said == ["error: rank 0: rank 1 hung"]


def test_generated_run_id_names_what_backends_and_world(tmp_path):
    launched = run_ranks(config(tmp_path, Placement(env_of(0), 2)), lambda *a: 7, None,
                         lambda writer: None, say=lambda text: None, explain=str)
    assert launched.path.name.endswith("-probe-gloo-n2") and launched.value == 7


def test_local_ranks_warn_of_more_ranks_than_cores_in_the_commands_words(tmp_path,
                                                                        monkeypatch):
    """The warning says what a wait for a core does to the numbers, and nothing unrelated
    (it ended with "(nccl-tests' -n is --iters here)"); --repeat starts the ranks afresh per
    launch, each with its own sink."""
    started = []

    def fake_run_local(entry, args, *, nproc, **kw):
        started.append((nproc, args))
        return {0: len(started)}

    monkeypatch.setattr("commbench.launch.local.run_local", fake_run_local)
    world = (os.cpu_count() or 1) + 1
    said = []
    launched = run_ranks(config(tmp_path, Placement(None, world), launches=2),
                         lambda *a: None, "job", lambda writer: "sink", say=said.append,
                         explain=str, per_launch=lambda sink, i, n, start: f"{sink}{i}/{n}")
    assert said[0] == f"starting {world} local gloo rank(s) ..."
    assert said[1] == (f"warning: {world} ranks on {os.cpu_count()} CPU cores: ranks wait for "
                       "a core and times include that wait")
    assert said[2:] == ["launch 1 of 2 ...", "launch 2 of 2 ..."]
    assert started == [(world, ("job", "sink0/2")), (world, ("job", "sink1/2"))]
    assert launched.value == {0: 2}
