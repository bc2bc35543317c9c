"""Every branch of commbench/compat.py, driven by fakes shaped like each torch release's API
and, where this torch has both branches, by the real thing."""

import signal
import socket
from datetime import timedelta

import psutil
import pytest
import torch.distributed as dist

from commbench.core import compat
from commbench.launch import local


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch):
    monkeypatch.setattr(compat, "_default_backend_refuses_fd", False)


class FdRefusingDist:
    """torch 2.4-2.6: the default (libuv) store raises on a listening fd; legacy takes it."""

    def __init__(self):
        self.calls = []

    def TCPStore(self, host, port, world, is_master, timeout, master_listen_fd=None, **kw):
        bound = socket.socket(fileno=master_listen_fd).getsockname()
        self.calls.append((kw.get("use_libuv", True), bound))
        if kw.get("use_libuv", True):
            raise NotImplementedError("The libuv TCPStore backend does not support ... fd")
        return ("store", port)


def test_a_store_refusing_fds_falls_back_to_the_legacy_backend_on_loopback():
    fake = FdRefusingDist()
    store, port = compat.listening_store(fake, "127.0.0.1", 0, None, 5)
    assert store == ("store", port)
    assert [use_libuv for use_libuv, _ in fake.calls] == [True, False]
    assert all(bound == ("127.0.0.1", port) for _, bound in fake.calls[1:])
    # learnt once: the next store goes straight to the legacy backend (no refused attempt)
    compat.listening_store(fake, "127.0.0.1", 0, None, 5)
    assert [use_libuv for use_libuv, _ in fake.calls] == [True, False, False]


def test_a_store_taking_fds_is_made_once_with_the_default_backend():
    class Takes(FdRefusingDist):
        def TCPStore(self, *args, **kw):
            self.calls.append(kw.get("use_libuv", True))
            return "store"

    fake = Takes()
    assert compat.listening_store(fake, "127.0.0.1", 0, None, 5)[0] == "store"
    assert fake.calls == [True]


