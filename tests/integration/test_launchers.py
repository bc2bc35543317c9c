"""Under external launchers every process is one rank and rank 0 alone writes the results."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import read_meta, read_rows

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_", "PMI"))}
    return {**env, "GLOO_SOCKET_IFNAME": "lo", **extra}


ARGS = ["allreduce", "--sizes", "8,1K", "--iters", "4", "--json"]


def test_two_torchrun_agents_form_one_four_rank_run_tp_inside_dp_across(tmp_path):
    """Two agents form one 4-rank run (one launch checks both things): rank 0 alone writes the
    folder and prints rows. torchrun's GROUP_RANK tells the agents apart on one host: tp
    groups (ranks 0,1 and 2,3) stay on one agent, dp groups (0,2 and 1,3) cross them."""
    port = free_port()
    command = [str(BIN / "torchrun"), "--nnodes", "2", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
               "--rdzv-id", "commbench-test", "-m", "commbench", *ARGS,
               "--mesh", "dp=2,tp=2", "--dim", "all", "--out", str(tmp_path), "--name", "two-nodes"]
    agents = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=clean_env()) for _ in range(2)]
    outputs = [agent.communicate(timeout=120) for agent in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    assert [p.name for p in tmp_path.iterdir()] == ["two-nodes"]  # one folder, by rank 0
    meta = read_meta(tmp_path / "two-nodes")
    assert (meta["launcher"], meta["world_size"], meta["nnodes"]) == ("torchrun", 4, 2)
    assert meta["hosts"] == [socket.gethostname()]
    rows = read_rows(tmp_path / "two-nodes")
    assert sorted((r["dim"], r["size_bytes"]) for r in rows) == [
        ("dp", 8), ("dp", 1024), ("tp", 8), ("tp", 1024)]
    assert [(r["world_size"], r["nnodes"], r["wrong"]) for r in rows] == [(4, 2, 0)] * 4
    assert {r["dim"]: r["span"] for r in rows} == {"tp": "intra-node", "dp": "inter-node"}
    json_lines = [line for out, _ in outputs for line in out.splitlines() if line.startswith("{")]
    assert len(json_lines) == len(rows)  # only rank 0 prints rows


@pytest.mark.core
def test_nproc_under_a_launcher_is_refused(tmp_path):
    env = clean_env(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    done = subprocess.run([sys.executable, "-m", "commbench", *ARGS, "--nproc", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "--nproc cannot be used under env" in done.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI (openmpi-bin) not installed")
def test_mpirun_launches_a_two_rank_gloo_run(tmp_path):
    done = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
         sys.executable, "-m", "commbench", *ARGS, "--out", str(tmp_path), "--name", "mpi"],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    meta = read_meta(tmp_path / "mpi")
    assert (meta["launcher"], meta["world_size"], meta["status"]) == ("openmpi", 2, "complete")
    assert [r["wrong"] for r in read_rows(tmp_path / "mpi")] == [0, 0]


def test_doctor_runs_a_real_rendezvous():
    done = subprocess.run([sys.executable, "-m", "commbench", "doctor", "--nproc", "3"],
                          capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert "all 3 rank(s) arrived and agree" in done.stdout
    assert "torch" in done.stdout and "launcher" in done.stdout


def test_doctor_json_reports_the_host_limits_nccl_needs():
    import json

    done = subprocess.run([sys.executable, "-m", "commbench", "doctor", "--nproc", "2", "--json"],
                          capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    environment = report["environment"]
    assert {"/dev/shm", "memlock limit", "net lo", "launcher"} <= set(environment)
    assert environment["net lo"].startswith("up 127.0.0.1")
    assert [r["rank"] for r in report["ranks"]] == [0, 1] and report["arrived"] == 2
