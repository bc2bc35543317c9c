"""launch.storehost: the local store served by a process of its own, so that no rank is forked
from a process running the server's thread."""

import os
import signal
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from commbench.launch import procstate
from commbench.launch.local import LoopbackRendezvous, die_with_parent
from commbench.launch.storehost import StoreHost


def in_epoll(pid: int) -> int:
    """Threads of ``pid`` waiting in epoll: the store server's libuv loop."""
    return sum(t.syscall.startswith("epoll") for t in procstate.threads(pid))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_the_server_thread_lives_in_the_host_not_in_the_launcher():
    before = in_epoll(os.getpid())
    rendezvous = LoopbackRendezvous(10.0)
    try:
        assert in_epoll(os.getpid()) == before  # a client only: no loop a fork could catch
        # the server's loop (out of epoll only while it serves a request: wait for it idle)
        deadline = time.monotonic() + 5.0
        while in_epoll(rendezvous.host.pid) != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert in_epoll(rendezvous.host.pid) == 1
        # named, so that ps and the binding test tell it from a rank (same command line)
        with open(f"/proc/{rendezvous.host.pid}/comm") as comm:
            assert comm.read().strip() == "commbench-store"
        other = dist.TCPStore("127.0.0.1", rendezvous.port, None, False,
                              timedelta(seconds=10), wait_for_workers=False)
        other.set("key", "value")
        assert rendezvous.store.get("key") == b"value"
        os.kill(rendezvous.host.pid, signal.SIGINT)  # Ctrl-C reaches the host too: ignored
        assert rendezvous.store.add("count", 1) == 1
    finally:
        rendezvous.close()
    with pytest.raises(ProcessLookupError):
        os.kill(rendezvous.host.pid, 0)


def test_a_stopped_host_is_stopped_once():
    host = StoreHost(5.0, die_with_parent)
    host.stop()
    host.stop()  # no error: already reaped
