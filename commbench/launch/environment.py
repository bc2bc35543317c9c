"""Where ranks come from: an external launcher (torchrun, Kubeflow, SLURM srun, mpirun), or
commbench itself starting local ranks through torch's elastic agent.

Local runs never listen beyond loopback: the rendezvous store is handed a socket bound to
127.0.0.1 (a TCPStore otherwise listens on every interface), and gloo / NCCL bootstrap are
pinned to ``lo``. Binding to port 0 lets the kernel pick a free port, so there is no race to
retry. Multi-node runs bind gloo to the interface that routes to MASTER_ADDR.
"""

from __future__ import annotations

import os
import re
import socket
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from commbench.core.errors import UsageError

DEFAULT_PORT = 29500
_OURS: dict[str, str] = {}  # what one_intra_op_thread set in this process, not the user


def one_intra_op_thread() -> None:
    """OMP_NUM_THREADS=1 unless the user set it, before torch is imported (cli.main), as
    torchrun does: ranks sharing a machine must not each spin a thread per core, and CPU
    ranks are forked from a launcher that must hold no OpenMP team (launch.local.start_method).
    Remembered here (not in the environment, which children inherit), so that a user's job
    started by ``record`` keeps its own default."""
    if not os.environ.get("OMP_NUM_THREADS"):
        os.environ["OMP_NUM_THREADS"] = _OURS["OMP_NUM_THREADS"] = "1"


def users_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a command of the user's (``record -- COMMAND``): without what
    one_intra_op_thread set for commbench's own ranks."""
    return {name: value for name, value in env.items() if _OURS.get(name) != value}


@dataclass(frozen=True)
class RankEnv:
    """Where this process sits in the job."""

    launcher: str  # local | torchrun | env | slurm | openmpi | mpich
    rank: int
    world: int
    local_rank: int
    local_world: int
    master_addr: str
    master_port: int
    agent_store: bool  # a launcher agent hosts the store; every rank is a client
    nnodes: int = 0  # nodes the job's ranks run on, where the launcher says (0: not said)


def _int(environ: Mapping[str, str], *names: str, default: int | None = None) -> int | None:
    for name in names:
        if environ.get(name, "").strip():
            try:
                return int(environ[name])
            except ValueError:
                raise UsageError(f"bad {name}={environ[name]!r}: not an integer") from None
    return default


def job_port(env: Mapping[str, str]) -> int:
    """MASTER_PORT, or a port derived from the job id so that concurrent jobs on one host do
    not collide on a fixed port (every rank derives the same one)."""
    if env.get("MASTER_PORT", "").strip():
        return _int(env, "MASTER_PORT")
    for name in ("SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_JOBID"):
        job = env.get(name, "").strip()
        if job:
            step = env.get("SLURM_STEP_ID", "")
            return 20000 + zlib.crc32(f"{job}.{step}".encode()) % 20000
    return DEFAULT_PORT


def hostnames(nodelist: str) -> list[str]:
    """Every host of a SLURM node list, as ``scontrol show hostnames`` prints them:
    'gpu[003-004,012],cpu1' -> gpu003 gpu004 gpu012 cpu1; 'rack[1-2]-n[01-02]-ib' -> 4 hosts
    with their suffix; zero padding is kept."""
    items, depth, current = [], 0, ""
    for char in nodelist.strip():
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise UsageError(f"cannot read the SLURM node list {nodelist!r}")
    items.append(current)
    hosts: list[str] = []
    for item in filter(None, (i.strip() for i in items)):
        hosts += _expand(item, nodelist)
    return hosts


