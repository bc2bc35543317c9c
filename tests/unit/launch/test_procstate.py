"""launch.procstate and the watchdog's use of it, on real child processes blocked on a known
call: a lock (futex), select, and a TCP peer that never answers."""

import socket
import subprocess
import sys
import textwrap
import time

import pytest
import torch.distributed as dist

from commbench.launch import procstate, ranklogs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BLOCKED_ON_A_LOCK = """
import threading
held = threading.Lock()
held.acquire()
print("ready", flush=True)
held.acquire()  # never released: a futex wait for ever
"""
IN_SELECT = """
import select
print("ready", flush=True)
select.select([], [], [], 60)
"""
WAITING_FOR_A_PEER = """
import socket, sys
client = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
client.recv(1)  # the peer accepts, and never answers
"""


@pytest.fixture
def child():
    started = []

    def start(code: str, *args: str) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", code, *args],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "ready"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def settled(pid: int, calls: tuple[str, ...], seconds: float = 10.0) -> procstate.ThreadState:
    """The main thread once it sits in one of ``calls`` (a child that printed 'ready' is a
    few instructions from its blocking call)."""
    deadline = time.monotonic() + seconds
    while True:
        main = procstate.main_thread(pid)
        if main.syscall in calls or time.monotonic() > deadline:
            return main
        time.sleep(0.02)


def test_a_thread_blocked_on_a_lock_is_in_futex(child):
    process = child(BLOCKED_ON_A_LOCK)
    main = settled(process.pid, ("futex",))
    assert (main.tid, main.state, main.syscall) == (process.pid, "S", "futex")
    assert main.wchan == "" or "futex" in main.wchan  # '' where the kernel hides it
    assert main.describe().startswith("futex")


def test_a_thread_in_select_is_told_from_one_on_a_lock(child):
    process = child(IN_SELECT)
    main = settled(process.pid, ("select", "pselect6"))
    assert main.syscall in ("select", "pselect6")
    assert main.wchan == "" or "poll" in main.wchan or "select" in main.wchan
    block = procstate.report(process.pid)
    assert block.splitlines()[1].startswith(f"  thread {process.pid} (python")
    assert "TCP sockets: none" in block


def test_a_client_waiting_for_its_peer_shows_the_call_and_an_empty_receive_queue(child):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        process = child(WAITING_FOR_A_PEER, str(port))
        main = settled(process.pid, ("recvfrom", "read", "recvmsg"))
        assert main.syscall in ("recvfrom", "read", "recvmsg")
        sockets = procstate.tcp_sockets(process.pid)
        assert any(f"-> 127.0.0.1:{port} ESTABLISHED" in s and "receive queue 0)" in s
                   for s in sockets), sockets


def test_the_watchdog_names_the_kernel_call_and_records_it(child, tmp_path):
    """The whole watchdog path on a rank blocked on a lock: its faulthandler dump, its kernel
    state in rank-0.stack, the main thread's call in the one-line error."""
    files = ranklogs.RankFiles(tmp_path / "run", str(tmp_path), 1)
    rank = textwrap.dedent(f"""
        import faulthandler, signal, threading
        stacks = open({str(files.stack(0))!r}, "a")
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
        def connect():
            held = threading.Lock()
            held.acquire()
            print("ready", flush=True)
            held.acquire()
        connect()
    """)
    process = child(rank)
    settled(process.pid, ("futex",))
    watchdog = ranklogs.StartWatchdog(dist.HashStore(), 1, 0.0, files)
    line = watchdog.check([process.pid])
    assert line.startswith("rank 0 made no heartbeat within 0s of the launch")
    assert "was at <string>:9 in connect" in line
    assert ", its main thread in futex" in line
    stack = files.stack(0).read_text()
    assert "in connect" in stack and f"thread {process.pid} (python" in stack
    assert "Kernel state of process" in (tmp_path / "run" / "launcher.stack").read_text()


def test_syscall_lines_are_named():
    assert procstate.syscall_name("202 0x7f 0x80 0x0", "x86_64") == "futex"
    assert procstate.syscall_name("98 0x1 0x2", "aarch64") == "futex"
    assert procstate.syscall_name("running") == "running"
    assert procstate.syscall_name("-1 0x7ffc 0x7f12") == "user"
    assert procstate.syscall_name("999 0x0", "x86_64") == "syscall 999"
    assert procstate.syscall_name("") == ""


def test_socket_addresses_are_read_as_the_kernel_writes_them():
    assert procstate._address("0100007F:1F90") == "127.0.0.1:8080"
    assert procstate._address("0000000000000000FFFF00000100007F:DB1A") == "127.0.0.1:56090"


def test_a_rank_held_by_a_silent_store_is_told_from_one_on_a_lock(child, tmp_path):
    """A rank connecting to a store that accepts and never answers (engine.coordination's
    attempt in a thread of its own): the one-line error shows the helper thread in the network
    call, not only the main thread's wait for it."""
    files = ranklogs.RankFiles(tmp_path / "run", str(tmp_path), 1)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        rank = textwrap.dedent(f"""
            import faulthandler, signal
            from commbench.engine.coordination import connect_running_store
            stacks = open({str(files.stack(0))!r}, "a")
            faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
            print("ready", flush=True)
            connect_running_store("127.0.0.1", {silent.getsockname()[1]}, 60.0, attempt=50.0)
        """)
        process = child(rank)
        deadline = time.monotonic() + 20
        while not any(t.syscall == "recvfrom" for t in procstate.threads(process.pid)):
            assert time.monotonic() < deadline, procstate.report(process.pid)
            time.sleep(0.05)
        line = ranklogs.StartWatchdog(dist.HashStore(), 1, 0.0, files).check([process.pid])
    assert "in join < coordination.py" in line and "in connect_running_store" in line
    assert ", its main thread in futex" in line  # waiting for the attempt's thread
    assert "recvfrom" in line.partition("its other threads in ")[2], line
    stack = files.stack(0).read_text()
    assert "in attempt_once" in stack and "ESTABLISHED (send queue 0, receive queue 0)" in stack
