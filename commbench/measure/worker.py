"""One rank of a measuring run: join, describe the run, sweep, record memory, leave.

Started by commbench's local agent in every local rank, or by the measure command itself in each
process of an external launcher. Rank 0 alone hands metadata and rows to the sink the command
built (files, --json lines, progress); the other ranks only measure.
"""

from __future__ import annotations

import dataclasses
import resource

from commbench.engine import scaffold
from commbench.engine.faults import Injector
from commbench.engine.session import Session
from commbench.engine.sinks import RowSink
from commbench.measure.sweep import Sweep
from commbench.specs.measure import MeasureSpec


def run_rank(env, spec: MeasureSpec, sink: RowSink | None = None) -> None:
    """Measure ``spec`` as the rank ``env`` describes (rank 0 hands the rows to ``sink``).

    A failure is reported to the store (where the local launcher reads it) and raised as a
    RankFailure, a RunFailed.
    """
    with scaffold.rank(env, spec.timeout, spec.backends, spec.uses_cuda(), sink,
                       spec.bind) as this:
        session = this.session
        session.describe_hosts([spec.device_for(b) for b in spec.backends])
        injector = Injector.from_env(env.rank)
        sweep = Sweep(session, spec, this.sink, injector)
        groups_s = sweep.prepare()
        injector.install()  # after the control channel and the groups exist
        this.begin(spec.backends, dataclasses.asdict(spec), sweep.planned_rows(),
                   groups_s=round(groups_s, 3))
        sweep.run()
        _record_memory(session, this.sink)


def _record_memory(session: Session, sink) -> None:
    """Peak resident memory of every rank, kept in run.json (make bench reads it)."""
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    peaks = session.control.objects(round(peak_mib, 1))
    if sink is not None:
        ranks = [{**facts_, "peak_rss_mib": peak}
                 for facts_, peak in zip(session.hosts, peaks, strict=False)]
        sink.update({"ranks": ranks})
