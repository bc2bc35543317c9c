"""The alltoallv descriptor in one process: its buffers, its rows' columns and busbw, what it
refuses, and its check against exchanges made by hand (right, and broken each way the
integration test breaks the real one). tests/integration/test_alltoallv.py runs real ranks."""

import pytest
import torch

from commbench import collectives
from commbench.collectives import routing
from commbench.collectives.base import OpContext
from commbench.core.errors import UsageError
from commbench.specs.measure import MeasureSpec

OP = collectives.get("alltoallv")
# Bytes from rank i (row) to rank j, 64 in all. At 16 elements a rank (64 in all) every byte
# of weight is one element: ranks send 8, 24, 16 and 16, and receive 16, 12, 20 and 16.
FILE = routing.Routing("file", path="m.csv", matrix=((0, 4, 4, 0),
                                                      (8, 0, 8, 8),
                                                      (4, 4, 0, 8),
                                                      (4, 4, 8, 0)))


def ctx(rank, world=4, pattern="dispatch", dtype="float32", **options):
    options = {"routing": FILE, **options}
    return OpContext(rank, world, None, dtype, "sum", None, pattern=pattern,
                     options=tuple(options.items()))


def test_it_is_registered_with_alltoalls_factor_without_a_routing():
    assert OP.name == "alltoallv" and OP.in_runs is False
    assert [OP.busbw_factor(n) for n in (1, 2, 4, 8)] == [0, 0.5, 0.75, 0.875]


def test_a_size_is_the_mean_a_rank_sends():
    # 16 elements a rank, 64 in all, over weights that sum to 64: the matrix itself.
    assert OP.splits_at(ctx(0), 16) == ((0, 4, 4, 0), (8, 0, 8, 8), (4, 4, 0, 8), (4, 4, 8, 0))
    assert OP.splits_at(ctx(0, pattern="combine"), 16)[0] == (0, 8, 4, 4)  # the transpose


def test_rows_carry_the_busiest_rank_and_busbw_as_nccl_tests_2_19():
    # At 16 elements (64 B) a rank: rank 1 sends 24 elements, rank 2 receives 4 + 8 + 8 = 20,
    # rank 3 receives 0 + 8 + 8 + 0 = 16. Busiest: 24 elements = 96 B; imbalance 24 / 16.
    extras = OP.row_extras(ctx(0), 16)
    assert extras["max_rank_bytes"] == 96
    assert extras["imbalance"] == 1.5
    assert extras["split_id"] == routing.matrix_id(FILE.matrix)
    # nccl-tests: busbw = max_bytes / t x (n-1)/n; here algbw = 64 B / t, so the factor is
    # 96/64 x 3/4 = 1.125.
    assert OP.busbw_factor_at(ctx(0), 16) == pytest.approx(1.125)


def test_the_engine_takes_the_columns_from_the_descriptor():
    import numpy as np

    from commbench.measure.rows import RowContext, build_row
    from commbench.measure.sampling import Measurement

    where = RowContext(backend="gloo", device="cpu", nnodes=1, dtype="float32", itemsize=4,
                       root=0)
    measurement = Measurement(per_rank=np.full((4, 3), 1e-6), counts=np.full(3, 10))
    row = build_row(OP, ctx(0), where, 16, measurement, 1, 0)
    assert (row.max_rank_bytes, row.imbalance) == (96, 1.5)
    assert row.algbw_gbps == pytest.approx(64 / 1e-6 / 1e9)  # the mean a rank sends
    assert row.busbw_gbps == pytest.approx(96 / 1e-6 / 1e9 * 3 / 4)  # nccl-tests' busbw
    allreduce = build_row(collectives.get("allreduce"), ctx(0), where, 16, measurement, 1, 0)
    assert (allreduce.max_rank_bytes, allreduce.imbalance, allreduce.split_id) == (0, 0.0, "")


def test_buffers_of_the_largest_size_hold_every_smaller_one():
    zipf = ctx(0, routing=routing.parse_routing("zipf:1.3"), tokens=1000)
    for rank in range(4):
        c = ctx(rank, routing=zipf.option("routing"), tokens=1000)
        largest = OP.layout(c, 4000)
        for count in range(4, 4000, 4):
            matrix = OP.splits_at(c, count)
            assert sum(matrix[rank]) <= largest.send
            assert sum(row[rank] for row in matrix) <= largest.recv


def _exchange(contexts, bufs, matrix):
    """all_to_all_single by hand: receiver j gets, from each source i in order, the chunk
    of i's send buffer that starts after i's chunks for 0..j-1."""
    for j, b in enumerate(bufs):
        parts = []
        for i, source in enumerate(bufs):
            start = sum(matrix[i][:j])
            parts.append(source.send[start:start + matrix[i][j]])
        b.recv.copy_(torch.cat(parts))


def _setup(pattern="dispatch", count=16, **options):
    contexts = [ctx(r, pattern=pattern, **options) for r in range(4)]
    bufs = []
    for c in contexts:
        layout = OP.layout(c, count)
        b = OP.views(c, torch.empty(layout.send), torch.empty(layout.recv), count)
        OP.prepare(c, b)
        bufs.append(b)
    return contexts, bufs


