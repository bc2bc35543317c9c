"""The one rank scaffold every command's ranks run inside, and the sinks rank 0 reports to.

measure, locate and replay each used to spell out the same life of a rank: make the session,
join, describe the hosts, hand rank 0's sink the run's metadata, report a failure to the store
(where the local launcher reads it), close the sink and the session whatever happened. One
copy here means a fix to that life (a failure reported, a sink always closed) lands in all.

The sinks rank 0 reports to are the ``Protocol``s of engine/sinks.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from commbench.engine import facts
from commbench.engine.failures import RankFailure
from commbench.engine.session import Session
from commbench.engine.sinks import RunSink
from commbench.results import now


@dataclass
class Rank:
    """This rank's session, and the sink when it is rank 0 (None on every other rank)."""

    session: Session
    sink: RunSink | None

    def begin(self, backends: Sequence[str], config: dict, *args: Any, **meta: Any) -> None:
        """Hand rank 0's sink what run.json says as the run starts (no-op on other ranks);
        ``meta`` adds the command's own keys (locate's entities, the groups' set-up time)."""
        if self.sink is not None:
            self.sink.begin({**run_meta(self.session, backends, config), **meta}, *args)


@contextmanager
def rank(env, timeout: float, backends: Sequence[str], cuda: bool, sink: RunSink | None = None,
         bind: str = "auto") -> Iterator[Rank]:
    """Join the run as the rank ``env`` describes, for the ``with`` body's work.

    A RankFailure raised inside is reported to the store before it propagates; the sink (rank 0
    only) and the session are closed however the body ends.
    """
    session = Session(env, timeout, tuple(backends), cuda, bind)
    sink = sink if env.rank == 0 else None
    try:
        session.join()
        yield Rank(session, sink)
        session.at("done")
    except RankFailure as failure:
        session.report(failure)
        raise
    finally:
        if sink is not None:
            sink.close()
        session.close()


def run_meta(session: Session, backends: Sequence[str], config: dict) -> dict:
    """What run.json says about a run when it starts (every command's, the same keys)."""
    return {
        "status": "running",
        "error": None,
        "start_time": now(),
        "end_time": None,
        "launcher": session.env.launcher,
        "world_size": session.world,
        "nnodes": session.nnodes,
        "hosts": sorted({h["host"] for h in session.hosts}),
        "ranks": session.hosts,
        "backends": list(backends),
        "config": config,
        "versions": facts.versions(),
        "env": facts.relevant_env(),
    }
