"""Launcher detection for every family, from the environment each one sets."""

import pytest

from commbench.core.errors import UsageError
from commbench.launch.environment import detect, first_host


def test_no_launcher_means_local():
    assert detect({}) is None


def test_torchrun():
    env = detect({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                  "MASTER_ADDR": "node0", "MASTER_PORT": "1234", "TORCHELASTIC_RUN_ID": "x",
                  "TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert (env.launcher, env.rank, env.world, env.local_rank, env.local_world) == (
        "torchrun", 3, 8, 1, 4)
    assert (env.master_addr, env.master_port, env.agent_store) == ("node0", 1234, True)


def test_kubeflow_pytorchjob():
    env = detect({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "job-master-0",
                  "MASTER_PORT": "23456"})
    assert (env.launcher, env.rank, env.local_rank, env.agent_store) == ("env", 1, 0, False)


def test_env_without_master_is_refused():
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        detect({"RANK": "0", "WORLD_SIZE": "2"})


def test_slurm_uses_the_first_node_as_master():
    env = detect({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                  "SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_NODELIST": "gpu[007-010,012]"})
    assert (env.launcher, env.rank, env.world, env.local_rank) == ("slurm", 5, 8, 1)
    assert env.master_addr == "gpu007" and 20000 <= env.master_port < 40000


def test_slurm_honours_master_addr():
    env = detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "a,b",
                  "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000"})
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 4000)


def test_single_task_allocation_is_local():
    assert detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None
    assert detect({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}) is None


def test_open_mpi_on_one_node():
    env = detect({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                  "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (env.launcher, env.rank, env.world, env.local_rank) == ("openmpi", 1, 2, 1)
    assert env.master_addr == "127.0.0.1"


def test_open_mpi_across_nodes_needs_master_addr():
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        detect({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})


def test_mpich_and_intel_mpi():
    env = detect({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0",
                  "MPI_LOCALNRANKS": "2", "MASTER_ADDR": "h0"})
    assert (env.launcher, env.rank, env.world, env.local_rank, env.master_addr) == (
        "mpich", 2, 4, 0, "h0")


def test_bad_numbers_are_usage_errors():
    with pytest.raises(UsageError, match="RANK"):
        detect({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"})


@pytest.mark.parametrize(
    ("nodelist", "host"),
    [("node1", "node1"), ("gpu[003-010,012]", "gpu003"), ("a[1,5],b", "a1"), ("x-y[09]", "x-y09")],
)
def test_first_host_of_a_slurm_nodelist(nodelist, host):
    assert first_host(nodelist) == host


def test_ports_derive_from_the_job_id():
    base = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    one = detect({**base, "PMIX_NAMESPACE": "111"}).master_port
    assert one == detect({**base, "PMIX_NAMESPACE": "111", "OMPI_COMM_WORLD_RANK": "1"}).master_port
    assert one != detect({**base, "PMIX_NAMESPACE": "222"}).master_port
    assert detect({**base, "PMIX_NAMESPACE": "1", "MASTER_PORT": "777"}).master_port == 777
    assert detect(base).master_port == 29500


def test_gloo_binds_where_the_master_is(monkeypatch):
    from commbench.launch.environment import RankEnv, interface_towards, pin_interfaces

    assert interface_towards("127.0.0.1", 29500) == "lo"
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    pin_interfaces(RankEnv("slurm", 0, 2, 0, 2, "localhost", 29500, False))  # one node
    import os

    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo" and os.environ["NCCL_SOCKET_IFNAME"] == "lo"


def test_a_chosen_interface_is_kept(monkeypatch):
    from commbench.launch.environment import RankEnv, pin_interfaces

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib0")
    pin_interfaces(RankEnv("local", 0, 2, 0, 2, "127.0.0.1", 1, True))
    import os

    assert os.environ["GLOO_SOCKET_IFNAME"] == "ib0"


def test_a_one_node_slurm_step_has_every_rank_local():
    env = detect({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NNODES": "1",
                  "SLURM_JOB_NODELIST": "n1"})
    assert env.local_world == 4
    spread = detect({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NNODES": "2",
                     "SLURM_JOB_NODELIST": "n[1-2]"})
    assert spread.local_world == 1
