"""A child that must not outlive the process that started it, kill -9 of that process
included: Linux's PR_SET_PDEATHSIG, set in the child. Torch-free (`commbench record` uses it
before anything imports torch)."""

from __future__ import annotations

import ctypes
import os
import signal


def die_with_parent(signum: int = signal.SIGKILL, exit_code: int = 1,
                    parent: int | None = None) -> None:
    """In the child: ``signum`` reaches it when its parent dies. ``parent``: the parent's pid
    where the child knows it (in a preexec function); else a parent already gone is told by
    the child's adoption (ppid 1). A parent that died before prctl took effect: exit now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the caller's own stop still applies
        return
    orphaned = os.getppid() == 1 if parent is None else os.getppid() != parent
    if orphaned:
        os._exit(exit_code)
