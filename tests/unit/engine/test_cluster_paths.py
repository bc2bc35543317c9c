"""Paths this machine cannot run for real (GPUs, clusters), each tested with a fake of the one
thing it depends on: CUDA-graph caching, the GPU-memory decision every rank must share, one GPU
per task, interface binding on multi-node jobs, SLURM node lists, row arithmetic for idle
ranks and p2p divisors."""

import contextlib
import os
import socket
from types import SimpleNamespace

import numpy as np
import pytest

from commbench import collectives
from commbench.collectives.base import Buffers, OpContext
from commbench.engine.failures import RankFailure
from commbench.engine.session import pick_device, shared_gpu
from commbench.engine.timers import CudaEventTimer, CudaGraphTimer
from commbench.launch import environment as launch_env
from commbench.launch.environment import RankEnv, hostnames
from commbench.measure.rows import RowContext, build_row
from commbench.measure.sampling import Measurement


class FakeCuda:
    """Just enough of torch.cuda for the timers: graphs count their captures."""

    def __init__(self):
        self.captures = []
        self.syncs = 0
        outer = self

        class Graph:
            def __init__(self):
                self.calls = []

            def replay(self):
                for call in self.calls:
                    call()

        class Event:
            def __init__(self, enable_timing=True):
                pass

            def record(self):
                pass

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 1.0

        class Stream:
            def wait_stream(self, other):
                pass

            def synchronize(self):
                outer.syncs += 1

        self.CUDAGraph, self.Event, self.Stream = Graph, Event, Stream
        self._recording = None

    def current_stream(self):
        return self.Stream()

    @contextlib.contextmanager
    def stream(self, stream):
        yield

    @contextlib.contextmanager
    def graph(self, graph, stream=None):
        self.captures.append(graph)
        self._recording = graph
        yield
        self._recording = None

    def synchronize(self):
        pass


def fake_torch():
    cuda = FakeCuda()
    return SimpleNamespace(cuda=cuda), cuda


def test_cuda_graphs_are_keyed_on_the_call_itself_not_its_id():
    torch, cuda = fake_torch()
    timer = CudaGraphTimer(torch_module=torch, events=SimpleNamespace(block=lambda f, n: 1.0))
    first = lambda: None  # noqa: E731
    timer.block(first, 10)
    timer.block(first, 10)
    assert len(cuda.captures) == 1  # replayed, not captured again
    second = lambda: None  # noqa: E731 (a new size's call: a new object)
    timer.block(second, 10)
    assert len(cuda.captures) == 2
    assert list(timer._graphs) == [(second, 10)]  # the previous size's graph is gone
    assert all(key[0] is second for key in timer._graphs)  # the object is held, not an id


def test_the_check_replays_a_one_call_graph_of_the_same_call_next_to_the_timing_one():
    torch, cuda = fake_torch()
    timer = CudaGraphTimer(torch_module=torch, events=SimpleNamespace(block=lambda f, n: 1.0))
    call = lambda: None  # noqa: E731
    timer.block(call, 10)
    graph = timer.graph_for(call, 1)
    assert len(cuda.captures) == 2 and set(timer._graphs) == {(call, 10), (call, 1)}
    assert timer.graph_for(call, 1) is graph


def test_blocking_waits_for_every_call(monkeypatch):
    torch, cuda = fake_torch()
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    calls = []
    CudaEventTimer(blocking=True).block(lambda: calls.append(1), 7)
    assert len(calls) == 7 and cuda.syncs == 7
    CudaEventTimer(blocking=False).block(lambda: calls.append(1), 7)
    assert cuda.syncs == 7  # pipelined: no wait between calls


class FakeControl:
    def __init__(self, fits_per_rank):
        self.fits_per_rank = fits_per_rank

    def gather(self, values):
        return np.array(self.fits_per_rank, dtype=float)


