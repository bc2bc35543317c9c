"""collectives/data.py and the descriptors' check of an average: NCCL's avg is the sum of
x*(1/n), 1/n rounded in the dtype; gloo stays sum-then-divide (issue 22)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

# ---- avg on NCCL: the sum of x·(1/n), 1/n rounded in the dtype -----------------------------

FLOATS = ["float16", "bfloat16", "float32", "float64"]


def nccl_scale(dtype, world):
    """1/n as NCCL's enqueue.cc makes it: float(1.0/n) (double for float64), to the dtype."""
    if dtype == "float64":
        return torch.tensor(1.0 / world, dtype=torch.float64)
    return torch.tensor(1.0 / world, dtype=torch.float32).to(getattr(torch, dtype))


def orders(world):
    """Summation orders a backend may use: rank order, reversed, a ring starting mid-way, and
    a pairwise tree."""
    ranks = list(range(world))
    return [ranks, ranks[::-1], ranks[world // 2:] + ranks[:world // 2], "tree"]


def summed(terms, order):
    if order == "tree":
        while len(terms) > 1:
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        return terms[0]
    total = terms[order[0]].clone()
    for rank in order[1:]:
        total = total + terms[rank]  # rounded in the dtype at every step, as NCCL does
    return total


def rank_inputs(op, world, dtype, backend, count):
    from commbench.collectives.base import OpContext

    inputs = []
    for rank in range(world):
        ctx = OpContext(rank, world, None, dtype, "avg", None, backend=backend)
        buffer = torch.zeros(count, dtype=getattr(torch, dtype))
        buffer.copy_(op.input_values(ctx, count)(torch.arange(count)))
        inputs.append(buffer)
    return inputs


def wrong_in(op, world, dtype, backend, count, result):
    from commbench.collectives.base import Buffers, OpContext

    wrong, status = 0, ""
    for rank in range(world):
        ctx = OpContext(rank, world, None, dtype, "avg", None, backend=backend)
        wrong += op.wrong(ctx, Buffers(send=result, recv=result.clone(), count=count))
        status = op.validation(ctx, count)
    return wrong, status


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_check_expects_what_nccl_computes_for_a_float_average(dtype):
    """An emulation of ncclAvg (= ncclPreMulSum with 1/n) at every world size 2..128, summed in
    several orders: never a wrong element, and 'full' only where every order gives the
    expected result. Before, fp16 at 11, 22, 88 ranks (and bf16, fp32 at others) reported
    false #wrong while the row said full."""
    from commbench import collectives

    op = collectives.get("allreduce")
    for world in range(2, 129):
        count = world * 5
        scale = nccl_scale(dtype, world)
        terms = [x * scale for x in rank_inputs(op, world, dtype, "nccl", count)]
        # Every rank checks the result of every order; orders that give the same bits (most
        # do) are checked once: the check of identical bits is the same check (4x faster).
        results: list = []
        for order in orders(world):
            result = summed(terms, order)
            if not any(torch.equal(result, seen) for seen, _ in results):
                results.append((result, order))
        for result, order in results:
            wrong, status = wrong_in(op, world, dtype, "nccl", count, result)
            assert wrong == 0, (dtype, world, order if order == "tree" else order[0], status)
            assert status == "full" or status.startswith(("partial: ", "off: ")), status


@pytest.mark.parametrize("dtype", FLOATS)
def test_gloo_averages_stay_sum_then_divide(dtype):
    from commbench import collectives

    op = collectives.get("allreduce")
    for world in (3, 11, 13, 41, 100):
        count = world * 5
        inputs = rank_inputs(op, world, dtype, "gloo", count)
        wrong, status = wrong_in(op, world, dtype, "gloo", count, summed(inputs, "tree") / world)
        assert wrong == 0 and (status == "full" or dtype in ("float16", "bfloat16")), status


@pytest.mark.parametrize(("dtype", "world"), [("float16", 11), ("bfloat16", 13), ("float32", 41),
                                              ("float16", 3), ("float32", 100)])
def test_nccl_average_patterns_keep_the_claimed_properties(dtype, world):
    """The premultiplied pattern is still a check: exact inputs, no input equal to the result,
    neighbours and chunks different, and a fault (no-op, moved element) caught."""
    from commbench.collectives import data

    pattern = data.reduce_pattern("avg", dtype, world, 7, premultiplied=True)
    assert pattern.status == "full", pattern.status
    table, expected = np.asarray(pattern.table), np.asarray(pattern.expected)
    assert np.array_equal(data.round_to(table, dtype), table)  # exact in the dtype
    assert ((table != 0).sum(axis=0) == 1).all()  # one term per column: any order is exact
    assert not (table == expected[None, :]).any()
    assert (expected != np.roll(expected, -1)).all() and len(set(expected)) == expected.size
    assert np.array_equal(
        expected, data.round_to(table.sum(axis=0) * data.avg_scale(dtype, world), dtype))
