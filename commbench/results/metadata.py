"""What a result needs to be interpreted later: versions, hosts, hardware, relevant environment."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sys
from datetime import datetime, timezone

ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "MASTER_", "CUDA_", "OMP_", "SLURM_JOB", "OMPI_COMM")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    if "cuda" in devices:
        import torch

        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        facts["gpu"] = props.name
        facts["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        facts["pci_bus_id"] = getattr(props, "pci_bus_id", None)
        facts["cuda_device"] = index
    return facts


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
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
