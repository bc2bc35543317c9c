"""Where a process's threads sit in the kernel, read from Linux /proc: the evidence that tells
a stalled rank blocked on a lock (``futex``) from one waiting on the network (``poll``,
``connect``, ``recvfrom``).

The Python stack (faulthandler) says which call a thread is in; not whether that call waits for
a peer that never answers or for a lock that no thread will release (one inherited held across
fork). The kernel knows: per thread, the state letter of ``/proc/<pid>/task/<tid>/stat``, the
system call it is blocked in (``syscall``, its number named here) and the kernel function it
sleeps in (``wchan``), and for the process, its TCP sockets' states and queues. Reading
``syscall`` and ``wchan`` needs ptrace access, which the launcher, the ranks' parent, has;
where it is refused or not Linux, the fields read as unknown rather than failing the caller.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

# The system calls a waiting thread is found in, by number (the kernel's syscall tables:
# arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h for aarch64).
_SYSCALLS = {
    "x86_64": {0: "read", 1: "write", 7: "poll", 23: "select", 35: "nanosleep", 42: "connect",
               43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
               61: "wait4", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
               247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait",
               288: "accept4", 441: "epoll_pwait2", 449: "futex_waitv"},
    "aarch64": {22: "epoll_pwait", 63: "read", 64: "write", 72: "pselect6", 73: "ppoll",
                95: "waitid", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep",
                202: "accept", 203: "connect", 206: "sendto", 207: "recvfrom", 211: "sendmsg",
                212: "recvmsg", 242: "accept4", 260: "wait4", 441: "epoll_pwait2",
                449: "futex_waitv"},
}
# /proc/net/tcp's state column (include/net/tcp_states.h).
_TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
               6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
               11: "CLOSING"}


@dataclass(frozen=True)
class ThreadState:
    """One thread as the kernel sees it. ``syscall``: the call's name (its number where this
    table lacks it), ``running`` when on a CPU or runnable, ``user`` when blocked outside any
    call, '' when unknown; ``wchan``: the kernel function it sleeps in, '' when none or
    unknown."""

    tid: int
    name: str
    state: str
    syscall: str
    wchan: str

    def describe(self) -> str:
        """``futex (futex_wait_queue), S``: the call, where in the kernel, the state letter."""
        call = self.syscall or "unknown call"
        return call + (f" ({self.wchan})" if self.wchan else "") + f", {self.state or '?'}"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:  # gone, refused (no ptrace access), or no /proc
        return ""


def syscall_name(line: str, machine: str | None = None) -> str:
    """Name the first field of a ``/proc/<pid>/task/<tid>/syscall`` line."""
    if not line:
        return ""
    first = line.split()[0]
    if first == "running":
        return "running"
    try:
        number = int(first)
    except ValueError:
        return first
    if number < 0:
        return "user"  # blocked, but not in a system call (a page fault, a stop)
    table = _SYSCALLS.get(machine or platform.machine(), {})
    return table.get(number, f"syscall {number}")


def thread_state(pid: int, tid: int) -> ThreadState | None:
    """The kernel's view of one thread, None where it has gone."""
    task = Path(f"/proc/{pid}/task/{tid}")
    stat = _read(task / "stat")
    if not stat:
        return None
    # "tid (comm) S ...": comm may hold spaces and parentheses, so split at the last ")".
    head, _, tail = stat.rpartition(")")
    name = head.partition("(")[2]
    state = tail.split()[0] if tail.split() else ""
    wchan = _read(task / "wchan")
    return ThreadState(tid, name, state, syscall_name(_read(task / "syscall")),
                       "" if wchan == "0" else wchan)


def threads(pid: int) -> list[ThreadState]:
    """Every thread of ``pid``, the main thread (tid == pid) first; [] where it has gone."""
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError):
        return []
    tids.sort(key=lambda tid: tid != pid)
    found = [thread_state(pid, tid) for tid in tids]
    return [state for state in found if state is not None]


def main_thread(pid: int) -> ThreadState | None:
    return thread_state(pid, pid)


def _address(text: str) -> str:
    """``0100007F:1F90`` (IPv4 as /proc/net/tcp writes it, in host order) -> ``127.0.0.1:8080``;
    an IPv4-mapped IPv6 address (tcp6, ``::ffff:127.0.0.1``) likewise."""
    host, _, port = text.partition(":")
    if len(host) == 32 and host[:24] == "0000000000000000FFFF0000":
        host = host[24:]
    if len(host) != 8:
        return text  # IPv6: left as the kernel wrote it
    octets = [str(int(host[i:i + 2], 16)) for i in (6, 4, 2, 0)]
    return f"{'.'.join(octets)}:{int(port, 16)}"


def tcp_sockets(pid: int) -> list[str]:
    """The process's TCP sockets: ``local -> remote STATE (send queue N, receive queue M)``.
    A connected client whose receive queue stays empty is waiting for its peer."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    inodes = set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in _read(Path(f"/proc/{pid}/net/{table}")).splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[9] not in inodes:
                continue
            send, _, receive = fields[4].partition(":")
            state = _TCP_STATES.get(int(fields[3], 16), fields[3])
            found.append(f"{_address(fields[1])} -> {_address(fields[2])} {state} "
                         f"(send queue {int(send, 16)}, receive queue {int(receive, 16)})")
    return found


def report(pid: int) -> str:
    """A block for a stack file: every thread's kernel state and the TCP sockets."""
    lines = [f"Kernel state of process {pid} (/proc; main thread first):"]
    states = threads(pid)
    if not states:
        return lines[0] + "\n  (gone, or no /proc here)\n"
    lines += [f"  thread {s.tid} ({s.name}): {s.describe()}" for s in states]
    sockets = tcp_sockets(pid)
    lines.append("TCP sockets:" if sockets else "TCP sockets: none")
    lines += [f"  {socket}" for socket in sockets]
    return "\n".join(lines) + "\n"