def _expand(item: str, nodelist: str) -> list[str]:
    match = re.match(r"([^\[]*)\[([^\]]+)\](.*)$", item)
    if not match:
        return [item]
    prefix, ranges, rest = match.groups()
    values = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise UsageError(f"cannot read the SLURM node list {nodelist!r}")
        width = len(low)
        values += [f"{n:0{width}d}" for n in range(int(low), int(high or low) + 1)]
    return [host for value in values for host in _expand(prefix + value + rest, nodelist)]


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list (the master), from ``scontrol show hostnames``
    where SLURM's own tool is installed, else from commbench's reading of the list."""
    import shutil
    import subprocess

    if shutil.which("scontrol"):
        try:
            done = subprocess.run(["scontrol", "show", "hostnames", nodelist],
                                  capture_output=True, text=True, timeout=10)
            if done.returncode == 0 and done.stdout.split():
                return done.stdout.split()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    hosts = hostnames(nodelist)
    if not hosts:
        raise UsageError(f"cannot read the SLURM node list {nodelist!r}")
    return hosts[0]


def detect(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """The external launcher that started this process, or None (commbench launches locally).

    A launcher that reports a single task (``srun -n1``, ``mpirun -np 1``) counts as none, so
    ``--nproc`` works inside an allocation.
    """
    env = os.environ if environ is None else environ
    port = job_port(env)
    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        if "MASTER_ADDR" not in env:
            raise UsageError("RANK and WORLD_SIZE are set but MASTER_ADDR is not")
        return RankEnv(
            launcher="torchrun" if "TORCHELASTIC_RUN_ID" in env else "env",
            rank=_int(env, "RANK"),
            world=world,
            local_rank=_int(env, "LOCAL_RANK", default=0),
            local_world=_int(env, "LOCAL_WORLD_SIZE", default=1),
            master_addr=env["MASTER_ADDR"],
            master_port=port,
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        )
    if "SLURM_PROCID" in env and _int(env, "SLURM_NTASKS", "SLURM_NPROCS", default=1) > 1:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        master = env.get("MASTER_ADDR") or (first_host(nodelist) if nodelist else "127.0.0.1")
        world = _int(env, "SLURM_NTASKS", "SLURM_NPROCS")
        nnodes = slurm_nodes(env)
        return RankEnv(
            launcher="slurm",
            rank=_int(env, "SLURM_PROCID"),
            world=world,
            local_rank=_int(env, "SLURM_LOCALID", default=0),
            local_world=world if nnodes == 1 else slurm_tasks_here(env, world),
            master_addr=master,
            master_port=port,
            agent_store=False,
            nnodes=nnodes,
        )
    for family, prefix_rank, prefix_size, local, local_size in (
        ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ):
        if prefix_rank in env and _int(env, prefix_size, default=1) > 1:
            world = _int(env, prefix_size)
            local_world = _int(env, local_size, default=1)
            master = env.get("MASTER_ADDR")
            if master is None:
                if local_world != world:
                    raise UsageError(
                        f"{family} job spans several nodes: set MASTER_ADDR to rank 0's host"
                    )
                master = "127.0.0.1"
            return RankEnv(
                launcher=family,
                rank=_int(env, prefix_rank),
                world=world,
                local_rank=_int(env, local, default=0),
                local_world=local_world,
                master_addr=master,
                master_port=port,
                agent_store=False,
            )
    return None


def slurm_nodes(env: Mapping[str, str]) -> int:
    """Nodes of this SLURM step: the step's count or node list, else the job's (0: unknown).
    SLURM_NTASKS_PER_NODE cannot tell: an srun step inherits it from sbatch's
    --ntasks-per-node, whatever the step's own layout."""
    count = _int(env, "SLURM_STEP_NUM_NODES", default=0)
    if not count and env.get("SLURM_STEP_NODELIST", "").strip():
        count = len(hostnames(env["SLURM_STEP_NODELIST"]))
    count = count or _int(env, "SLURM_NNODES", "SLURM_JOB_NUM_NODES", default=0)
    if not count and env.get("SLURM_JOB_NODELIST", "").strip():
        count = len(hostnames(env["SLURM_JOB_NODELIST"]))
    return count


