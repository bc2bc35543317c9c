"""The local launcher's store server, in a process of its own.

Local ranks are forked from the launcher. When the launcher itself ran the TCPStore server (a
libuv thread), a rank forked while that thread held a lock inherited the lock held, and its
store client's constructor waited on it for ever: in ``bench/startup.py --in-process
--same-launcher`` 3 of 30 back-to-back starts had rank 2 stalled with every store-connection
thread in ``futex`` and none in a network call (issue 28). So the server runs in a small
process forked for it before the launcher has a thread (no store, no log copier yet); the
launcher and the ranks are all its clients, and no rank is forked from a process with a
server thread. A fork, not a spawn: the process has torch imported already, a spawn would
import it again (~3.5 s).

The host dies with the launcher (PR_SET_PDEATHSIG, as the ranks do) and ignores the terminal's
SIGINT and the agent's SIGTERM: the launcher stops it, after it has read what the ranks left
in the store.
"""

from __future__ import annotations

import contextlib
import os
import signal

import torch.distributed as dist

from commbench.core import compat

# What `ps -o comm` and /proc/<pid>/comm show for the host (at most 15 characters): it is
# forked from the launcher, so its command line is the launcher's; this tells it from a rank.
NAME = "commbench-store"


def _name_process(name: str) -> None:
    """PR_SET_NAME; where there is no prctl the host keeps the launcher's name."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)


class StoreHost:
    """A TCPStore server listening on ``127.0.0.1`` (port chosen by the kernel), in a child
    process; ``port`` is where to connect, ``stop()`` ends it."""

    def __init__(self, timeout: float, die_with_parent) -> None:
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the host: serve until stopped
            code = 1
            try:
                os.close(read)
                die_with_parent()
                _name_process(NAME)
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_IGN)
                _store, port = compat.listening_store(dist, "127.0.0.1", 0, None, timeout,
                                                      wait_for_workers=False, multi_tenant=True)
                os.write(write, str(port).encode())
                os.close(write)
                while True:
                    signal.pause()
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            said = answer.read()  # the port, or nothing when the host failed
        if not said:
            self.stop()
            raise RuntimeError("the local store's server process ended before it listened")
        self.port = int(said)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
