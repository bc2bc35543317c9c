"""Descriptors: busbw factors against nccl-tests' PERFORMANCE.md, sizes, buffers, and each
descriptor's own check against results made in one process with plain torch ops (the
patterns themselves are verified in test_patterns.py, the real collectives in integration)."""

import pytest
import torch

from commbench import collectives
from commbench.collectives import data
from commbench.collectives.base import OpContext

# busbw factor for n = 1..8 (nccl-tests doc/PERFORMANCE.md; gather/scatter and p2p:
# docs/reference/metrics-and-formulas.md#the-columns).
FACTORS = {
    "allreduce": [0, 1, 4 / 3, 1.5, 1.6, 5 / 3, 12 / 7, 1.75],
    "allgather": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    "reduce-scatter": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    "alltoall": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    # without a routing; x imbalance in a row (nccl-tests 2.19): tests/unit/collectives/
    # test_alltoallv.py
    "alltoallv": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    "gather": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    "scatter": [0, 0.5, 2 / 3, 0.75, 0.8, 5 / 6, 6 / 7, 0.875],
    "broadcast": [1] * 8,
    "reduce": [1] * 8,
    "p2p": [1] * 8,
    "barrier": [0] * 8,
    "ps": [1] * 8,  # without its options; max(1, W/S) in a row: tests/unit/test_ps.py
}


def test_every_command_of_the_spec_is_registered():
    assert set(collectives.REGISTRY) == set(FACTORS)


@pytest.mark.parametrize("name", sorted(FACTORS))
def test_busbw_factors_match_nccl_tests(name):
    op = collectives.get(name)
    for world, expected in enumerate(FACTORS[name], start=1):
        assert op.busbw_factor(world) == pytest.approx(expected)


def test_bidirectional_p2p_counts_both_directions():
    assert collectives.get("p2p").busbw_factor(2, "bidir") == 2


def ctx(world, rank=0, **kw):
    kw.setdefault("reduce_op", "sum")
    return OpContext(rank, world, None, kw.pop("dtype", "float32"), kw.pop("reduce_op"), None, **kw)


@pytest.mark.parametrize(
    ("name", "size", "world", "count"),
    [
        ("allreduce", 8, 3, 2),
        ("allreduce", 3, 2, 1),  # never below one element
        ("allgather", 8, 3, 3),  # one element per rank at least
        ("allgather", 100, 3, 24),  # 25 elements -> 24, divisible by 3
        ("reduce-scatter", 64, 4, 16),
        ("alltoall", 10, 2, 2),
        ("barrier", 1024, 2, 0),
    ],
)
def test_sizes_round_down_to_whole_elements(name, size, world, count):
    assert collectives.get(name).count_for(size, 4, world) == count


@pytest.mark.parametrize(
    ("name", "rank", "inplace", "send", "recv"),
    [
        ("allreduce", 0, False, 0, 12),
        ("allgather", 1, False, 3, 12),
        ("allgather", 1, True, 0, 12),
        ("reduce-scatter", 1, False, 12, 3),
        ("reduce-scatter", 1, True, 12, 0),
        ("alltoall", 0, False, 12, 12),
        ("gather", 0, False, 3, 12),
        ("gather", 2, False, 3, 1),
        ("scatter", 0, False, 12, 3),
        ("scatter", 3, False, 1, 3),
        ("p2p", 0, False, 12, 12),
    ],
)
def test_the_largest_buffer_is_the_size(name, rank, inplace, send, recv):
    layout = collectives.get(name).layout(ctx(4, rank, inplace=inplace), 12)
    assert (layout.send, layout.recv) == (send, recv)


def test_fill_and_count_wrong_catch_one_bad_element():
    buffer = torch.empty(3 * data.CHUNK + 5, dtype=torch.float32)
    values = data.plain_values(1, "float32")
    data.fill(buffer, values, start=7)
    assert data.count_wrong(buffer, values, start=7) == 0
    assert data.count_wrong(buffer, values, start=8) == buffer.numel()  # a shift is caught
    buffer[2 * data.CHUNK + 1] += 1
    assert data.count_wrong(buffer, values, start=7) == 1


def simulate(name, world, reduce_op="sum", dtype="float32", count=12, **kw):
    """Run a collective's data path in one process: inputs per rank, torch ops for the transfer.

    Only the data logic is exercised here; tests/integration runs the real process groups.
    """
    op = collectives.get(name)
    ctxs = [ctx(world, r, reduce_op=reduce_op, dtype=dtype, **kw) for r in range(world)]
    dt = getattr(torch, dtype)
    bufs = []
    for c in ctxs:
        layout = op.layout(c, count)
        send = torch.empty(max(layout.send, 1), dtype=dt)
        recv = torch.empty(max(layout.recv, 1), dtype=dt)
        b = op.views(c, send, recv, count)
        op.prepare(c, b)
        bufs.append(b)
    return op, ctxs, bufs


def test_allreduce_check_passes_on_the_true_result_and_fails_on_a_wrong_one():
    op, ctxs, bufs = simulate("allreduce", 3, reduce_op="max", dtype="bfloat16")
    total = torch.stack([b.recv for b in bufs]).max(0).values
    for b in bufs:
        b.recv.copy_(total)
    assert [op.wrong(c, b) for c, b in zip(ctxs, bufs, strict=False)] == [0, 0, 0]
    bufs[2].recv[5] += 1
    assert op.wrong(ctxs[2], bufs[2]) == 1


def test_allgather_check_knows_which_rank_owns_each_chunk():
    op, ctxs, bufs = simulate("allgather", 3, count=12)
    gathered = torch.cat([b.send for b in bufs])
    for b in bufs:
        b.recv.copy_(gathered)
    assert op.wrong(ctxs[0], bufs[0]) == 0
    swapped = torch.cat([bufs[1].send, bufs[0].send, bufs[2].send])
    bufs[0].recv.copy_(swapped)
    assert op.wrong(ctxs[0], bufs[0]) == 8


def test_alltoall_check_follows_the_transpose():
    op, ctxs, bufs = simulate("alltoall", 2, count=8)
    for dst, b in enumerate(bufs):
        b.recv.copy_(torch.cat([bufs[src].send[dst * 4 : dst * 4 + 4] for src in range(2)]))
    assert [op.wrong(c, b) for c, b in zip(ctxs, bufs, strict=False)] == [0, 0]
    bufs[1].recv.copy_(bufs[0].send)  # no exchange at all
    assert op.wrong(ctxs[1], bufs[1]) > 0


def test_broadcast_starts_non_roots_from_zero_so_a_no_op_fails():
    op, ctxs, bufs = simulate("broadcast", 2, root=1)
    assert op.wrong(ctxs[1], bufs[1]) == 0
    assert op.wrong(ctxs[0], bufs[0]) == bufs[0].recv.numel()


def test_only_a_workload_carries_the_workload_hooks():
    """Collective stays small (a name and its call's few functions); ps's extra hooks live on
    collectives.workload.Workload, and the engine's helpers answer for plain ops."""
    from commbench.collectives import workload

    for hook in ("roles_text", "counters", "subgroups", "row_fields"):
        assert not hasattr(collectives.get("allreduce"), hook), hook
        assert hasattr(collectives.get("ps"), hook), hook
    plain = collectives.get("allreduce")
    assert workload.counters(plain, None) == [] and workload.subgroups(plain, 4) == ()
    assert workload.row_fields(plain, None, None) == {} and \
        workload.roles_text(plain, None, 4) == ""
    assert [name for name, op in collectives.REGISTRY.items()
            if isinstance(op, workload.Workload)] == ["ps"]
