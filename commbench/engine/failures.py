"""How a rank fails: one-line diagnoses naming the op, the size and the culprits, the launcher's
explanation of a failed run from what the ranks left in the store."""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Callable, Iterator

import torch.distributed as dist

from commbench.core.errors import RunFailed
from commbench.engine.coordination import WATCH_PREFIX, read_reports

# A rank whose heartbeat count is this far below the ranks NCCL's watchdog ended stopped before
# them. A hang leaves a gap of about --timeout / the heartbeat interval (10 or more beats); ranks
# that joined a little later, or died a little sooner, are within a few beats.
STOPPED_MARGIN_BEATS = 5


class RankFailure(RunFailed):
    """A rank's failure, already worded for the user; ``kind`` is timeout, peer or error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@contextlib.contextmanager
def diagnosed(position: Callable[[], str], watch, timeout: float,
              detail: Callable[[], str] = lambda: "",
              passing: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """A failure inside torch.distributed becomes a RankFailure naming where this rank was
    (``position()``, read when it fails: the one the other ranks see published), with
    ``detail()`` after it where the rank knows more than it publishes (replay's call). A
    RankFailure, and the ``passing`` exceptions, go through as they are."""
    try:
        yield
    except (RankFailure, *passing):
        raise
    except Exception as error:
        where = position()
        failure = diagnose(error, where, watch, timeout)
        extra = detail()
        if extra:
            failure = RankFailure(failure.kind, str(failure).replace(where, f"{where}, {extra}",
                                                                     1))
        raise failure from None


def diagnose(error: Exception, position: str, watch, timeout: float) -> RankFailure:
    """Turn a backend exception into a message naming the op, the size and the culprits.

    On a timeout the survivors read the heartbeats and positions in the store: a rank whose
    heartbeat stands still stopped, one that never beat never arrived, one elsewhere lags.
    """
    text = first_line(error)
    lowered = text.lower()
    # An aborted NCCL communicator is NCCL's watchdog at work (session.nccl_error_handling):
    # a collective outlasted --timeout.
    if any(word in lowered for word in ("timed out", "timeout", "communicator was aborted")):
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


def explain(exit_codes: dict[int, int], store, world: int,
            last_words: dict[int, str] | None = None) -> str:
    """One line for the user: the root cause first (a timeout report, a killed rank, an error).

    ``exit_codes`` holds the ranks that had failed when the failure was first seen;
    ``last_words`` each rank's last stderr line (the local launcher keeps them in the run
    folder), said for a rank that died without reporting why: its traceback's last line.
    """
    errors, positions = read_reports(store, world)
    last_words = last_words or {}

    def where(rank: int) -> str:
        said = f"; its last stderr line: {last_words[rank]}" if rank in last_words else ""
        return (f" during {positions[rank]}" if rank in positions else "") + said

    timeouts = [e for e in errors.values() if e["kind"] == "timeout"]
    if timeouts:
        return min(timeouts, key=lambda e: e["time"])["message"]
    killed = sorted(rank for rank, code in exit_codes.items() if code is not None and code < 0)
    aborted = [rank for rank in killed if exit_codes[rank] == -signal.SIGABRT]
    if aborted and not errors:
        culprits = hang_culprits(aborted, positions, heartbeats(store, world), world)
        if culprits:
            return culprits
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


def heartbeats(store, world: int) -> list[int]:
    """How many times each rank's heartbeat beat before it ended (0: never)."""
    watch = dist.PrefixStore(WATCH_PREFIX, store)
    return [watch.add(f"hb/{rank}", 0) if watch.check([f"hb/{rank}"]) else 0
            for rank in range(world)]


def hang_culprits(aborted: list[int], positions: dict[int, str], beats: list[int],
                  world: int) -> str:
    """Ranks ended by SIGABRT with nothing reported: NCCL's watchdog ends a rank whose
    collective outlasted --timeout, before the control channel notices, so the aborted ranks
    are the ones that waited, not the cause. The cause is a rank whose heartbeat stopped well
    before theirs (it stopped), or one whose last position is not where they waited (it lagged
    behind, or never came). '' when no rank is either: then an aborted rank is the cause."""
    waited_at = Counter(positions[r] for r in aborted if r in positions).most_common(1)
    waited_at = waited_at[0][0] if waited_at else ""
    last_beat = min(beats[r] for r in aborted)
    culprits = []
    for rank in range(world):
        where = f" during {positions[rank]}" if rank in positions else ""
        if beats[rank] == 0:
            culprits.append(f"rank {rank} never arrived")
        elif rank not in aborted and beats[rank] < last_beat - STOPPED_MARGIN_BEATS:
            culprits.append(f"rank {rank} stopped responding{where}")
        elif waited_at and positions.get(rank, waited_at) != waited_at:
            culprits.append(f"rank {rank} was at {positions[rank]}")
    if not culprits:
        return ""
    return (f"{'; '.join(culprits)}; rank {_ranks(aborted)} "
            f"{'was' if len(aborted) == 1 else 'were'} then ended by SIGABRT"
            f"{f' in {waited_at}' if waited_at else ''}, as NCCL's watchdog ends a rank whose "
            "collective outlasted --timeout")
