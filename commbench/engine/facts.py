"""What a result needs to be interpreted later (versions, hosts, hardware, relevant environment),
and what doctor reports about this machine. Gathered on the ranks, where torch is loaded."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import socket
import sys

from commbench.core import compat

ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "MASTER_", "CUDA_", "OMP_", "SLURM_JOB", "OMPI_COMM")


def relevant_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_facts(local_rank: int, devices: list[str]) -> dict:
    """This rank's host and device, gathered to rank 0 for run.json."""
    facts = {"host": socket.gethostname(), "pid": os.getpid(), "local_rank": local_rank}
    # Several launcher agents may share a host (torchrun --nnodes 2 on one machine).
    facts["node"] = os.environ.get("GROUP_RANK") or os.environ.get("SLURM_NODEID") or ""
    facts["cpu"] = cpu_model()
    import torch

    facts["intra_op_threads"] = torch.get_num_threads()  # the ops' own threads (OMP_NUM_THREADS)
    if "cuda" in devices:
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        facts["gpu"] = props.name
        facts["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        facts["pci_bus_id"] = pci_address(props)
        facts["gpu_uuid"] = compat.gpu_uuid(props)
        facts["cuda_device"] = index
    return facts


def pci_address(props) -> str | None:
    """The full PCI address ``domain:bus:device`` of the device, or None where torch does not
    give all three. torch's ``pci_bus_id`` is the bus *number* alone: hosts that give each GPU
    its own PCI domain show the same bus number for different GPUs."""
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id",
                                                      "pci_device_id")]
    if any(not isinstance(part, int) for part in parts):
        return None
    domain, bus, device = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def versions() -> dict:
    import torch

    from commbench import __version__

    info = {
        "commbench": __version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cuda_runtime": torch.version.cuda,
        "nccl": None,
    }
    if torch.cuda.is_available():
        with contextlib.suppress(Exception):
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        info["cuda_driver"] = _driver_version()
        info["gpu_topology"] = _nvidia_smi(["topo", "-m"])
    return info


def _driver_version() -> str | None:
    out = _nvidia_smi(["--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else None


def _nvidia_smi(args: list[str]) -> str | None:
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def environment_report(env) -> list[tuple[str, str]]:
    """(item, finding) pairs about this process's machine, for doctor; ``env`` is the
    launcher's RankEnv, or None when commbench starts the ranks itself."""
    import torch
    import torch.distributed as dist

    from commbench import __version__

    rows = [
        ("commbench", __version__),
        ("python", sys.version.split()[0]),
        ("torch", torch.__version__),
        ("gloo", "available" if dist.is_gloo_available() else "missing"),
    ]
    if dist.is_nccl_available() and torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as error:  # a broken NCCL install is a finding, not a crash
            nccl = f"error: {error}"
        rows.append(("nccl", nccl))
    else:
        rows.append(("nccl", "available" if dist.is_nccl_available() else "missing (no CUDA)"))
    rows.append(("torch mpi backend", "available" if dist.is_mpi_available() else "missing"))
    rows.append(("mpirun", shutil.which("mpirun") or "not on PATH"))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    rows.append(("cuda devices", str(count)))
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        rows.append((f"  cuda:{index}", f"{props.name}, {props.total_memory / 2**30:.0f} GiB"))
    if env is None:
        rows.append(("launcher", "none: commbench starts local ranks (--nproc)"))
    else:
        rows.append(("launcher", f"{env.launcher}: rank {env.rank} of {env.world}, "
                                 f"master {env.master_addr}:{env.master_port}"))
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES"):
        if name in os.environ:
            rows.append((name, os.environ[name]))
    rows += system_limits()
    rows += network_interfaces()
    return rows


def system_limits() -> list[tuple[str, str]]:
    """What NCCL needs from the host: shared memory for ranks on one node (a container's
    default /dev/shm of 64 MiB makes NCCL fail or fall back), and locked memory for RDMA."""
    import resource

    rows = []
    try:
        usage = shutil.disk_usage("/dev/shm")
        rows.append(("/dev/shm", f"{usage.free / 2**30:.1f} GiB free of "
                                 f"{usage.total / 2**30:.1f} GiB"))
    except OSError:
        rows.append(("/dev/shm", "missing"))
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    rows.append(("memlock limit", "unlimited" if soft == resource.RLIM_INFINITY
                 else f"{soft / 2**20:g} MiB (RDMA wants unlimited: ulimit -l unlimited)"))
    return rows


def network_interfaces() -> list[tuple[str, str]]:
    """Network and InfiniBand interfaces, and which ones NCCL's socket transport would pick
    (NCCL_SOCKET_IFNAME's prefixes, else everything up but lo and docker*)."""
    import psutil

    chosen = os.environ.get("NCCL_SOCKET_IFNAME", "")
    prefixes = [p for p in chosen.lstrip("^=").split(",") if p]
    rows = []
    stats = psutil.net_if_stats()
    for name, addresses in sorted(psutil.net_if_addrs().items()):
        ipv4 = [a.address for a in addresses if a.family == socket.AF_INET]
        up = stats.get(name) is not None and stats[name].isup
        if prefixes:
            picked = any(name.startswith(p) for p in prefixes) != chosen.startswith("^")
        else:
            picked = up and name != "lo" and not name.startswith("docker")
        mark = "  <- NCCL sockets" if picked and up else ""
        rows.append((f"net {name}", f"{'up' if up else 'down'} {' '.join(ipv4) or '-'}{mark}"))
    infiniband = "/sys/class/infiniband"
    devices = sorted(os.listdir(infiniband)) if os.path.isdir(infiniband) else []
    for device in devices:
        states = []
        ports = os.path.join(infiniband, device, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            try:
                with open(os.path.join(ports, port, "state")) as handle:
                    states.append(f"port {port} {handle.read().strip().split()[-1]}")
            except OSError:
                continue
        rows.append((f"ib {device}", ", ".join(states) or "no ports"))
    if not devices:
        rows.append(("infiniband", "none found (/sys/class/infiniband)"))
    return rows
