"""--per-call columns of a row (measure.rows): over every call, idle ranks left out, stragglers
named by global rank; and the calls handed to the sink as they were timed."""


import numpy as np
import pytest

from commbench import collectives
from commbench.collectives.base import Buffers, OpContext
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


def ctx_for(name, world, rank=0, pattern=""):
    return OpContext(rank, world, None, "float32", "sum", None, pattern=pattern)


def where():
    return RowContext(backend="gloo", device="cpu", nnodes=1, dtype="float32", itemsize=4,
                      root=0, rank_time="avg")


def measurement(per_call_seconds):
    """Every block of every rank took these seconds per iteration."""
    per_rank = np.array([[s] * 20 for s in per_call_seconds])
    return Measurement(per_rank=per_rank, counts=np.full(20, 10))


def test_an_idle_rank_is_left_out_of_time_slowest_rank_and_skew():
    op = collectives.get("p2p")
    ctx = ctx_for("p2p", 3, pattern="pingpong")
    assert [op.active(ctx_for("p2p", 3, r, "pingpong")) for r in range(3)] == [True, True, False]
    row = build_row(op, ctx, where(), 256, measurement([100e-6, 120e-6, 1e-9]), 2, 0,
                    active=np.array([True, True, False]))
    assert row.slowest_rank == 1
    assert row.skew_pct == pytest.approx((60 - 50) / 60 * 100)  # not ~100 % from the idle rank
    assert row.lat_us_mean == pytest.approx(55.0)  # avg of 50 and 60 us, not of three


@pytest.mark.parametrize(("pattern", "messages"),
                         [("pingpong", 2), ("unidir", 64), ("bidir", 64), ("ring", 1)])
def test_p2p_rows_report_one_message(pattern, messages):
    """pingpong: a round trip is 2 one-way messages (osu_latency); unidir and bidir: a window
    of 64 messages per iteration (osu_bw, osu_bibw); ring: one."""
    op = collectives.get("p2p")
    ctx = ctx_for("p2p", 2, pattern=pattern)
    bufs = Buffers(send=np.zeros(4), recv=np.zeros(4), count=4)
    assert op.messages_per_iteration(ctx, bufs) == messages
    row = build_row(op, ctx, where(), 256, measurement([640e-6, 640e-6]), messages, 0)
    assert row.lat_us_p50 == pytest.approx(640 / messages)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * (2 if pattern == "bidir" else 1))
