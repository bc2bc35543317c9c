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
