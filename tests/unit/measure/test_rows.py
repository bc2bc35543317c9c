"""--per-call columns of a row (measure.rows): over every call, idle ranks left out, stragglers
named by global rank; and the calls handed to the sink as they were timed."""

import numpy as np

from commbench import collectives
from commbench.collectives.base import OpContext
from commbench.measure.rows import RowContext, build_row, call_batch
from commbench.measure.sampling import Measurement

WHERE = RowContext("gloo", "cpu", 1, "float32", 4, 0)


def per_call_measurement():
    """3 ranks x 8 calls of 100 us; rank 2 starts calls 1 and 5 late by 300 us (the others'
    calls then last 400 us); rank 1 starts call 6 late by 20 us (noise: no straggler)."""
    calls = np.full((3, 8), 100e-6)
    late = np.zeros((3, 8))
    for call in (1, 5):
        calls[:2, call] = 400e-6
        late[2, call] = 300e-6
    late[1, 6] = 20e-6
    blocks = calls.reshape(3, 4, 2).mean(axis=2)
    return Measurement(per_rank=blocks, counts=np.full(4, 2), calls=calls, call_late=late,
                       call_rounds=np.array([0, 0, 0, 0, 1, 1, 1, 1]))


def test_per_call_columns():
    op = collectives.get("allreduce")
    ctx = OpContext(0, 3, None, "float32", "sum", None)
    row = build_row(op, ctx, WHERE, 64, per_call_measurement(), 1, 0)
    assert row.calls == 8
    assert row.spikes == 2  # calls 1 and 5: avg (400+400+100)/3 = 300 us > 1.5 x 100
    assert row.stragglers == "2:2"
    assert row.lat_us_p95 > 100 and row.cv_pct > 0


def test_idle_ranks_are_left_out_and_ranks_named_globally():
    op = collectives.get("allreduce")
    ctx = OpContext(0, 3, None, "float32", "sum", None)
    active = np.array([True, False, True])
    row = build_row(op, ctx, WHERE, 64, per_call_measurement(), 1, 0, active=active)
    assert row.stragglers == "2:2"
    idle_straggler = build_row(op, ctx, WHERE, 64, per_call_measurement(), 1, 0,
                               active=np.array([True, True, False]))
    assert idle_straggler.stragglers == ""  # rank 2 does not take part: nobody was late


def test_without_per_call_the_columns_stay_empty():
    op = collectives.get("allreduce")
    ctx = OpContext(0, 2, None, "float32", "sum", None)
    plain = Measurement(per_rank=np.full((2, 4), 1e-4), counts=np.full(4, 2),
                        calls=np.full((2, 8), 1e-4))
    row = build_row(op, ctx, WHERE, 64, plain, 1, 0)
    assert (row.calls, row.spikes, row.stragglers) == (0, 0, "")
    assert call_batch(op, ctx, WHERE, 64, plain) is None


def test_the_batch_keeps_calls_as_timed():
    op = collectives.get("allreduce")
    ctx = OpContext(0, 3, None, "float32", "sum", None)
    batch = call_batch(op, ctx, WHERE, 64, per_call_measurement())
    assert batch.size_bytes == 256 and batch.op == "allreduce" and batch.backend == "gloo"
    assert batch.time_us[0, 1] == 400.0 and batch.late_us[2, 5] == 300.0
    assert batch.rounds.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