@pytest.mark.parametrize("pattern", ["dispatch", "combine"])
def test_the_check_passes_a_true_exchange(pattern):
    contexts, bufs = _setup(pattern)
    _exchange(contexts, bufs, OP.splits_at(contexts[0], 16))
    assert [OP.wrong(c, b) for c, b in zip(contexts, bufs, strict=True)] == [0, 0, 0, 0]
    assert OP.validation(contexts[0], 16) == "full"


def test_the_check_catches_a_chunk_from_the_wrong_source():
    contexts, bufs = _setup()
    _exchange(contexts, bufs, OP.splits_at(contexts[0], 16))
    # rank 0 receives 8 elements from rank 1, then 4 from 2 and 4 from 3: swap the last two
    recv = bufs[0].recv
    recv[8:16] = torch.cat([recv[12:16].clone(), recv[8:12].clone()])
    assert OP.wrong(contexts[0], bufs[0]) == 8


def test_the_check_catches_a_misplaced_element():
    contexts, bufs = _setup()
    _exchange(contexts, bufs, OP.splits_at(contexts[0], 16))
    recv = bufs[2].recv
    recv[[3, 4]] = recv[[4, 3]]  # two neighbours of one chunk swapped
    assert OP.wrong(contexts[2], bufs[2]) == 2


def test_the_check_catches_wrong_split_sizes():
    # The engine's `splits` fault: one element moved from (0,1) to (0,0) and from (1,0) to
    # (1,1). Row and column totals stay, the chunks of ranks 0 and 1 are cut wrong.
    contexts, bufs = _setup()
    matrix = [list(row) for row in OP.splits_at(contexts[0], 16)]
    matrix[0][0] += 1
    matrix[0][1] -= 1
    matrix[1][0] -= 1
    matrix[1][1] += 1
    _exchange(contexts, bufs, matrix)
    wrong = [OP.wrong(c, b) for c, b in zip(contexts, bufs, strict=True)]
    assert wrong[0] > 0 and wrong[1] > 0 and wrong[2:] == [0, 0]


def test_the_check_catches_a_collective_that_did_nothing():
    contexts, bufs = _setup()
    assert OP.wrong(contexts[1], bufs[1]) == bufs[1].recv.numel() == 12  # 4 + 0 + 4 + 4


def test_bfloat16_one_element_chunks_of_many_ranks_are_partial():
    # bfloat16 holds 1..251 exactly: 16 x 16 = 256 one-element chunk sources share them.
    c = OpContext(0, 16, None, "bfloat16", "sum", None, pattern="dispatch",
                  options=(("routing", routing.Routing("uniform")),))
    assert OP.validation(c, 16).startswith("partial")


def spec(sizes=(1024,), mesh=(), dims=(), dtype="float32", **options):
    return MeasureSpec(ops=("alltoallv",), sizes=sizes, mesh=mesh, dims=dims, dtype=dtype,
                       op_options=tuple(options.items()))


@pytest.mark.parametrize(("made", "message"), [
    (spec(combine=True), "--combine measures the way back of a routing"),
    (spec(routing=routing.Routing("uniform"), topk=5, experts=4), "bad --topk 5"),
    (spec(routing=FILE), "4 x 4 matrix, the groups have 8 ranks"),
    (spec(routing=FILE, mesh=(("dp", 2), ("ep", 4)), dims=("ep",)), None),
    (spec(hidden=3), "size 1024 B is not whole tokens"),
    (spec(hidden=0), "bad --hidden 0"),
    (spec(sizes=(4096,), hidden=128), None),
])
def test_what_alltoallv_refuses(made, message):
    if message is None:
        OP.refuse(made, 8)
        return
    with pytest.raises(UsageError, match=message):
        OP.refuse(made, 8)


def test_the_split_matrix_file_names_the_rows_id():
    made = spec(routing=routing.parse_routing("hot:2:0.5"), mesh=(("dp", 2), ("ep", 4)),
                dims=("dp", "ep"), tokens=64)
    files = OP.run_files(made, 8)
    assert len(files) == 2  # one per group size: 2 and 4
    ids = {OP.row_extras(ctx(0, world=w, routing=made.op_options[0][1], tokens=64),
                         64)["split_id"] for w in (2, 4)}
    assert set(files) == {f"splits-{i}.csv" for i in ids}
    for text in files.values():
        assert text.startswith("# alltoallv split weights")
        rows = [line for line in text.splitlines() if not line.startswith("#")]
        assert all(sum(map(int, row.split(","))) == 128 for row in rows)  # 64 tokens x top-2


@pytest.mark.parametrize(("args", "message"), [
    (["--routing", "bogus"], "unknown --routing 'bogus'"),
    (["--routing", "zipf:1", "--topk", "9", "--experts", "8"], "bad --topk 9"),
    (["--combine"], "--combine measures the way back"),
    (["--routing", "file:{matrix}"], "2 x 2 matrix, the groups have 4 ranks"),
    (["--routing", "file:{negative}"], "negative byte count"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    from commbench.cli import main

    (tmp_path / "matrix.csv").write_text("0,1\n1,0\n")
    (tmp_path / "negative.csv").write_text("0,1,1,1\n1,0,1,1\n1,-1,0,1\n1,1,1,0\n")
    args = [a.format(matrix=tmp_path / "matrix.csv", negative=tmp_path / "negative.csv")
            for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(["alltoallv", "--nproc", "4", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()  # refused before the folder is made