def slurm_tasks_here(env: Mapping[str, str], world: int) -> int:
    """Tasks of this step on this node, from SLURM_STEP_TASKS_PER_NODE ('8(x2)', '3,2': per
    node of the step, this one at SLURM_NODEID), else SLURM_NTASKS_PER_NODE, else 1."""
    layout = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    per_node: list[int] = []
    for part in filter(None, layout.split(",")):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            per_node = []
            break
        per_node += [int(match.group(1))] * int(match.group(2) or 1)
    node = _int(env, "SLURM_NODEID", default=0)
    if per_node:
        return per_node[node] if node < len(per_node) else per_node[0]
    return min(world, _int(env, "SLURM_NTASKS_PER_NODE", default=1) or 1)


def agent_rank_env() -> RankEnv:
    """Inside a rank started by commbench's own agent (it sets the torchelastic variables)."""
    found = detect()
    if found is None:
        raise RuntimeError("worker started without RANK / WORLD_SIZE")
    return RankEnv(**{**found.__dict__, "launcher": "local"})


def _interface_with(local_ip: str) -> str | None:
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local_ip for a in addresses):
            return name
    return None


def interface_towards(address: str, port: int) -> str | None:
    """The network interface whose address routes to ``address`` (no packet is sent)."""
    try:
        target = socket.gethostbyname(address)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, port))
            local_ip = probe.getsockname()[0]
    except OSError:
        return None
    return _interface_with(local_ip)


# Bridges and container ends: up, with an address, and useless to the other nodes.
VIRTUAL_INTERFACES = ("lo", "docker", "virbr", "veth", "br-")


def outward_interface() -> str | None:
    """Where the other nodes reach this one, for a host whose own name resolves to 127.0.1.1
    (as Debian's /etc/hosts makes it): the interface of the default route, else the first by
    name that is up with an address outside 127/8, neither loopback nor a bridge or container
    interface (docker0, virbr0, veth*, br-*), which are up with an address on many hosts."""
    import psutil

    stats = psutil.net_if_stats()
    addresses = psutil.net_if_addrs()

    def usable(name: str) -> bool:
        up = stats.get(name) is not None and stats[name].isup
        ipv4 = [a.address for a in addresses.get(name, []) if a.family == socket.AF_INET]
        return (up and not name.startswith(VIRTUAL_INTERFACES)
                and any(not ip.startswith("127.") for ip in ipv4))

    route = default_route_interface()
    if route is not None and usable(route):
        return route
    return next((name for name in sorted(addresses) if usable(name)), None)


def default_route_interface(table: str = "/proc/net/route") -> str | None:
    """The interface of the IPv4 default route with the lowest metric (Linux), or None."""
    best: tuple[int, str] | None = None
    try:
        with open(table) as routes:
            lines = routes.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 7 or fields[1] != "00000000" or not int(fields[3], 16) & 1:
            continue  # not a default route, or not up (RTF_UP)
        metric = int(fields[6])
        if best is None or metric < best[0]:
            best = (metric, fields[0])
    return best[1] if best else None


def all_ranks_here(env: RankEnv) -> bool:
    """Whether every rank of the job runs on this host (then loopback carries everything):
    the launcher's node count where it gives one, else its count of ranks on this node."""
    if env.launcher == "local":
        return True
    if env.nnodes:
        return env.nnodes == 1
    return env.local_world >= env.world


def pin_interfaces(env: RankEnv) -> None:
    """Bind gloo (and NCCL's bootstrap) where the job's traffic belongs, unless the user chose.

    Loopback only when every rank is on this host: on node 0 of a multi-node job whose host
    name resolves to 127.0.1.1, MASTER_ADDR looks local, but the other nodes cannot reach a
    socket bound to lo, and the job would never form.
    """
    if all_ranks_here(env):
        interface = "lo"
    else:
        interface = interface_towards(env.master_addr, env.master_port)
        if interface is None or interface == "lo":
            interface = outward_interface()
    if interface:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        if interface == "lo":
            os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
