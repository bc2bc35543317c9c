"""The NCCL / CUDA-path defects of issue 22, each pinned with a fake of the one thing it depends
on (device properties, torch.distributed calls, CUDA graphs, the store, the environment), so
that they fail here, on a machine without a GPU, when the defect comes back."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
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


# ---- 2. p2p with idle ranks: the group's first NCCL call is one every rank makes ---------------


class RecordingDist:
    """torch.distributed's p2p surface, recording (rank, call, group) per rank."""

    def __init__(self, monkeypatch, backend: str):
        import torch.distributed as dist

        self.calls: list[tuple[int, str, object]] = []
        self.rank = -1
        record = self.record

        class Op:
            def __init__(self, op, tensor, peer, group=None):
                self.op, self.tensor, self.peer, self.group = op, tensor, peer, group

        def batch(ops):
            record("batch_isend_irecv", ops[0].group)
            return []

        monkeypatch.setattr(dist, "P2POp", Op)
        monkeypatch.setattr(dist, "batch_isend_irecv", batch)
        monkeypatch.setattr(dist, "barrier", lambda group=None, **kw: record("barrier", group))
        monkeypatch.setattr(dist, "all_reduce", lambda t, group=None, **kw: record("all_reduce",
                                                                                 group))
        for name in ("send", "recv"):
            monkeypatch.setattr(dist, name, lambda t, peer, group=None, _n=name: record(_n, group))
        monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)

    def record(self, name, group):
        self.calls.append((self.rank, name, group))

    def first_call(self, rank):
        return next(((name, group) for r, name, group in self.calls if r == rank), None)


@pytest.mark.parametrize("pattern", ["unidir", "bidir", "ring"])
@pytest.mark.parametrize("ranks", [(), (4, 5, 6)])  # the world, or one group of a mesh
def test_the_first_nccl_call_on_a_group_is_one_every_rank_of_it_makes(monkeypatch, pattern,
                                                                       ranks):
    """3 ranks, pairs (0, 1): rank 2 idles. Its group's first call must not be a batch of the
    pair alone (torch requires the whole group in a first batch_isend_irecv)."""
    from commbench import collectives
    from commbench.collectives.base import Buffers, OpContext

    fake = RecordingDist(monkeypatch, "nccl")
    group = object()
    op = collectives.get("p2p")
    for rank in range(3):
        fake.rank = rank
        ctx = OpContext(rank, 3, group, "float32", "sum", None, pattern=pattern, ranks=ranks,
                        window=4)
        bufs = Buffers(send=torch.zeros(8), recv=torch.zeros(8), count=8)
        op.call(ctx, bufs)()  # bind (every rank, at once), then one iteration
    assert [fake.first_call(rank) for rank in range(3)] == [("barrier", group)] * 3


def test_gloo_and_pingpong_make_no_extra_call(monkeypatch):
    from commbench import collectives
    from commbench.collectives.base import Buffers, OpContext

    for backend, pattern in (("gloo", "unidir"), ("nccl", "pingpong")):
        fake = RecordingDist(monkeypatch, backend)
        fake.rank = 0
        ctx = OpContext(0, 2, object(), "float32", "sum", None, pattern=pattern)
        collectives.get("p2p").call(ctx, Buffers(torch.zeros(4), torch.zeros(4), 4))()
        assert "barrier" not in [name for _, name, _ in fake.calls]


# ---- 3. CUDA graphs: a barrier between capture and replay, thread-local capture ---------------


class GraphCuda:
    """Just enough of torch.cuda for CudaGraphTimer, logging what happens in order."""

    def __init__(self, log, takes_mode=True):
        import contextlib

        self.log = log
        outer = self

        class CUDAGraph:
            def replay(self):
                log.append("replay")

        class Stream:
            def wait_stream(self, other):
                pass

        self.CUDAGraph, self.Stream = CUDAGraph, Stream
        self.stream = lambda stream: contextlib.nullcontext()
        if takes_mode:
            def graph(graph, pool=None, stream=None, capture_error_mode="global"):
                outer.log.append(f"capture {capture_error_mode}")
                return contextlib.nullcontext()
        else:
            def graph(graph, pool=None, stream=None):
                outer.log.append("capture")
                return contextlib.nullcontext()
        self.graph = graph

    def current_stream(self):
        return self.Stream()

    def synchronize(self):
        self.log.append("synchronize")


