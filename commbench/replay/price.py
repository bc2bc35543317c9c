"""The model column of a replay: what each recorded call costs on measured curves.

Two sources, one shape (``(rank, call) -> (seconds or None, source)``):

- ``isolated_prices`` (the default): this launch's quick sweep at the trace's own sizes. After
  the replay, every distinct call is timed alone, back to back (replay.plan's
  ``isolated_plan``), so a call costs the median of its distinct call's timings on its own rank:
  the same sizes, groups and cluster, without the step's other traffic around it.
- ``--curves RUN``: another results folder, priced by ``model.trace_price.CurvePricer``
  exactly as ``estimate --trace`` prices a trace (the median where the run measured the size,
  log-log interpolation between its sizes, its α–β fit outside them, a projection per ring
  step where the trace's group has another size than the run's; an op the run lacks is not
  priced, with a note). "What would this step cost on the cluster of RUN".

Data in, data out: nothing here imports torch.
"""

from __future__ import annotations

from commbench.replay.figures import RankResult
from commbench.replay.plan import Price, ReplayPlan, calls_by_seq, local_key
from commbench.results.trace import Call, Trace

ISOLATED = "timed alone here"


def isolated_prices(trace: Trace, plan: ReplayPlan, results: dict[int, RankResult]) -> Price:
    """A call costs what its distinct call took alone on its rank (the module docstring)."""
    index: dict[tuple[int, tuple], int] = {}
    for number, item in enumerate(plan.isolated):
        for rank, seq in item.calls:
            call = calls_by_seq(trace, rank).get(seq)
            if call is not None:
                index.setdefault((rank, local_key(call)), number)

    def price(rank: int, call: Call) -> tuple[float | None, str]:
        number = index.get((rank, local_key(call)))
        result = results.get(rank)
        if number is None or result is None or number not in result.isolated:
            return None, "not timed alone"
        return result.isolated[number], ISOLATED

    return price
