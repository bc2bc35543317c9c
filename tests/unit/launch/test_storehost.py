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


LAUNCHER = """
import sys, time
from commbench.launch.local import LoopbackRendezvous
rendezvous = LoopbackRendezvous(10.0)
print(rendezvous.host.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    """No such process, or one that has died and waits to be reaped (a zombie holds nothing:
    no port, no thread)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states in /proc")
def test_the_host_dies_with_a_launcher_killed_by_sigkill():
    """kill -9 of the launcher runs none of its clean-up: the host must still go (it is told
    by PR_SET_PDEATHSIG), not serve the store for ever as an orphan. The bound is a liveness
    bound (the kernel's signal delivery), not a speed."""
    import subprocess
    import sys

    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE,
                                text=True)
    host = 0
    try:
        host = int(launcher.stdout.readline())
        assert not _gone(host)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 10.0
        while not _gone(host) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(host), f"the store host {host} outlived its SIGKILLed launcher"
    finally:
        launcher.kill()
        launcher.wait(timeout=30)
        launcher.stdout.close()
        if host and not _gone(host):
            os.kill(host, signal.SIGKILL)
