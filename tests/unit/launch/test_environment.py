"""Launcher detection for every family, from the environment each one sets."""

import os
import socket
from types import SimpleNamespace

import pytest

from commbench.core.errors import UsageError
from commbench.launch import environment as launch_env
from commbench.launch.environment import RankEnv, detect, first_host, hostnames


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


@pytest.fixture
def clean_ifnames(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)


def test_a_two_node_srun_step_does_not_pin_loopback(monkeypatch, clean_ifnames):
    """sbatch --ntasks-per-node=16 -N2, then srun -n16 -N2: the step inherits
    SLURM_NTASKS_PER_NODE=16, which made all 16 ranks look local, and pinned lo."""
    from commbench.launch import environment as launch_env

    monkeypatch.setattr(launch_env, "interface_towards", lambda address, port: "eth0")
    env = launch_env.detect({
        "SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "16",
        "SLURM_STEP_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
        "SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "n[1-2]", "MASTER_ADDR": "n1"})
    assert (env.nnodes, env.local_world) == (2, 8)
    assert not launch_env.all_ranks_here(env)
    launch_env.pin_interfaces(env)
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth0" and "NCCL_SOCKET_IFNAME" not in os.environ


def test_a_one_node_srun_step_still_pins_loopback(monkeypatch, clean_ifnames):
    from commbench.launch import environment as launch_env

    env = launch_env.detect({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE":
                             "2", "SLURM_STEP_NODELIST": "n7", "MASTER_ADDR": "n7"})
    assert (env.nnodes, env.local_world) == (1, 4) and launch_env.all_ranks_here(env)
    launch_env.pin_interfaces(env)
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"


def fake_interfaces(monkeypatch, names):
    import socket

    import psutil

    addr = lambda ip: SimpleNamespace(family=socket.AF_INET, address=ip)  # noqa: E731
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: {n: [addr(ip)] for n, ip in names})
    monkeypatch.setattr(psutil, "net_if_stats",
                        lambda: {n: SimpleNamespace(isup=True) for n, _ in names})


def test_the_outward_interface_is_no_bridge_or_container_interface(monkeypatch):
    """A host whose name resolves to 127.0.1.1, with Docker and libvirt installed."""
    from commbench.launch import environment as launch_env

    fake_interfaces(monkeypatch, [("docker0", "172.17.0.1"), ("virbr0", "192.168.122.1"),
                                  ("veth1a2b", "169.254.3.1"), ("br-5f0c", "172.18.0.1"),
                                  ("lo", "127.0.0.1"), ("ib0", "10.2.0.5"),
                                  ("eth0", "10.1.0.5")])
    monkeypatch.setattr(launch_env, "default_route_interface", lambda: None)
    assert launch_env.outward_interface() == "eth0"
    monkeypatch.setattr(launch_env, "default_route_interface", lambda: "ib0")
    assert launch_env.outward_interface() == "ib0"  # the route's own interface first
    monkeypatch.setattr(launch_env, "default_route_interface", lambda: "docker0")
    assert launch_env.outward_interface() == "eth0"


def test_the_default_route_is_read_from_the_kernels_table(tmp_path):
    from commbench.launch.environment import default_route_interface

    table = tmp_path / "route"
    table.write_text(
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"
        "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\n"
        "eth1\t00000000\t0102000A\t0003\t0\t0\t200\t00000000\n"
        "eth0\t00000000\t0101000A\t0003\t0\t0\t100\t00000000\n")
    assert default_route_interface(str(table)) == "eth0"
    assert default_route_interface(str(tmp_path / "missing")) is None


def job(world, local_world, master="node0", launcher="torchrun"):
    return RankEnv(launcher, 0, world, 0, local_world, master, 29500, True)


def test_node_0_of_a_multi_node_job_does_not_bind_loopback(monkeypatch, clean_ifnames):
    """Its host name resolves to 127.0.1.1, so MASTER_ADDR (itself) routes over lo."""
    monkeypatch.setattr(launch_env, "interface_towards", lambda address, port: "lo")
    monkeypatch.setattr(launch_env, "outward_interface", lambda: "eth0")
    launch_env.pin_interfaces(job(world=16, local_world=8))
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth0"
    assert "NCCL_SOCKET_IFNAME" not in os.environ


def test_a_single_node_job_binds_loopback(monkeypatch, clean_ifnames):
    monkeypatch.setattr(launch_env, "interface_towards", lambda address, port: "eth0")
    launch_env.pin_interfaces(job(world=8, local_world=8))
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo" and os.environ["NCCL_SOCKET_IFNAME"] == "lo"


def test_gloo_binds_to_the_interface_holding_the_route_to_master(monkeypatch, clean_ifnames):
    """A non-loopback MASTER_ADDR: the interface whose address the kernel would send from."""
    addr = lambda ip: SimpleNamespace(family=socket.AF_INET, address=ip)  # noqa: E731
    interfaces = {"lo": [addr("127.0.0.1")], "eth0": [addr("10.1.0.5")],
                  "ib0": [addr("192.168.7.5")]}

    class Probe:
        def __init__(self, *args):
            self.target = None

        def __enter__(self):
            return self

        def __exit__(self, *args):
            return False

        def connect(self, target):
            self.target = target

        def getsockname(self):
            return ("192.168.7.5" if self.target[0].startswith("192.168.") else "10.1.0.5", 0)

    import psutil

    monkeypatch.setattr(psutil, "net_if_addrs", lambda: interfaces)
    monkeypatch.setattr(launch_env.socket, "socket", Probe)
    monkeypatch.setattr(launch_env.socket, "gethostbyname", lambda name: {
        "ib-master": "192.168.7.1", "eth-master": "10.1.0.1"}[name])
    assert launch_env.interface_towards("ib-master", 29500) == "ib0"
    launch_env.pin_interfaces(job(world=16, local_world=8, master="eth-master"))
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth0"


@pytest.mark.parametrize(
    ("nodelist", "hosts"),
    [("node1", ["node1"]),
     ("gpu[003-005,012],cpu1", ["gpu003", "gpu004", "gpu005", "gpu012", "cpu1"]),
     ("a[1,5],b", ["a1", "a5", "b"]),
     ("rack[1-2]-n[08-09]-ib", ["rack1-n08-ib", "rack1-n09-ib", "rack2-n08-ib", "rack2-n09-ib"]),
     ("x-y[09]", ["x-y09"])],
)
def test_slurm_node_lists_expand_like_scontrol(nodelist, hosts):
    assert hostnames(nodelist) == hosts


def test_scontrol_is_asked_first_when_installed(monkeypatch):
    import shutil
    import subprocess

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/scontrol")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(
        returncode=0, stdout="weird-host-a\nweird-host-b\n"))
    assert launch_env.first_host("weird[a-b]") == "weird-host-a"


def test_commbench_s_own_thread_count_stays_out_of_the_user_s_job(monkeypatch):
    from commbench.launch import environment

    monkeypatch.setattr(environment, "_OURS", {})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    environment.one_intra_op_thread()
    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in environment.users_environment(os.environ)

    monkeypatch.setattr(environment, "_OURS", {})  # the user's own: kept for ranks and job
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    environment.one_intra_op_thread()
    assert os.environ["OMP_NUM_THREADS"] == "4"
    assert environment.users_environment(os.environ)["OMP_NUM_THREADS"] == "4"
