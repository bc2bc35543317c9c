"""launch/backends.py: the preflight under a launcher with one GPU per task (a fake of
torch.cuda: this machine has no GPU)."""

import pytest


def test_one_gpu_per_task_passes_the_preflight_under_a_launcher(monkeypatch):
    import torch

    from commbench.core.errors import UsageError
    from commbench.launch.backends import check_backends
    from commbench.specs.measure import MeasureSpec

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    spec = MeasureSpec(ops=("allreduce",), backends=("nccl",))
    check_backends(spec, 8, external=True)
    with pytest.raises(UsageError, match="8 ranks on this node but only 1 GPU"):
        check_backends(spec, 8, external=False)
