"""importers/osu.py: OSU micro-benchmark output -> results rows, checked against hand-computed
values. The fixtures under tests/fixtures/osu are small files written in OSU's documented
formats (osu_util*.c); every expected number below is worked out from the numbers in them."""

import pytest

from commbench.core.errors import UsageError
from commbench.importers import parse
from tests.unit.importers.readers import OSU, gbps, osu, row

# ---- OSU ---------------------------------------------------------------------------------------


def test_osu_allreduce_needs_the_world_size():
    with pytest.raises(UsageError, match=r"osu_allreduce-7.4.txt:4: OSU does not print the "
                                         r"number of ranks: pass --world-size"):
        osu("osu_allreduce-7.4.txt")
    imported = osu("osu_allreduce-7.4.txt", world_size=4)
    out = row(imported, 1048576)
    assert (out["op"], out["backend"], out["device"], out["dtype"]) == ("allreduce", "mpi",
                                                                        "cpu", "int8")
    assert out["count"] == 1048576 and out["reduce_op"] == "sum"
    assert out["algbw_gbps"] == pytest.approx(4.194304)  # 1 MiB / 250 us
    assert out["busbw_gbps"] == pytest.approx(6.291456)  # x 1.5 at 4 ranks
    assert (out["source"], out["rank_time"], out["samples"]) == ("osu", "avg", 1)
    assert out["validation"] == "off: OSU checks nothing without -c"
    assert imported.meta["versions"] == {"osu": "7.4"}


def test_osu_allgather_full_world_size_from_the_launch_line():
    imported = osu("osu_allgather-full-7.4.txt")
    assert [r["size_bytes"] for r in imported.rows] == [8, 8192, 1048576]  # x 8 ranks
    out = row(imported, 1048576)
    assert out["world_size"] == 8 and out["iters"] == 100
    assert (out["lat_us_p50"], out["lat_us_min"], out["lat_us_max"]) == (400.0, 380.0, 450.0)
    assert out["skew_pct"] == pytest.approx(70 / 450 * 100)
    assert out["busbw_gbps"] == pytest.approx(2.62144 * 7 / 8)


def test_osu_world_size_contradicting_the_launch_line():
    with pytest.raises(UsageError, match=r"full-7.4.txt:1: the launch line starts 8 ranks, "
                                         r"--world-size says 4"):
        osu("osu_allgather-full-7.4.txt", world_size=4)


def test_osu_alltoall_5_3_on_cuda():
    imported = osu("osu_alltoall-cuda-5.3.txt", world_size=4)
    out = row(imported, 262144)  # 65536 B to each of 4 ranks
    assert out["device"] == "cuda" and out["dtype"] == "int8"
    assert out["busbw_gbps"] == pytest.approx(0.32768 * 3 / 4)
    assert imported.meta["versions"] == {"osu": "5.3"}
    xccl = (OSU / "osu_alltoall-cuda-5.3.txt").read_text().replace("OSU MPI-CUDA", "OSU NCCL-ROCM")
    assert {(r["backend"], r["device"]) for r in parse("osu", xccl, "x.txt", world_size=4).rows
            } == {("nccl", "rocm")}


def test_osu_reduce_scatter_size_is_the_send_buffer_and_validation():
    imported = osu("osu_reduce_scatter-validate-6.1.txt", world_size=4)
    out = row(imported, 1048576)  # osu_reduce_scatter's size is already the input buffer
    assert out["dtype"] == "float32" and out["count"] == 262144  # MPI_FLOAT before OSU 7
    assert out["busbw_gbps"] == pytest.approx(gbps(1048576, 900) * 3 / 4)
    assert out["wrong"] == 1 and out["validation"].startswith("OSU -c: Pass/Fail as the file")
    assert row(imported, 4096)["wrong"] == 0


def test_osu_bcast_tail_percentiles():
    imported = osu("osu_bcast-tails-7.4.txt", world_size=8)
    out = row(imported, 4096)
    assert out["tail"] == "call" and out["root"] == 0
    assert (out["lat_us_p50"], out["lat_us_p90"], out["lat_us_p99"]) == (8.0, 9.0, 12.0)
    assert (out["dtype"], out["count"]) == ("int32", 1024)
    assert out["busbw_gbps"] == pytest.approx(0.512)


def test_osu_barrier_has_no_size():
    out = osu("osu_barrier-7.4.txt", world_size=4).rows[0]
    assert (out["op"], out["size_bytes"], out["lat_us_p50"], out["busbw_gbps"]) == (
        "barrier", 0, 3.25, 0.0)


