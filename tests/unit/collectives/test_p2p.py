"""The validation patterns, checked from the outside: for every reduce op, dtype and world size
2..1024, the expected result is recomputed here with exact integer arithmetic from the inputs
the pattern gives each rank, and every property the pattern claims is verified on a real buffer
layout. A pattern that says ``full`` must keep all four properties; one that cannot must say
``partial`` or ``off``."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.collectives import data

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["sum", "prod", "min", "max", "avg"]
# What each dtype holds exactly, stated here independently of the module's tables: integers in
# [lo, hi], and for floats powers of two from the smallest normal one (GPUs may flush
# subnormals) to the largest.
EXACT = {"float32": (-(2**24), 2**24), "float64": (-(2**53), 2**53),
         "float16": (-2048, 2048), "bfloat16": (-256, 256), "int8": (-128, 127),
         "uint8": (0, 255), "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
POWERS = {"float32": (-126, 127), "float64": (-1022, 1023), "float16": (-14, 15),
          "bfloat16": (-126, 127)}


def representable(values: np.ndarray, dtype: str) -> np.ndarray:
    """Which float64 values (exact here: integers below 2^53, powers of two) the dtype holds."""
    lo, hi = EXACT[dtype]
    whole = (values == np.round(values)) & (values >= lo) & (values <= hi)
    if dtype not in POWERS:
        return whole
    mantissa, exponent = np.frexp(np.abs(values))
    low, high = POWERS[dtype]
    power = (mantissa == 0.5) & (exponent - 1 >= low) & (exponent - 1 <= high)
    return whole | power


def check_pattern(op, dtype, world, chunk):
    """Verify every property the pattern claims; returns its status."""
    pattern = data.reduce_pattern(op, dtype, world, chunk)
    if pattern.status.startswith("off"):
        return pattern.status
    table = np.asarray(pattern.table, dtype=np.float64)
    period = table.shape[1]
    # (d) exact: every input, every partial result in any order, the result. Inputs of a column
    # share a sign (sum, avg, prod's exponents), so the extremes of partial results are the
    # sums of the positive and of the negative inputs.
    assert representable(table, dtype).all(), (op, dtype, world)
    if op in ("sum", "avg"):
        for part in (np.where(table > 0, table, 0).sum(0), np.where(table < 0, table, 0).sum(0)):
            assert representable(part, dtype).all(), (op, dtype, world)
    reduced = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
               "avg": lambda t, axis: t.sum(axis) / world}[op](table, axis=0)
    if op == "avg":
        assert (table.sum(0) % world == 0).all(), "avg inputs must average to an integer"
    assert representable(reduced, dtype).all(), (op, dtype, world)
    assert np.array_equal(np.asarray(pattern.expected, dtype=np.float64), reduced)
    if pattern.status != "full":
        assert pattern.status.startswith("partial: ")
        return pattern.status
    # (a) element i takes column i mod Q: neighbours differ when neighbouring columns do,
    # cyclically (the last column is followed by the first).
    assert (reduced != np.roll(reduced, -1)).all(), (op, dtype, world)
    # (b) a rank's input is the result nowhere (sum, avg, prod), or only in the columns it
    # holds the extreme of, and neighbouring columns have different holders (min, max).
    equal = table == reduced[None, :]
    if op in ("min", "max"):
        holders = np.asarray(pattern.holders)
        assert (equal == (np.arange(world)[:, None] == holders[None, :])).all()
        assert (holders != np.roll(holders, -1)).all(), (op, dtype, world)
        if chunk == 1:  # reduce-scatter: rank s checks column s alone
            assert (holders[:world] != np.arange(world)).all()
    else:
        assert not equal.any(), (op, dtype, world)
    # (c) the n chunks of a buffer of n x chunk elements are n different sequences.
    width = min(chunk, period + 1)
    starts = (np.arange(world) * chunk) % period
    windows = reduced[(starts[:, None] + np.arange(width)[None, :]) % period]
    assert len(np.unique(windows, axis=0)) == world, (op, dtype, world, chunk)
    return "full"


@settings(max_examples=150, deadline=None)
@given(op=st.sampled_from(OPS), dtype=st.sampled_from(DTYPES),
       world=st.integers(2, 1024), chunk=st.sampled_from([1, 2, 3, 7, 16, 97]))
def test_every_claimed_property_holds(op, dtype, world, chunk):
    check_pattern(op, dtype, world, chunk)


@pytest.mark.parametrize("world", [2, 3, 4, 5, 6, 7, 8, 12, 16, 64, 128, 1024])
@pytest.mark.parametrize("op", OPS)
def test_float32_and_wide_integers_are_fully_checked_at_every_world(op, world):
    # Products are powers of two: int32 holds 29 usable ones (2^2..2^30), int64 61, float32
    # 251 (2^-126..2^127 without 2^-1..2^1), too few for a result that differs on every column
    # beyond those world sizes (they say partial; float64 holds 2043).
    dtypes = ("float32", "float64", "int32", "int64")
    if op == "prod":
        dtypes = tuple(d for d in dtypes if world < {"float32": 250, "float64": 2000,
                                                       "int32": 28, "int64": 60}[d])
    for dtype in dtypes:
        for chunk in (1, 5, 64):
            assert check_pattern(op, dtype, world, chunk) == "full", (op, dtype, world, chunk)


@pytest.mark.parametrize(("dtype", "largest"), [("int32", 28), ("int64", 60), ("float32", 250)])
def test_products_are_full_up_to_the_readme_limit_and_partial_beyond(dtype, largest):
    assert check_pattern("prod", dtype, largest, 16) == "full"
    assert check_pattern("prod", dtype, largest + 1, 16).startswith("partial: ")


@pytest.mark.parametrize(
    ("op", "dtype", "world"),
    # The cases that once passed wrong results as right (the validation issue's list).
    [("avg", "bfloat16", 12), ("sum", "float32", 5), ("max", "float32", 8),
     ("min", "int32", 7), ("prod", "float32", 6), ("avg", "int8", 8), ("sum", "float16", 8)],
)
def test_common_layouts_are_fully_checked(op, dtype, world):
    assert check_pattern(op, dtype, world, 64) == "full"


def test_small_dtypes_say_what_they_cannot_check():
    status = data.reduce_pattern("prod", "int8", 8, 16).status
    assert status.startswith("partial: ") and "int8" in status
    off = data.reduce_pattern("avg", "bfloat16", 512, 16).status
    assert off.startswith("off: ")


def test_one_element_max_names_the_rank_holding_it():
    pattern = data.reduce_pattern("max", "float32", 4, 1)
    holder = int(pattern.holders[0])
    assert data.holder_status(pattern, {holder: (0, 1)})
    assert data.holder_status(pattern, {(holder + 1) % 4: (0, 1)}) == ""
    assert data.holder_status(pattern, {holder: (0, 2)}) == ""


@settings(max_examples=200, deadline=None)
@given(dtype=st.sampled_from(DTYPES), keys=st.integers(2, 1024 * 1024),
       first=st.integers(0, 10**6), length=st.sampled_from([2, 3, 40]))
def test_data_progressions_differ_per_source_and_per_neighbour(dtype, keys, first, length):
    import torch

    status = data.plain_status(keys, length, dtype)
    a = data.plain_values(keys - 1, dtype)(torch.arange(first, first + length))
    b = data.plain_values(keys - 2, dtype)(torch.arange(first, first + length))
    lo, hi = EXACT[dtype]
    assert int(a.min()) >= 1 and int(a.max()) <= hi  # never 0, exact in the dtype
    assert bool((a[1:] != a[:-1]).all())  # neighbours differ
    if status == "full":
        assert not torch.equal(a, b)  # two sources' chunks differ


# ---- p2p with idle ranks: the group's first NCCL call is one every rank makes ---------------


class RecordingDist:
    """torch.distributed's p2p surface, recording (rank, call, group) per rank."""

    def __init__(self, monkeypatch, backend: str):
        import torch.distributed as dist

        self.calls: list[tuple[int, str, object]] = []
        self.rank = -1
        record = self.record

        class Op:
            def __init__(self, op, tensor, peer, group=None):
                self.op, self.tensor, self.peer, self.group = op, tensor, peer, group

        def batch(ops):
            record("batch_isend_irecv", ops[0].group)
            return []

        monkeypatch.setattr(dist, "P2POp", Op)
        monkeypatch.setattr(dist, "batch_isend_irecv", batch)
        monkeypatch.setattr(dist, "barrier", lambda group=None, **kw: record("barrier", group))
        monkeypatch.setattr(dist, "all_reduce", lambda t, group=None, **kw: record("all_reduce",
                                                                                 group))
        for name in ("send", "recv"):
            monkeypatch.setattr(dist, name, lambda t, peer, group=None, _n=name: record(_n, group))
        monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)

    def record(self, name, group):
        self.calls.append((self.rank, name, group))

    def first_call(self, rank):
        return next(((name, group) for r, name, group in self.calls if r == rank), None)


