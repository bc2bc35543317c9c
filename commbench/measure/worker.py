"""One rank of a measuring run: join, describe the run, sweep, record memory, leave.

Started by commbench's local agent in every local rank, or by the measure command itself in each
process of an external launcher. Rank 0 alone hands metadata and rows to the sink the command
built (files, --json lines, progress); the other ranks only measure.
"""

from __future__ import annotations

import dataclasses
import resource

from commbench.engine import facts
from commbench.engine.failures import RankFailure
from commbench.engine.faults import Injector
from commbench.engine.session import Session
from commbench.measure.sweep import Sweep
from commbench.results import now
from commbench.specs.measure import MeasureSpec


def run_rank(env, spec: MeasureSpec, sink=None) -> None:
    """Measure ``spec`` as the rank ``env`` describes (rank 0 hands the rows to ``sink``).

    A failure is reported to the store (where the local launcher reads it) and raised as a
    RankFailure, a RunFailed.
    """
    session = Session(env, spec.timeout, spec.backends, spec.uses_cuda(), spec.bind)
    sink = sink if env.rank == 0 else None
    try:
        session.join()
        session.describe_hosts([spec.device_for(b) for b in spec.backends])
        injector = Injector.from_env(env.rank)
        sweep = Sweep(session, spec, sink, injector)
        groups_s = sweep.prepare()
        injector.install()  # after the control channel and the groups exist
        if sink is not None:
            sink.begin({**run_meta(spec, session), "groups_s": round(groups_s, 3)},
                       sweep.planned_rows())
        sweep.run()
        session.at("done")
        _record_memory(session, sink)
    except RankFailure as failure:
        session.report(failure)
        raise
    finally:
        if sink is not None:
            sink.close()
        session.close()


def run_meta(spec: MeasureSpec, session: Session) -> dict:
    """What run.json says about the run when it starts."""
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
        "backends": list(spec.backends),
        "config": dataclasses.asdict(spec),
        "versions": facts.versions(),
        "env": facts.relevant_env(),
    }


def _record_memory(session: Session, sink) -> None:
    """Peak resident memory of every rank, kept in run.json (make bench reads it)."""
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    peaks = session.control.objects(round(peak_mib, 1))
    if sink is not None:
        ranks = [{**facts_, "peak_rss_mib": peak}
                 for facts_, peak in zip(session.hosts, peaks, strict=False)]
        sink.update({"ranks": ranks})