def graph_timer(log, **kw):
    from commbench.engine.timers import CudaGraphTimer

    events = SimpleNamespace(block=lambda replay, n: replay() or 1.0)
    return CudaGraphTimer(torch_module=SimpleNamespace(cuda=GraphCuda(log, **kw)),
                          events=events, barrier=lambda: log.append("barrier"))


def test_the_ranks_meet_after_a_capture_before_the_first_replay():
    log = []
    timer = graph_timer(log)
    call = lambda: log.append("call")  # noqa: E731
    timer.block(call, 2)
    timer.block(call, 2)
    assert log == ["capture thread_local", "call", "call", "synchronize", "barrier", "replay",
                   "replay"]  # one barrier per capture, none per replay


def test_capture_falls_back_where_torch_has_no_capture_error_mode():
    log = []
    graph_timer(log, takes_mode=False).block(lambda: None, 1)
    assert log == ["capture", "synchronize", "barrier", "replay"]


def test_the_default_barrier_is_the_control_groups(monkeypatch):
    """The sweep makes CudaGraphTimer() without a barrier: it meets on the default group, which
    is commbench's gloo control group (never the measured NCCL one)."""
    import torch.distributed as dist

    from commbench.engine.timers import CudaGraphTimer

    met = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "barrier", lambda *a, **kw: met.append((a, kw)))
    log = []
    timer = CudaGraphTimer(torch_module=SimpleNamespace(cuda=GraphCuda(log)),
                           events=SimpleNamespace(block=lambda replay, n: replay() or 1.0))
    timer.block(lambda: None, 3)
    assert met == [((), {})]


# ---- 4. avg on NCCL: the sum of x·(1/n), 1/n rounded in the dtype -----------------------------

FLOATS = ["float16", "bfloat16", "float32", "float64"]


def nccl_scale(dtype, world):
    """1/n as NCCL's enqueue.cc makes it: float(1.0/n) (double for float64), to the dtype."""
    if dtype == "float64":
        return torch.tensor(1.0 / world, dtype=torch.float64)
    return torch.tensor(1.0 / world, dtype=torch.float32).to(getattr(torch, dtype))


