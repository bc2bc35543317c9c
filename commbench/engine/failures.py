"""How a rank fails: one-line diagnoses naming the op, the size and the culprits; fault
injection for the tests; and never outliving the launcher."""

from __future__ import annotations

import os

from commbench.errors import EXIT_RUN_FAILED

# Fault injection for the tests: "RANK:OP:SIZE[:raise|corrupt]" makes that rank raise before
# measuring that size, or corrupt one result element before the check compares.
FAULT_ENV = "COMMBENCH_FAULT"


class WorkerFailure(Exception):
    """A rank's failure, already worded for the user; ``kind`` is timeout, peer or error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def injected_fault(rank: int, op_name: str, size_bytes: int) -> str:
    """The action COMMBENCH_FAULT asks of this rank at this op and size, or ''."""
    parts = os.environ.get(FAULT_ENV, "").split(":")
    if parts[:3] != [str(rank), op_name, str(size_bytes)]:
        return ""
    return parts[3] if len(parts) > 3 else "raise"


def diagnose(error: Exception, position: str, watch, timeout: float) -> WorkerFailure:
    """Turn a backend exception into a message naming the op, the size and the culprits.

    On a timeout the survivors read the heartbeats and positions in the store: a rank whose
    heartbeat stands still stopped, one that never beat never arrived, one elsewhere lags.
    """
    text = first_line(error)
    lowered = text.lower()
    if "timed out" in lowered or "timeout" in lowered:
        stopped, missing = watch.silent_ranks() if watch else ([], [])
        culprits = []
        if stopped:
            culprits.append(f"rank {_ranks(stopped)} stopped responding")
        if missing:
            culprits.append(f"rank {_ranks(missing)} never arrived")
        for rank, where in watch.lagging(position) if watch else []:
            culprits.append(f"rank {rank} was at {where}")
        blame = "; ".join(culprits) or "no rank was found silent: a peer may be stuck"
        return WorkerFailure("timeout", f"timeout after {timeout:g}s in {position}: {blame}")
    if "connection" in lowered or "closed" in lowered or "reset" in lowered:
        return WorkerFailure("peer", f"lost a peer in {position}: {text}")
    return WorkerFailure("error", f"{type(error).__name__} in {position}: {text}")


def die_with_parent() -> None:
    """A rank started by commbench must not outlive it (kill -9 of the launcher included)."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the agent still stops ranks on failure
        return
    if os.getppid() == 1:  # the launcher died before prctl took effect
        os._exit(EXIT_RUN_FAILED)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))
