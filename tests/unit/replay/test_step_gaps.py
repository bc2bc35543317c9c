"""--gaps recorded waits for the compute before a step's first call too: a straggler's slow
forward is what made its step long (docs/commands/replay.md)."""

from commbench.replay import plan as replay
from commbench.results import trace as trace_format
from tests.unit.stragglers.synthetic import ddp_job


def test_a_steps_first_call_waits_for_the_compute_before_it(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, slow={2: 0.03}, noise_s=0.0))
    plan = replay.make_plan(trace, [3], "recorded", isolated=False)
    first = {rank: trace.calls(rank, 3)[0].seq for rank in trace.ranks}
    waits = {rank: plan.gaps[rank][first[rank]] for rank in trace.ranks}
    assert 0.015 < waits[0] < 0.03  # the others' forward
    assert abs(waits[2] - waits[0] - 0.03) < 0.002  # the straggler's, 30 ms longer
    # without the previous step, the first call waited for nothing (the old rule)
    assert replay.gaps(trace.calls(2, 3))[first[2]] == 0.0