def test_a_size_runs_only_if_it_fits_on_every_rank(monkeypatch):
    """The root of gather needs world x the buffer: it cannot fit the largest size, the others
    can; every rank must drop it, or the others wait in it for the root until the timeout."""
    import torch

    from commbench.measure.sweep import Sweep
    from commbench.specs.measure import MeasureSpec

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (8 << 30, 16 << 30))
    notes = []
    session = SimpleNamespace(control=FakeControl([[1, 1, 0], [1, 1, 1], [1, 1, 1]]),
                              rank=1, world=3)
    sweep = Sweep(session, MeasureSpec(ops=("gather",), dtype="float32"),
                  SimpleNamespace(note=notes.append))
    ctx = OpContext(1, 3, None, "float32", "sum", None)
    kept = sweep._fitting(collectives.get("gather"), ctx, "cuda", [3, 300, 3 << 30])
    assert kept == [3, 300]  # rank 1 itself would fit all three
    assert "do not fit in GPU memory on every rank: 12G" in notes[0]


def test_barrier_under_cuda_graphs_is_timed_eagerly_and_says_so(monkeypatch):
    from commbench.measure import sweep as sweep_module
    from commbench.specs.measure import MeasureSpec

    made = []
    monkeypatch.setattr(sweep_module, "CudaEventTimer",
                        lambda blocking=False: made.append("events") or "events")
    barrier = object()  # the graph timer meets the ranks on the control channel
    monkeypatch.setattr(sweep_module, "CudaGraphTimer",
                        lambda barrier: made.append(barrier) or "graph")
    notes = []
    session = SimpleNamespace(rank=0, world=2, control=SimpleNamespace(barrier=barrier))
    sweep = sweep_module.Sweep(session, MeasureSpec(ops=("barrier",), cuda_graph=True),
                               SimpleNamespace(note=notes.append))
    assert sweep._timer("cuda", collectives.get("barrier")) == "events"
    assert sweep._timer("cuda", collectives.get("allreduce")) == "graph"
    assert made == ["events", barrier]
    assert "barrier cannot be captured in a CUDA graph: it is timed eagerly" in notes[0]


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


def job(world, local_world, master="node0", launcher="torchrun"):
    return RankEnv(launcher, 0, world, 0, local_world, master, 29500, True)


@pytest.fixture
def clean_ifnames(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)


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


def ctx_for(name, world, rank=0, pattern=""):
    return OpContext(rank, world, None, "float32", "sum", None, pattern=pattern)


def where():
    return RowContext(backend="gloo", device="cpu", nnodes=1, dtype="float32", itemsize=4,
                      root=0, rank_time="avg")


def measurement(per_call_seconds):
    """Every block of every rank took these seconds per iteration."""
    per_rank = np.array([[s] * 20 for s in per_call_seconds])
    return Measurement(per_rank=per_rank, counts=np.full(20, 10))


def test_an_idle_rank_is_left_out_of_time_slowest_rank_and_skew():
    op = collectives.get("p2p")
    ctx = ctx_for("p2p", 3, pattern="pingpong")
    assert [op.active(ctx_for("p2p", 3, r, "pingpong")) for r in range(3)] == [True, True, False]
    row = build_row(op, ctx, where(), 256, measurement([100e-6, 120e-6, 1e-9]), 2, 0,
                    active=np.array([True, True, False]))
    assert row.slowest_rank == 1
    assert row.skew_pct == pytest.approx((60 - 50) / 60 * 100)  # not ~100 % from the idle rank
    assert row.lat_us_mean == pytest.approx(55.0)  # avg of 50 and 60 us, not of three


@pytest.mark.parametrize(("pattern", "messages"),
                         [("pingpong", 2), ("unidir", 64), ("bidir", 64), ("ring", 1)])
def test_p2p_rows_report_one_message(pattern, messages):
    """pingpong: a round trip is 2 one-way messages (osu_latency); unidir and bidir: a window
    of 64 messages per iteration (osu_bw, osu_bibw); ring: one."""
    op = collectives.get("p2p")
    ctx = ctx_for("p2p", 2, pattern=pattern)
    bufs = Buffers(send=np.zeros(4), recv=np.zeros(4), count=4)
    assert op.messages_per_iteration(ctx, bufs) == messages
    row = build_row(op, ctx, where(), 256, measurement([640e-6, 640e-6]), messages, 0)
    assert row.lat_us_p50 == pytest.approx(640 / messages)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * (2 if pattern == "bidir" else 1))
