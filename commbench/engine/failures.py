"""How a rank fails: one-line diagnoses naming the op, the size and the culprits, the launcher's
explanation of a failed run from what the ranks left in the store."""

from __future__ import annotations

import signal

from commbench.engine.coordination import read_reports
from commbench.errors import RunFailed


class RankFailure(RunFailed):
    """A rank's failure, already worded for the user; ``kind`` is timeout, peer or error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def diagnose(error: Exception, position: str, watch, timeout: float) -> RankFailure:
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
        return RankFailure("timeout", f"timeout after {timeout:g}s in {position}: {blame}")
    if "connection" in lowered or "closed" in lowered or "reset" in lowered:
        return RankFailure("peer", f"lost a peer in {position}: {text}")
    return RankFailure("error", f"{type(error).__name__} in {position}: {text}")


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def explain(exit_codes: dict[int, int], store, world: int) -> str:
    """One line for the user: the root cause first (a timeout report, a killed rank, an error).

    ``exit_codes`` holds the ranks that had failed when the failure was first seen.
    """
    errors, positions = read_reports(store, world)

    def where(rank: int) -> str:
        return f" during {positions[rank]}" if rank in positions else ""

    timeouts = [e for e in errors.values() if e["kind"] == "timeout"]
    if timeouts:
        return min(timeouts, key=lambda e: e["time"])["message"]
    killed = sorted(rank for rank, code in exit_codes.items() if code is not None and code < 0)
    if killed:
        rank = killed[0]
        name = signal.Signals(-exit_codes[rank]).name
        return f"rank {rank} died ({name}){where(rank)}; the other ranks were stopped"
    if errors:
        first = min(errors.values(), key=lambda e: e["time"])
        return f"rank {first['rank']}: {first['message']}"
    rank = min(exit_codes)
    return (
        f"rank {rank} exited with code {exit_codes[rank]}{where(rank)}; "
        "the other ranks were stopped"
    )