@pytest.mark.parametrize("pattern", ["unidir", "bidir", "ring"])
@pytest.mark.parametrize("ranks", [(), (4, 5, 6)])  # the world, or one group of a mesh
def test_the_first_nccl_call_on_a_group_is_one_every_rank_of_it_makes(monkeypatch, pattern,
                                                                       ranks):
    """3 ranks, pairs (0, 1): rank 2 idles. Its group's first call must not be a batch of the
    pair alone (torch requires the whole group in a first batch_isend_irecv)."""
    from commbench import collectives
    from commbench.collectives.base import Buffers, OpContext

    fake = RecordingDist(monkeypatch, "nccl")
    group = object()
    op = collectives.get("p2p")
    for rank in range(3):
        fake.rank = rank
        ctx = OpContext(rank, 3, group, "float32", "sum", None, pattern=pattern, ranks=ranks,
                        window=4)
        bufs = Buffers(send=torch.zeros(8), recv=torch.zeros(8), count=8)
        op.call(ctx, bufs)()  # bind (every rank, at once), then one iteration
    assert [fake.first_call(rank) for rank in range(3)] == [("barrier", group)] * 3


def test_gloo_and_pingpong_make_no_extra_call(monkeypatch):
    from commbench import collectives
    from commbench.collectives.base import Buffers, OpContext

    for backend, pattern in (("gloo", "unidir"), ("nccl", "pingpong")):
        fake = RecordingDist(monkeypatch, backend)
        fake.rank = 0
        ctx = OpContext(0, 2, object(), "float32", "sum", None, pattern=pattern)
        collectives.get("p2p").call(ctx, Buffers(torch.zeros(4), torch.zeros(4), 4))()
        assert "barrier" not in [name for _, name, _ in fake.calls]
