"""The NCCL / CUDA-path defects of issue 22, each pinned with a fake of the one thing it depends
on (device properties, torch.distributed calls, CUDA graphs, the store, the environment), so
that they fail here, on a machine without a GPU, when the defect comes back."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from commbench.engine import facts
from commbench.engine.session import shared_gpu

# ---- 1. two ranks on one GPU: the device UUID, else the full PCI address -----------------------


def props(uuid=None, domain=0, bus=0x1B, device=0):
    found = SimpleNamespace(name="H200", total_memory=141 << 30, pci_domain_id=domain,
                            pci_bus_id=bus, pci_device_id=device)
    if uuid is not None:
        found.uuid = uuid
    return found


def facts_on(monkeypatch, device_props):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: device_props)
    found = facts.host_facts(0, ["cuda"])
    found["host"], found["node"] = "a", "0"
    return found


def test_gpus_in_different_pci_domains_on_the_same_bus_number_are_not_one_gpu(monkeypatch):
    """Each GPU in its own PCI domain, all on bus 0x1b: before, every run was refused."""
    hosts = [facts_on(monkeypatch, props(domain=d)) for d in (0, 1, 2)]
    assert [h["pci_bus_id"] for h in hosts] == ["0000:1b:00", "0001:1b:00", "0002:1b:00"]
    assert shared_gpu(hosts) == ""
    same = [facts_on(monkeypatch, props(domain=1)) for _ in range(2)]
    assert "ranks 0 and 1 on a both use the GPU at 0001:1b:00" in shared_gpu(same)


def test_the_device_uuid_decides_where_torch_has_it(monkeypatch):
    hosts = [facts_on(monkeypatch, props(uuid=f"GPU-{n}", domain=0)) for n in (1, 2)]
    assert [h["gpu_uuid"] for h in hosts] == ["GPU-1", "GPU-2"]
    assert shared_gpu(hosts) == ""  # same PCI address in these fakes, different devices
    twice = [facts_on(monkeypatch, props(uuid="GPU-7", domain=d)) for d in (0, 1)]
    assert "ranks 0 and 1" in shared_gpu(twice)


def test_a_bus_number_alone_is_never_compared():
    """Facts from a torch that gives neither UUID nor domain: no claim either way."""
    hosts = [{"host": "a", "node": "0", "pci_bus_id": 27, "gpu_uuid": None}] * 2
    assert shared_gpu(hosts) == ""