def test_osu_latency_is_pingpong_on_two_ranks():
    imported = osu("osu_latency-7.4.txt")
    assert len(imported.rows) == 4 and any("0 bytes" in n for n in imported.notes)
    out = row(imported, 1048576)
    assert (out["op"], out["pattern"], out["world_size"]) == ("p2p", "pingpong", 2)
    assert out["rank_time"] == "rank0" and out["peers"] == "0:1"
    assert out["algbw_gbps"] == out["busbw_gbps"] == pytest.approx(gbps(1048576, 85.0))
    with pytest.raises(UsageError, match="exactly 2 ranks; --world-size says 4"):
        osu("osu_latency-7.4.txt", world_size=4)


def test_osu_bw_megabytes_become_gigabytes_and_a_time():
    imported = osu("osu_bw-cuda-5.3.txt")
    out = row(imported, 4194304)
    assert out["pattern"] == "unidir" and out["device"] == "cuda"
    assert out["lat_us_p50"] == pytest.approx(209.7152)  # 4 MiB / 20000 MB/s
    assert out["algbw_gbps"] == pytest.approx(20.0) and out["busbw_gbps"] == pytest.approx(20.0)
    assert row(imported, 1)["lat_us_p50"] == pytest.approx(2.0)  # 1 B / 0.5 MB/s


def test_osu_bibw_counts_both_directions():
    imported = osu("osu_bibw-tails-7.4.txt")
    out = row(imported, 1048576)
    assert out["pattern"] == "bidir"
    assert out["lat_us_p50"] == pytest.approx(52.4288)  # 2 x 1 MiB / 40000 MB/s
    assert out["algbw_gbps"] == pytest.approx(20.0) and out["busbw_gbps"] == pytest.approx(40.0)
    # The 90th percentile of bandwidth is the 10th of time.
    assert out["lat_us_p10"] == pytest.approx(2 * 1048576 / 42000)
    assert out["tail"] == "call" and out["validation"].startswith("OSU -c")


def test_osu_table_without_header_needs_op():
    with pytest.raises(UsageError, match=r"table-only.txt:1: no '# OSU ... Test' line names the "
                                         r"benchmark: pass --op"):
        osu("table-only.txt", world_size=2)
    imported = osu("table-only.txt", op="osu_allreduce", world_size=2)
    out = row(imported, 8192)
    assert (out["op"], out["device"], out["dtype"]) == ("allreduce", "", "float32")
    with pytest.raises(UsageError, match="does not print a 'avg' column"):
        osu("table-only.txt", op="bw", world_size=2)


def test_osu_op_disagreeing_with_the_header_is_refused():
    with pytest.raises(UsageError, match=r"osu_allreduce-7.4.txt:2: --op allgather disagrees "
                                         r"with the file's 'Allreduce Latency Test'"):
        osu("osu_allreduce-7.4.txt", op="allgather", world_size=4)


def test_osu_malformed_rows_name_file_and_line():
    with pytest.raises(UsageError, match=r"truncated-row.txt:5: expected 5 fields \(size avg "
                                         r"min max iterations\), found 2"):
        osu("truncated-row.txt", world_size=2)
    text = (OSU / "osu_allreduce-7.4.txt").read_text().replace("3.20", "3,20")
    with pytest.raises(UsageError, match=r"a.txt:6: avg '3,20' is not a number"):
        parse("osu", text, "a.txt", world_size=4)


def test_osu_unsupported_benchmark_and_columns():
    with pytest.raises(UsageError, match=r"n.txt:1: commbench cannot import the OSU "
                                         r"'Non-blocking Allreduce Latency' test"):
        parse("osu", "# OSU MPI Non-blocking Allreduce Latency Test v7.4\n", "n.txt")
    with pytest.raises(UsageError, match=r"c.txt:1: unknown OSU column 'Overall\(us\)'"):
        parse("osu", "# Size           Overall(us)\n1   2.0\n", "c.txt")
    with pytest.raises(UsageError, match="no OSU results found"):
        parse("osu", "# OSU MPI Allreduce Latency Test v7.4\n", "e.txt")


def test_osu_log_with_a_collective_and_a_p2p_test():
    text = (OSU / "osu_allreduce-7.4.txt").read_text() + (OSU / "osu_latency-7.4.txt").read_text()
    imported = parse("osu", text, "both.log", world_size=4)
    assert {(r["op"], r["world_size"]) for r in imported.rows} == {("allreduce", 4), ("p2p", 2)}
