"""commands/doctor.py on a one-GPU host and under srun --gpus-per-task=1, with faked devices
and launcher variables (issue 22)."""

from __future__ import annotations

import os

import pytest
import torch

# ---- doctor on a 1-GPU host, and under srun --gpus-per-task=1 -------------------------------

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@pytest.fixture
def one_gpu_host(monkeypatch):
    """A host with one visible GPU and NCCL; no launcher unless a test sets one."""
    import commbench.engine.facts
    import commbench.launch

    for name in [*LAUNCHER_VARS, *(n for n in os.environ if n.startswith("SLURM_"))]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    monkeypatch.setattr(commbench.engine.facts, "environment_report", lambda env: [])
    monkeypatch.setattr(commbench.launch, "pin_interfaces", lambda env: None)


def reports(world):
    return [{"rank": r, "host": "h", "local_rank": r, "join_s": 0.1, "barrier_us": 1.0,
             "allreduce_us": 1.0, "nccl_us": 1.0} for r in range(world)]


def test_doctor_with_nccl_on_a_one_gpu_host_runs_one_rank(monkeypatch, one_gpu_host, capsys):
    import json

    import commbench.launch.local
    from commbench.commands.doctor import run_doctor

    started = []

    def run_local(entry, args, nproc, timeout, cuda, explain):
        started.append(nproc)
        return reports(nproc), None

    monkeypatch.setattr(commbench.launch.local, "run_local", run_local)
    assert run_doctor(None, 30.0, ("nccl",), json_out=True) == 0
    assert started == [1]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["world_size"] == 1


def test_doctor_under_srun_with_one_gpu_per_task_uses_the_launchers_world(monkeypatch,
                                                                         one_gpu_host, capsys):
    """srun -n 2 --gpus-per-task=1 on one node: each task sees its own GPU as cuda:0."""
    import json

    import commbench.engine.probe
    from commbench.commands.doctor import run_doctor

    for name, value in {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
                        "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "n1",
                        "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    probed = []

    def probe_rank(env, timeout, backends):
        probed.append((env.launcher, env.world))
        return reports(env.world)

    monkeypatch.setattr(commbench.engine.probe, "probe_rank", probe_rank)
    assert run_doctor(None, 30.0, ("nccl",), json_out=True) == 0
    assert probed == [("slurm", 2)]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["world_size"] == 2