def orders(world):
    """Summation orders a backend may use: rank order, reversed, a ring starting mid-way, and
    a pairwise tree."""
    ranks = list(range(world))
    return [ranks, ranks[::-1], ranks[world // 2:] + ranks[:world // 2], "tree"]


def summed(terms, order):
    if order == "tree":
        while len(terms) > 1:
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        return terms[0]
    total = terms[order[0]].clone()
    for rank in order[1:]:
        total = total + terms[rank]  # rounded in the dtype at every step, as NCCL does
    return total


def rank_inputs(op, world, dtype, backend, count):
    from commbench.collectives.base import OpContext

    inputs = []
    for rank in range(world):
        ctx = OpContext(rank, world, None, dtype, "avg", None, backend=backend)
        buffer = torch.zeros(count, dtype=getattr(torch, dtype))
        buffer.copy_(op.input_values(ctx, count)(torch.arange(count)))
        inputs.append(buffer)
    return inputs


def wrong_in(op, world, dtype, backend, count, result):
    from commbench.collectives.base import Buffers, OpContext

    wrong, status = 0, ""
    for rank in range(world):
        ctx = OpContext(rank, world, None, dtype, "avg", None, backend=backend)
        wrong += op.wrong(ctx, Buffers(send=result, recv=result.clone(), count=count))
        status = op.validation(ctx, count)
    return wrong, status


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_check_expects_what_nccl_computes_for_a_float_average(dtype):
    """An emulation of ncclAvg (= ncclPreMulSum with 1/n) at every world size 2..128, summed in
    several orders: never a wrong element, and 'full' only where every order gives the
    expected result. Before, fp16 at 11, 22, 88 ranks (and bf16, fp32 at others) reported
    false #wrong while the row said full."""
    from commbench import collectives

    op = collectives.get("allreduce")
    for world in range(2, 129):
        count = world * 5
        scale = nccl_scale(dtype, world)
        terms = [x * scale for x in rank_inputs(op, world, dtype, "nccl", count)]
        # Every rank checks the result of every order; orders that give the same bits (most
        # do) are checked once: the check of identical bits is the same check (4x faster).
        results: list = []
        for order in orders(world):
            result = summed(terms, order)
            if not any(torch.equal(result, seen) for seen, _ in results):
                results.append((result, order))
        for result, order in results:
            wrong, status = wrong_in(op, world, dtype, "nccl", count, result)
            assert wrong == 0, (dtype, world, order if order == "tree" else order[0], status)
            assert status == "full" or status.startswith(("partial: ", "off: ")), status


@pytest.mark.parametrize("dtype", FLOATS)
def test_gloo_averages_stay_sum_then_divide(dtype):
    from commbench import collectives

    op = collectives.get("allreduce")
    for world in (3, 11, 13, 41, 100):
        count = world * 5
        inputs = rank_inputs(op, world, dtype, "gloo", count)
        wrong, status = wrong_in(op, world, dtype, "gloo", count, summed(inputs, "tree") / world)
        assert wrong == 0 and (status == "full" or dtype in ("float16", "bfloat16")), status


@pytest.mark.parametrize(("dtype", "world"), [("float16", 11), ("bfloat16", 13), ("float32", 41),
                                              ("float16", 3), ("float32", 100)])
def test_nccl_average_patterns_keep_the_claimed_properties(dtype, world):
    """The premultiplied pattern is still a check: exact inputs, no input equal to the result,
    neighbours and chunks different, and a fault (no-op, moved element) caught."""
    from commbench.collectives import data

    pattern = data.reduce_pattern("avg", dtype, world, 7, premultiplied=True)
    assert pattern.status == "full", pattern.status
    table, expected = np.asarray(pattern.table), np.asarray(pattern.expected)
    assert np.array_equal(data.round_to(table, dtype), table)  # exact in the dtype
    assert ((table != 0).sum(axis=0) == 1).all()  # one term per column: any order is exact
    assert not (table == expected[None, :]).any()
    assert (expected != np.roll(expected, -1)).all() and len(set(expected)) == expected.size
    assert np.array_equal(
        expected, data.round_to(table.sum(axis=0) * data.avg_scale(dtype, world), dtype))


# ---- 5. doctor on a 1-GPU host, and under srun --gpus-per-task=1 -------------------------------

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@pytest.fixture
def one_gpu_host(monkeypatch):
    """A host with one visible GPU and NCCL; no launcher unless a test sets one."""
    import commbench.engine.facts
    import commbench.launch

    for name in [*LAUNCHER_VARS, *(n for n in os.environ if n.startswith("SLURM_"))]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    monkeypatch.setattr(commbench.engine.facts, "environment_report", lambda env: [])
    monkeypatch.setattr(commbench.launch, "pin_interfaces", lambda env: None)


def reports(world):
    return [{"rank": r, "host": "h", "local_rank": r, "join_s": 0.1, "barrier_us": 1.0,
             "allreduce_us": 1.0, "nccl_us": 1.0} for r in range(world)]


def test_doctor_with_nccl_on_a_one_gpu_host_runs_one_rank(monkeypatch, one_gpu_host, capsys):
    import json

    import commbench.launch.local
    from commbench.commands.doctor import run_doctor

    started = []

    def run_local(entry, args, nproc, timeout, cuda, explain):
        started.append(nproc)
        return reports(nproc), None

    monkeypatch.setattr(commbench.launch.local, "run_local", run_local)
    assert run_doctor(None, 30.0, ("nccl",), json_out=True) == 0
    assert started == [1]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["world_size"] == 1


def test_doctor_under_srun_with_one_gpu_per_task_uses_the_launchers_world(monkeypatch,
                                                                         one_gpu_host, capsys):
    """srun -n 2 --gpus-per-task=1 on one node: each task sees its own GPU as cuda:0."""
    import json

    import commbench.engine.probe
    from commbench.commands.doctor import run_doctor

    for name, value in {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
                        "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "n1",
                        "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    probed = []

    def probe_rank(env, timeout, backends):
        probed.append((env.launcher, env.world))
        return reports(env.world)

    monkeypatch.setattr(commbench.engine.probe, "probe_rank", probe_rank)
    assert run_doctor(None, 30.0, ("nccl",), json_out=True) == 0
    assert probed == [("slurm", 2)]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["world_size"] == 2


# ---- 6. an NCCL hang: name the rank that stopped, not the first one the watchdog ended ---------


def watch_store(beats, positions):
    """The rendezvous store as the ranks leave it: heartbeat counts and last positions."""
    import torch.distributed as dist

    from commbench.engine.coordination import WATCH_PREFIX

    store = dist.HashStore()
    watch = dist.PrefixStore(WATCH_PREFIX, store)
    for rank, count in enumerate(beats):
        if count:
            watch.add(f"hb/{rank}", count)
    for rank, where in positions.items():
        watch.set(f"where/{rank}", where)
    return store


AT_1M = "allreduce at 1M (nccl)"


def test_a_stopped_rank_is_named_when_the_watchdog_ends_the_others():
    """Rank 2 stopped (SIGSTOP, a host hang): its heartbeat stood still while ranks 0 and 1
    waited in the allreduce until NCCL's watchdog ended them with SIGABRT. Before, the message
    said 'rank 0 died (SIGABRT)'."""
    from commbench.engine.failures import explain

    store = watch_store([160, 158, 12], {0: AT_1M, 1: AT_1M, 2: AT_1M})
    text = explain({0: -6, 1: -6}, store, 3)
    assert text.startswith(f"rank 2 stopped responding during {AT_1M}; rank 0, 1 were then "
                           "ended by SIGABRT"), text
    assert "rank 0 died" not in text


def test_a_lagging_rank_is_named_when_every_rank_was_aborted():
    """A rank stuck on its GPU beats on, and its watchdog ends it too: its position tells."""
    from commbench.engine.failures import explain

    store = watch_store([90, 91, 90], {0: AT_1M, 1: "allreduce at 512K (nccl)", 2: AT_1M})
    text = explain({0: -6, 1: -6, 2: -6}, store, 3)
    assert text.startswith("rank 1 was at allreduce at 512K (nccl)"), text


def test_a_lone_abort_is_still_the_rank_that_died():
    """One rank aborting on its own (no rank stopped or behind) is the cause, as before."""
    from commbench.engine.failures import explain

    store = watch_store([40, 41, 40], {0: AT_1M, 1: AT_1M, 2: AT_1M})
    assert explain({1: -6}, store, 3) == (f"rank 1 died (SIGABRT) during {AT_1M}; the other "
                                          "ranks were stopped")


def test_nccl_ranks_abort_the_communicator_instead_of_the_process(monkeypatch):
    """TORCH_NCCL_ASYNC_ERROR_HANDLING=2 before any NCCL group, unless the user chose."""
    from commbench.engine import session as session_module
    from commbench.engine.failures import RankFailure
    from commbench.launch.environment import RankEnv

    def no_store(*args, **kwargs):
        raise OSError("refused")

    monkeypatch.setattr(session_module, "connect", no_store)
    env = RankEnv("torchrun", 0, 2, 0, 2, "127.0.0.1", 1, False)
    for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with pytest.raises(RankFailure):
        session_module.Session(env, 5.0, ("gloo",), cuda=False).join()
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in os.environ
    with pytest.raises(RankFailure):
        session_module.Session(env, 5.0, ("nccl",), cuda=False).join()
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2"
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    session_module.nccl_error_handling()
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def test_an_aborted_communicator_is_diagnosed_as_the_timeout_it_was():
    from commbench.engine.failures import diagnose

    watch = SimpleNamespace(silent_ranks=lambda: ([2], []), lagging=lambda position: [])
    failure = diagnose(RuntimeError("NCCL communicator was aborted on rank 0."), AT_1M, watch,
                       5.0)
    assert failure.kind == "timeout"
    assert str(failure) == f"timeout after 5s in {AT_1M}: rank 2 stopped responding"


# ---- 7. --timeout on every mesh group; interfaces on clusters; the GPU tests' own timeout -----


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


def test_every_gpu_test_outlasts_its_runs():
    """pytest-timeout's 180 s (pyproject) ended a GPU test before its 300 s run could."""
    import inspect

    from tests.gpu import test_nccl

    def limit(function):
        marks = [*getattr(function, "pytestmark", []), *test_nccl.pytestmark]
        found = [m.args[0] for m in marks if m.name == "timeout"]
        return found[0] if found else 180

    tests = [f for name, f in vars(test_nccl).items() if name.startswith("test_")]
    assert tests
    for function in tests:
        runs = inspect.getsource(function).count("timeout=300")
        assert limit(function) >= 300 * max(1, runs), function.__name__