@pytest.mark.parametrize("refuses", [False, True], ids=["default", "legacy"])
def test_both_real_store_backends_listen_on_loopback_and_serve(refuses, monkeypatch):
    monkeypatch.setattr(compat, "_default_backend_refuses_fd", refuses)
    store, port = compat.listening_store(dist, "127.0.0.1", 0, None, 5, wait_for_workers=False)
    store.set("key", "value")
    client = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=5))
    assert client.get("key") == b"value"
    listening = {c.laddr.ip for c in psutil.net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
    assert listening == {"127.0.0.1"}  # not every interface


class Agent24:  # torch 2.4-2.6
    def _shutdown(self, death_sig=signal.SIGTERM, is_restart=False):
        self.called = {"death_sig": death_sig, "is_restart": is_restart}


class Agent29:  # torch 2.9-2.11
    def _shutdown(self, death_sig=signal.SIGTERM):
        self.called = {"death_sig": death_sig}


class Agent213:  # torch 2.13
    def _shutdown(self, death_sig=signal.SIGTERM, timeout=30):
        self.called = {"death_sig": death_sig, "timeout": timeout}


@pytest.mark.parametrize("agent, expected", [
    (Agent24(), {"death_sig": signal.SIGTERM, "is_restart": False}),
    (Agent29(), {"death_sig": signal.SIGTERM}),
    (Agent213(), {"death_sig": signal.SIGTERM, "timeout": 2}),
], ids=["2.4", "2.9", "2.13"])
def test_the_agent_is_shut_down_the_way_each_release_takes(agent, expected):
    compat.shutdown_agent(agent, 2)
    assert agent.called == expected


def test_this_torchs_agent_takes_the_call():
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    class Probe(LocalElasticAgent):
        def __init__(self):  # no spec: only the shutdown call is exercised
            self._worker_watchdog = self._health_check_server = self._pcontext = None
            self._rdzv_handler = None

    compat.shutdown_agent(Probe(), 2)  # raises TypeError where the branch is wrong


def test_an_agent_without_torchs_private_process_list_has_no_processes():
    assert local._processes(object()) == []
    holder = type("PC", (), {"_pc": type("Inner", (), {"processes": ["p"]})()})()
    assert local._processes(type("A", (), {"_pcontext": holder})()) == ["p"]


# ---- the collective-name fallbacks ------------------------------------------------------------

def old_gather(*args, **kwargs):
    return "all_gather_into_tensor"


def old_scatter(*args, **kwargs):
    return "reduce_scatter_tensor"


class Dist212:  # torch 2.4-2.12: only the old names
    all_gather_into_tensor = staticmethod(old_gather)
    reduce_scatter_tensor = staticmethod(old_scatter)


class Dist213(Dist212):  # 2.13: the new names beside the old
    all_gather_single = staticmethod(lambda *a, **k: "all_gather_single")
    reduce_scatter_single = staticmethod(lambda *a, **k: "reduce_scatter_single")


@pytest.mark.parametrize("fake, gather, scatter", [
    (Dist212, "all_gather_into_tensor", "reduce_scatter_tensor"),
    (Dist213, "all_gather_single", "reduce_scatter_single"),
], ids=["2.12", "2.13"])
def test_the_single_tensor_collectives_resolve_to_what_the_release_has(fake, gather, scatter):
    assert compat.all_gather_single(fake)() == gather
    assert compat.reduce_scatter_single(fake)() == scatter


# ---- what the recorder reads off a c10d op -------------------------------------------------------

class Group:
    pass


class Boxed:
    """A TorchBind object standing for a group or a work."""


def fake_dist(unbox=None, resolve=None, pg_names=None, work_unbox=None):
    """A torch.distributed shaped as a release is: with or without ``unbox`` on ProcessGroup
    and Work, with or without ``_resolve_process_group``."""
    group_class = type("ProcessGroup", (Group,), {})
    work_class = type("Work", (), {})
    if unbox is not None:
        group_class.unbox = staticmethod(unbox)
    if work_unbox is not None:
        work_class.unbox = staticmethod(work_unbox)
    c10d = type("c10d", (), {"Work": work_class,
                             "_world": type("World", (), {"pg_names": pg_names or {}})()})()
    if resolve is not None:
        c10d._resolve_process_group = resolve
    return type("Dist", (), {"ProcessGroup": group_class, "distributed_c10d": c10d,
                             "ReduceOp": dist.ReduceOp})()


def test_unbox_group_takes_a_group_unboxes_a_torchbind_one_and_gives_up_quietly():
    group = Group()
    fake = fake_dist(unbox=lambda obj: group)
    made = fake.ProcessGroup()
    assert compat.unbox_group(fake, made) is made
    assert compat.unbox_group(fake, Boxed()) is group

    def refuses(obj):
        raise RuntimeError("not a ProcessGroup")

    assert compat.unbox_group(fake_dist(unbox=refuses), Boxed()) is None
    assert compat.unbox_group(fake_dist(), Boxed()) is None  # a release without unbox
    assert compat.unbox_group(type("NoGroups", (), {})(), Boxed()) is None


def test_unbox_work_takes_a_work_unboxes_a_torchbind_one_and_gives_up_quietly():
    work = object()
    fake = fake_dist(work_unbox=lambda obj: work)
    made = fake.distributed_c10d.Work()
    assert compat.unbox_work(fake, made) is made
    assert compat.unbox_work(fake, Boxed()) is work

    def refuses(obj):
        raise TypeError("not a Work")

    assert compat.unbox_work(fake_dist(work_unbox=refuses), Boxed()) is None
    assert compat.unbox_work(fake_dist(), Boxed()) is None
    assert compat.unbox_work(type("NoC10d", (), {})(), Boxed()) is None


def test_resolve_group_uses_torchs_resolver_where_it_exists():
    group = Group()
    fake = fake_dist(resolve=lambda name: group if name == "7" else None)
    assert compat.resolve_group(fake, "7") is group
    made = fake.ProcessGroup()
    assert compat.resolve_group(fake, made) is made

    def unknown(name):
        raise ValueError(f"unknown group {name}")

    assert compat.resolve_group(fake_dist(resolve=unknown), "8") is None


def test_resolve_group_falls_back_to_the_group_names_without_a_resolver():
    group = Group()
    fake = fake_dist(pg_names={group: "3"})
    assert compat.resolve_group(fake, "3") is group
    assert compat.resolve_group(fake, "4") is None


class Work:
    def __init__(self, duration):
        self._duration = duration

    def _get_duration(self):
        if isinstance(self._duration, Exception):
            raise self._duration
        return self._duration


@pytest.mark.parametrize("work, expected", [
    (Work(1.5), 1_500_000),
    (Work(-1.0), None),  # NCCL's "not timed"
    (Work(RuntimeError("TORCH_NCCL_ENABLE_TIMING is not set")), None),
    (object(), None),  # a release or backend without _get_duration
], ids=["timed", "negative", "refused", "absent"])
def test_work_duration_is_read_where_the_backend_timed_the_call(work, expected):
    assert compat.work_duration_ns(work) == expected


class TorchBindOp:
    def __init__(self, value):
        self.value = value

    def op(self):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@pytest.mark.parametrize("obj, expected", [
    (None, None),
    ("AVG", "avg"),  # a functional collective's string
    (TorchBindOp(int(dist.ReduceOp.RedOpType.MAX)), "max"),
    (dist.ReduceOp.SUM, "sum"),
    (TorchBindOp(99), "99"),  # a number this torch does not name
    (TorchBindOp(RuntimeError("premul_sum has no op")), None),
    (object(), None),
], ids=["none", "string", "torchbind", "python", "unnamed", "refused", "foreign"])
def test_reduce_op_names_every_form_a_c10d_op_hands_over(obj, expected):
    assert compat.reduce_op_name(dist, obj) == expected
