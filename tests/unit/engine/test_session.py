"""engine/session.py: which ranks share a GPU (the device UUID, else the full PCI
address), and the mesh groups made with the run's --timeout, pinned with fakes of the device
properties and torch's mesh so that they fail on a machine without a GPU (issue 22)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from commbench.engine import facts
from commbench.engine.failures import RankFailure
from commbench.engine.session import pick_device, shared_gpu

# ---- two ranks on one GPU: the device UUID, else the full PCI address -----------------------


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


# ---- --timeout on every mesh group; interfaces on clusters; the GPU tests' own timeout -----


@pytest.fixture
def one_rank_world(monkeypatch):
    """A real one-rank gloo world in this process (the mesh code makes real groups)."""
    import torch.distributed as dist

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def group_timeout(group):
    """What a group would wait (test-only: torch has no public reader)."""
    backend = group._get_backend(torch.device("cpu"))
    return backend.options._timeout


def mesh_session(timeout=7.0):
    from commbench.engine.session import Session
    from commbench.launch.environment import RankEnv

    return Session(RankEnv("local", 0, 1, 0, 1, "127.0.0.1", 1, True), timeout, ("gloo",),
                   cuda=False)


def test_mesh_groups_get_the_timeout(one_rank_world):
    groups = mesh_session()._make_mesh("gloo", "cpu", ("dp", "tp"), (1, 1))
    assert {name: group_timeout(g).total_seconds() for name, g in groups.items()} == {
        "dp": 7.0, "tp": 7.0}


def test_a_torch_without_gloo_options_makes_the_groups_by_hand(one_rank_world, monkeypatch):
    import torch.distributed as dist

    monkeypatch.delattr(dist.ProcessGroupGloo, "_Options")
    groups = mesh_session()._make_mesh("gloo", "cpu", ("dp", "tp"), (1, 1))
    assert [group_timeout(g).total_seconds() for g in groups.values()] == [7.0, 7.0]


def test_a_device_mesh_that_drops_the_options_timeout_is_corrected(one_rank_world, monkeypatch):
    """As DeviceMesh did on releases whose new_group call had no timeout=: torch's default."""
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh

    def dropping(device, shape, mesh_dim_names, backend_override):
        made = {name: dist.new_group([0], backend=backend_override[name][0])
                for name in mesh_dim_names}
        return SimpleNamespace(get_group=made.__getitem__)

    monkeypatch.setattr(device_mesh, "init_device_mesh", dropping)
    groups = mesh_session()._make_mesh("gloo", "cpu", ("dp", "tp"), (1, 1))
    assert [group_timeout(g).total_seconds() for g in groups.values()] == [7.0, 7.0]


@pytest.mark.parametrize(
    ("local_rank", "visible", "nccl", "device"),
    [(3, 1, True, 0),  # srun --gpus-per-task=1: each task sees its own GPU as cuda:0
     (3, 8, True, 3), (1, 2, False, 1), (5, 2, False, 1)],
)
def test_a_rank_picks_its_gpu(local_rank, visible, nccl, device):
    assert pick_device(local_rank, visible, nccl) == device


def test_nccl_without_a_gpu_for_the_rank_is_refused():
    with pytest.raises(RankFailure, match="LOCAL_RANK 4 has no GPU"):
        pick_device(4, 2, True)


def test_two_ranks_on_one_gpu_are_named():
    hosts = [{"host": "a", "node": "0", "pci_bus_id": "0000:1b:00.0"},
             {"host": "a", "node": "0", "pci_bus_id": "0000:1c:00.0"},
             {"host": "a", "node": "0", "pci_bus_id": "0000:1b:00.0"},
             {"host": "b", "node": "1", "pci_bus_id": "0000:1b:00.0"}]
    assert "ranks 0 and 2 on a both use the GPU at 0000:1b:00.0" in shared_gpu(hosts)
    assert shared_gpu(hosts[:2] + hosts[3:]) == ""
