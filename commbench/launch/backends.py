"""Which backends and GPUs this machine has for the ranks it will hold: resolved and checked
before any process starts (exit 2 for what cannot run)."""

from __future__ import annotations

from commbench import collectives
from commbench.collectives import workload
from commbench.core.errors import UsageError
from commbench.specs.measure import MeasureSpec


def resolve_backends(names: tuple[str, ...]) -> tuple[str, ...]:
    """``auto`` is nccl when CUDA GPUs are visible, else gloo."""
    if "auto" not in names:
        return names
    import torch

    auto = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"
    return tuple(dict.fromkeys(auto if name == "auto" else name for name in names))


def default_nproc(backends: tuple[str, ...]) -> int:
    if "nccl" in backends:
        import torch

        return max(1, torch.cuda.device_count())
    return 2


def check_backends(spec: MeasureSpec, local_ranks: int, external: bool = False) -> None:
    """A listed backend this machine lacks is refused before anything runs (exit 2).

    Under a launcher that shows each task one GPU (srun --gpus-per-task=1 ...), one visible
    GPU serves a rank however many ranks share the node.
    """
    import torch
    import torch.distributed as dist

    for backend in spec.backends:
        if backend == "gloo" and not dist.is_gloo_available():
            raise UsageError("gloo is not available in this torch build")
        if backend == "nccl" and not dist.is_nccl_available():
            raise UsageError("nccl is not available in this torch build (a CPU-only torch?)")
        if spec.device_for(backend) == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise UsageError(f"{backend} with CUDA buffers needs a GPU, and none is visible")
            if backend == "nccl" and local_ranks > count and not (external and count == 1):
                roles = "".join(workload.roles_text(collectives.get(name), spec, local_ranks)
                                for name in spec.ops)  # ps: its servers need GPUs too
                raise UsageError(
                    f"{local_ranks} ranks on this node but only {count} GPU(s) are visible"
                    + roles
                )
