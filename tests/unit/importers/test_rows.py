"""Importers: nccl-tests and OSU output -> results rows, checked against hand-computed values.

The fixtures under tests/fixtures/nccl-tests and tests/fixtures/osu are small files written in
the tools' documented formats (the printf formats of nccl-tests' common.cu/util.cu and OSU's
osu_util*.c); every expected number below is worked out from the numbers in them.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.commands.imports import run_import
from commbench.compare.runs import compare_runs
from commbench.core.errors import EXIT_USAGE, UsageError
from commbench.importers import KINDS, parse, read
from commbench.results import load_run
from commbench.results.schema import COLUMNS, row_problem

FIXTURES = Path(__file__).parents[2] / "fixtures"
NCCL = FIXTURES / "nccl-tests"
OSU = FIXTURES / "osu"


def nccl(name, **kw):
    return read("nccl-tests", str(NCCL / name), **kw)


def osu(name, **kw):
    return read("osu", str(OSU / name), **kw)


def row(imported, size, inplace=False, **match):
    found = [r for r in imported.rows if r["size_bytes"] == size and r["inplace"] == inplace
             and all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (size, inplace, found)
    return found[0]


def gbps(size, time_us):
    return size / (time_us * 1e-6) / 1e9


# ---- nccl-tests text ---------------------------------------------------------------------------


def test_nccl_2_13_allreduce_both_halves_with_busbw_at_four_ranks():
    imported = nccl("v2.13-allreduce.txt", op="allreduce")
    assert len(imported.rows) == 8  # 4 sizes x (out-of-place, in-place)
    out = row(imported, 1048576)
    assert out["lat_us_p50"] == out["lat_us_mean"] == 50.0  # nccl-tests' average
    # What the file does not print is unknown, not the average again: no p99, no spread; the
    # interval is the point itself (compare: no spread known on this side; tables show '-').
    for unknown in ("lat_us_min", "lat_us_max", "lat_us_p99", "lat_us_std", "skew_pct"):
        assert math.isnan(out[unknown]), unknown
    assert out["lat_us_ci_lo"] == out["lat_us_ci_hi"] == 50.0
    assert out["algbw_gbps"] == pytest.approx(20.97152)  # 1 MiB / 50 us
    assert out["busbw_gbps"] == pytest.approx(31.45728)  # x 2(n-1)/n = 1.5 at n = 4
    assert (out["count"], out["dtype"], out["reduce_op"]) == (262144, "float32", "sum")
    assert (out["world_size"], out["group_size"], out["nnodes"]) == (4, 4, 1)
    assert (out["samples"], out["iters"], out["wrong"]) == (1, 20, 0)
    assert (out["source"], out["rank_time"], out["validation"]) == (
        "nccl-tests", "avg", "nccl-tests -c 1: #wrong as the file printed it")
    assert (out["tail"], out["backend"], out["device"]) == ("block", "nccl", "cuda")
    inplace = row(imported, 1048576, inplace=True)
    assert inplace["lat_us_p50"] == 49.0
    assert inplace["busbw_gbps"] == pytest.approx(1048576 / 49e-6 / 1e9 * 1.5)
    assert row(imported, 16777216)["lat_us_p50"] == 400.0
    assert imported.meta["versions"] == {"nccl-tests": None, "nccl": "2.13.4"}  # NCCL INFO log
    assert imported.meta["hosts"] == ["node01"]


def test_nccl_file_without_program_name_needs_op():
    with pytest.raises(UsageError, match=r"prints no program name\): pass --op"):
        nccl("v2.13-allreduce.txt")


def test_nccl_op_disagreeing_with_the_program_line_is_refused():
    with pytest.raises(UsageError, match=r"timestamps.txt:2: --op allreduce disagrees .* "
                                         r"reduce_scatter_perf"):
        nccl("v2.17-reduce_scatter-timestamps.txt", op="allreduce")


def test_nccl_unchecked_allgather_8_ranks_on_2_nodes():
    imported = nccl("v2.15-allgather-nocheck.txt", op="allgather")
    assert len(imported.rows) == 6  # the 0-byte row is left out
    assert any("0 bytes" in note for note in imported.notes)
    out = row(imported, 1048576)
    assert out["validation"] == "off: N/A in nccl-tests" and out["wrong"] == 0
    assert out["count"] == 262144  # the gathered output, not the file's per-rank 32768
    assert out["busbw_gbps"] == pytest.approx(26.2144 * 7 / 8)
    assert (out["world_size"], out["nnodes"], out["span"]) == (8, 2, "inter-node")
    assert row(imported, 16777216, inplace=True)["lat_us_p50"] == 490.0
    assert imported.meta["nnodes"] == 2


def test_nccl_size_and_count_catch_a_wrong_op():
    # allgather's size is count x 4 B x 8 ranks: read as allreduce it contradicts itself.
    with pytest.raises(UsageError, match=r"allgather-nocheck.txt:17: size 1024 is not count 32"):
        nccl("v2.15-allgather-nocheck.txt", op="allreduce")


def test_nccl_split_groups_and_repeated_cycles():
    imported = nccl("v2.16-broadcast-split-cycles.txt")
    assert len(imported.rows) == 4
    out = row(imported, 4096)
    assert (out["world_size"], out["group_size"], out["groups"]) == (4, 2, 2)
    assert out["root"] == 0 and out["op"] == "broadcast" and out["reduce_op"] == ""
    # -N 2 printed each size twice: 8 us and 10 us are two samples of one row.
    assert out["samples"] == 2 and out["samples_us"] == [8.0, 10.0]
    assert (out["lat_us_p50"], out["lat_us_min"], out["lat_us_max"]) == (9.0, 8.0, 10.0)
    assert out["algbw_gbps"] == out["busbw_gbps"] == pytest.approx(gbps(4096, 9.0))
    assert row(imported, 1048576, inplace=True)["lat_us_p50"] == 25.0  # (24 + 26) / 2
    assert any("printed more than once" in note for note in imported.notes)


def test_nccl_2_17_timestamps_bfloat16_two_ranks():
    imported = nccl("v2.17-reduce_scatter-timestamps.txt")
    out = row(imported, 1048576)
    assert (out["op"], out["dtype"], out["count"]) == ("reduce_scatter", "bfloat16", 524288)
    assert out["busbw_gbps"] == pytest.approx(gbps(1048576, 30.0) * 0.5)  # (n-1)/n at n = 2
    assert row(imported, 1024, inplace=True)["lat_us_p50"] == 14.5
    assert imported.meta["versions"] == {"nccl-tests": "2.17.7", "nccl": "2.28.3"}
    assert imported.meta["tests"][0]["avg_busbw_gbps"] == 8.90615
    assert imported.notes == []  # the trailer's average agrees with the rows


def test_nccl_sendrecv_cputime_is_p2p_ring():
    imported = nccl("v2.18-sendrecv-cputime.txt")
    out = row(imported, 4194304)
    assert (out["op"], out["pattern"], out["reduce_op"]) == ("p2p", "ring", "")
    assert out["timer"] == "host-cputime" and out["lat_us_p50"] == 200.0
    assert out["busbw_gbps"] == pytest.approx(20.97152)  # factor 1
    assert row(imported, 65536, inplace=True)["validation"] == "off: N/A in nccl-tests"
    assert (out["nnodes"], out["span"]) == (2, "inter-node")
    assert any("cputime" in note for note in imported.notes)
    assert imported.meta["versions"]["nccl"] == "2.28.5"


def test_nccl_per_iteration_columns_fill_the_tail():
    imported = nccl("v2.19-alltoall-periter.txt")
    out = row(imported, 1024)
    assert out["tail"] == "call" and out["lat_us_p50"] == 12.0
    assert (out["lat_us_min"], out["lat_us_max"], out["lat_us_p99"]) == (10.5, 20.0, 19.0)
    assert out["lat_us_std"] == pytest.approx(0.96)  # i_cv% 8 of 12 us
    big = row(imported, 1048576)
    assert big["busbw_gbps"] == pytest.approx(13.1072)  # 1 MiB / 60 us x 3/4
    assert big["count"] == 262144
    assert row(imported, 1048576, inplace=True)["validation"] == "off: N/A in nccl-tests"
    assert imported.meta["versions"]["nccl-tests"] == "2.19.6"


@pytest.mark.parametrize("name, op, rows", [
    ("v2.13-allreduce.txt", "allreduce", 8),  # 2.13.0-2.13.3: no Group, '#wrong' at %6s
    ("v2.15-allgather-nocheck.txt", "allgather", 6),  # Group + PCI domain, N/A
    ("v2.16-broadcast-split-cycles.txt", None, 4),  # 'Collective test starting'
    ("v2.17-reduce_scatter-timestamps.txt", None, 4),  # version line, -S timestamp column
    ("v2.18-sendrecv-cputime.txt", None, 4),  # cputime column, unalign in the config line
    ("v2.19-alltoall-periter.txt", None, 4),  # -I: i_min i_max i_p99 i_cv%
])
def test_nccl_every_header_variant(name, op, rows):
    imported = nccl(name, op=op)
    assert len(imported.rows) == rows
    for record in imported.rows:
        assert row_problem(record) == ""
        assert set(COLUMNS) <= set(record)


def test_nccl_several_runs_in_one_log():
    text = (NCCL / "v2.17-reduce_scatter-timestamps.txt").read_text() + (
        NCCL / "v2.18-sendrecv-cputime.txt").read_text()
    imported = parse("nccl-tests", text, "both.log")
    assert {r["op"] for r in imported.rows} == {"reduce_scatter", "p2p"}
    assert len(imported.rows) == 8
    assert [t["program"] for t in imported.meta["tests"]] == ["reduce_scatter_perf",
                                                              "sendrecv_perf"]


def _without_rank_lines(name):
    return "\n".join(line for line in (NCCL / name).read_text().splitlines()
                     if "Rank" not in line)


def test_nccl_world_size_from_option_checked_against_the_trailer():
    text = _without_rank_lines("v2.13-allreduce.txt")
    with pytest.raises(UsageError, match="pass --world-size"):
        parse("nccl-tests", text, "ar.txt", op="allreduce")
    right = parse("nccl-tests", text, "ar.txt", op="allreduce", world_size=4)
    assert right.notes == [] and right.rows[0]["world_size"] == 4
    wrong = parse("nccl-tests", text, "ar.txt", op="allreduce", world_size=8)
    assert any("is the world size right?" in note for note in wrong.notes)


def test_nccl_world_size_from_size_and_count():
    imported = parse("nccl-tests", _without_rank_lines("v2.15-allgather-nocheck.txt"),
                     "ag.txt", op="allgather")
    assert {r["world_size"] for r in imported.rows} == {8}


def test_nccl_world_size_option_contradicting_the_rank_lines():
    with pytest.raises(UsageError, match="lists 4 ranks, --world-size says 3"):
        nccl("v2.13-allreduce.txt", op="allreduce", world_size=3)


def test_nccl_malformed_row_names_file_and_line():
    with pytest.raises(UsageError) as error:
        nccl("malformed-row.txt")
    assert str(error.value).endswith("malformed-row.txt:12: expected 15 fields (the column "
                                     "header's), found 9")
    assert error.value.exit_code == EXIT_USAGE


def test_nccl_bad_number_and_row_before_header():
    header = (NCCL / "v2.13-allreduce.txt").read_text().splitlines()
    bad = header[:16] + [header[16].replace("50.00", "5O.00")]
    with pytest.raises(UsageError, match=r"x.txt:17: time '5O.00' is not a number"):
        parse("nccl-tests", "\n".join(bad), "x.txt", op="allreduce")
    with pytest.raises(UsageError, match=r"y.txt:1: a results row before the column header"):
        parse("nccl-tests", header[16], "y.txt", op="allreduce")
    with pytest.raises(UsageError, match="no nccl-tests results found"):
        parse("nccl-tests", "hello\n", "z.txt")


def test_nccl_unsupported_binary_and_unknown_dtype():
    text = (NCCL / "v2.19-alltoall-periter.txt").read_text()
    with pytest.raises(UsageError, match=r":2: commbench has no op for the nccl-tests binary "
                                         r"'hypercube_perf'"):
        parse("nccl-tests", text.replace("alltoall_perf", "hypercube_perf"), "h.txt")
    with pytest.raises(UsageError, match=r"d.txt:15: unknown nccl-tests data type 'flaot'"):
        parse("nccl-tests", text.replace("   float", "   flaot"), "d.txt")


# ---- nccl-tests JSON ---------------------------------------------------------------------------


def test_json_v1_with_the_misspelled_keys():
    imported = nccl("v1-allreduce.json")
    assert len(imported.rows) == 4
    out = row(imported, 1048576)
    assert out["lat_us_p50"] == 40.0 and out["busbw_gbps"] == pytest.approx(26.2144)
    assert out["root"] is None and out["iters"] == 20
    assert out["validation"].startswith("nccl-tests -c 1")
    assert row(imported, 1024, inplace=True)["lat_us_p50"] == 9.5
    assert imported.meta["json_version"] == 1
    assert imported.meta["versions"]["nccl"] == "2.27.3"
    assert imported.meta["tests"][0]["avg_busbw_gbps"] == pytest.approx(13.504686)
    assert imported.meta["hosts"] == ["dgx-a"]


def test_json_root_is_a_padded_string():
    document = json.loads((NCCL / "v1-allreduce.json").read_text())
    document["args"][0] = "./build/broadcast_perf"
    for result in document["results"]:
        result.update(redop="none", root="     1")
    imported = parse("nccl-tests", json.dumps(document), "bc.json")
    assert {r["root"] for r in imported.rows} == {1}
    assert {r["op"] for r in imported.rows} == {"broadcast"}


def test_json_v2_per_iteration_strings_for_booleans_and_nan():
    imported = nccl("v2-allgather-periter.json")
    out = row(imported, 4096)
    assert out["rank_time"] == "max"  # -a 3 in the recorded args
    assert out["validation"] == "off: N/A in nccl-tests"  # nwrong null (-c 0)
    assert out["tail"] == "call"
    assert (out["lat_us_p50"], out["lat_us_min"], out["lat_us_max"]) == (16.0, 15.0, 30.0)
    assert out["lat_us_p99"] == 30.0 and out["lat_us_std"] == pytest.approx(5.418487)
    # p10 and p90 of times_us [15, 16, 17, 18, 30] (linear interpolation)
    assert out["lat_us_p10"] == pytest.approx(15.4) and out["lat_us_p90"] == pytest.approx(25.2)
    assert out["busbw_gbps"] == pytest.approx(0.192)  # 4 KiB / 16 us x 3/4
    inplace = row(imported, 4096, inplace=True)
    assert math.isnan(inplace["lat_us_std"])  # stdev_us "nan": unknown
    assert imported.meta["blocking"] is False  # "false"
    assert imported.meta["json_version"] == 2


def test_json_v3_skipped_iterations_and_bare_infinity():
    imported = nccl("v3-alltoall-inf.json")
    assert len(imported.rows) == 3  # the in-place half timed at 0 us is left out
    assert any("results[0]: the in-place time" in note for note in imported.notes)
    out = row(imported, 65536)
    # the first of times_us [50, 20, 21, 22, 23] is skipped (-K 1): p10/p90 of 20..23
    assert out["lat_us_p10"] == pytest.approx(20.3) and out["lat_us_p90"] == pytest.approx(22.7)
    assert out["world_size"] == 8 and out["busbw_gbps"] == pytest.approx(gbps(65536, 22) * 7 / 8)
    assert imported.meta["json_version"] == 3
    assert imported.meta["tests"][0]["avg_busbw_gbps"] == float("inf")


def test_json_per_iteration_times_become_samples_and_per_call_columns():
    # 4 processes (-g 1), 9 iterations, -K 1. After the skipped first one, the 1 KiB out-of-place
    # times_us are 10.3 31.0 11.0 10.4 29.5 10.5 10.4 10.3: median 10.45, so 31.0 and 29.5
    # are the spikes (over 15.7); process 2 has the longest time of both of those iterations,
    # by 20 us, and no process stands out by half a median (5.2 us) anywhere else.
    imported = nccl("v3-allreduce-periter-procs.json")
    out = row(imported, 1024)
    assert out["samples_us"] == [10.3, 31.0, 11.0, 10.4, 29.5, 10.5, 10.4, 10.3]
    assert out["samples"] == 8 and out["calls"] == 8 and out["tail"] == "call"
    assert out["spikes"] == 2 and out["stragglers"] == "2:2"
    assert out["lat_us_p95"] == 31.0 and out["cv_pct"] == pytest.approx(55.558959)  # as printed
    assert out["lat_us_p50"] == 11.49  # the printed time stays the headline
    large = row(imported, 1048576, inplace=True)
    assert large["stragglers"] == "2:2" and large["calls"] == 8


def test_json_per_process_times_of_the_wrong_length_name_the_entry():
    document = json.loads((NCCL / "v3-allreduce-periter-procs.json").read_text())
    document["results"][0]["out_of_place_per_iter"]["per_process_max_times_us"][1].pop()
    with pytest.raises(UsageError, match=r"p.json: results\[0\].out_of_place_per_iter"
                                         r".per_process_max_times_us\[1\] is not a list of 9"):
        parse("nccl-tests", json.dumps(document), "p.json")


def test_json_cputime_and_a_newer_format():
    document = json.loads((NCCL / "v1-allreduce.json").read_text())
    document["version"] = 4
    for result in document["results"]:
        for half in ("out_of_place", "in_place"):
            result[half]["cpu_time"] = result[half].pop("time")
    imported = parse("nccl-tests", json.dumps(document), "c.json")
    assert {r["timer"] for r in imported.rows} == {"host-cputime"}
    assert row(imported, 1048576)["lat_us_p50"] == 40.0
    assert any("-C 1 cputime" in note for note in imported.notes)
    assert any("JSON format 4 is newer" in note for note in imported.notes)


def test_json_cut_short_names_the_line():
    with pytest.raises(UsageError, match=r"truncated.json:1: not valid JSON .* cut short"):
        nccl("truncated.json")


def test_json_entry_without_a_size():
    document = json.loads((NCCL / "v1-allreduce.json").read_text())
    del document["results"][1]["size"]
    with pytest.raises(UsageError, match=r"x.json: results\[1\] has no 'size'"):
        parse("nccl-tests", json.dumps(document), "x.json")


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


# ---- the command: folders, round trip ----------------------------------------------------------

ROUND_TRIP = [
    ("nccl-tests", NCCL / "v2.13-allreduce.txt", "allreduce", None),
    ("nccl-tests", NCCL / "v2.15-allgather-nocheck.txt", "allgather", None),
    ("nccl-tests", NCCL / "v2.16-broadcast-split-cycles.txt", None, None),
    ("nccl-tests", NCCL / "v2.17-reduce_scatter-timestamps.txt", None, None),
    ("nccl-tests", NCCL / "v2.18-sendrecv-cputime.txt", None, None),
    ("nccl-tests", NCCL / "v2.19-alltoall-periter.txt", None, None),
    ("nccl-tests", NCCL / "v1-allreduce.json", None, None),
    ("nccl-tests", NCCL / "v2-allgather-periter.json", None, None),
    ("nccl-tests", NCCL / "v3-alltoall-inf.json", None, None),
    ("nccl-tests", NCCL / "v3-allreduce-periter-procs.json", None, None),
    ("osu", OSU / "osu_allreduce-7.4.txt", None, 4),
    ("osu", OSU / "osu_allgather-full-7.4.txt", None, None),
    ("osu", OSU / "osu_alltoall-cuda-5.3.txt", None, 4),
    ("osu", OSU / "osu_reduce_scatter-validate-6.1.txt", None, 4),
    ("osu", OSU / "osu_bcast-tails-7.4.txt", None, 8),
    ("osu", OSU / "osu_barrier-7.4.txt", None, 4),
    ("osu", OSU / "osu_latency-7.4.txt", None, None),
    ("osu", OSU / "osu_bw-cuda-5.3.txt", None, None),
    ("osu", OSU / "osu_bibw-tails-7.4.txt", None, None),
    ("osu", OSU / "table-only.txt", "allreduce", 2),
]


@pytest.mark.parametrize("kind, path, op, world", ROUND_TRIP,
                         ids=[p.name for _, p, _, _ in ROUND_TRIP])
def test_import_then_load_and_compare_pairs_every_row(kind, path, op, world, tmp_path, capsys):
    code = run_import(kind, str(path), op, str(tmp_path), "imported", False, world)
    assert code == 0
    folder = tmp_path / "imported"
    assert capsys.readouterr().out.strip() == (
        f"imported {len(read(kind, str(path), op=op, world_size=world).rows)} rows from "
        f"{path} into {folder}")
    run = load_run(folder, strict=True)
    assert run.meta["source"] == kind and run.meta["status"] == "complete"
    assert run.meta["planned_rows"] == len(run.rows)
    assert {r["source"] for r in run.rows} == {kind}
    result = compare_runs([run, run], "lat_us_p50", 0.05, None)
    frame = result.frame
    assert len(frame) == len(run.rows) and result.apart == []
    assert result.warnings == ["imported is compared with itself: every row can only be the same"]
    assert set(frame["verdict"]) == {"same"}
    for name in ("results.csv", "summary.md", "latency.png"):
        assert (folder / name).exists(), name
    # A barrier moves no data: no bandwidth plot, rather than empty axes.
    assert (folder / "bandwidth.png").exists() == any(r["size_bytes"] for r in run.rows)


def test_import_refuses_a_taken_name_unless_forced(tmp_path, capsys):
    args = ("nccl-tests", str(NCCL / "v1-allreduce.json"), None, str(tmp_path), "ar")
    run_import(*args, False, None)
    with pytest.raises(UsageError, match="already exists"):
        run_import(*args, False, None)
    assert run_import(*args, True, None) == 0
    assert run_import("nccl-tests", str(NCCL / "v1-allreduce.json"), None, str(tmp_path), None,
                      False, None) == 0
    generated = [p.name for p in tmp_path.iterdir() if p.name != "ar"]
    assert len(generated) == 1 and generated[0].endswith("-nccl-tests-v1-allreduce")


def test_a_bad_file_leaves_no_folder(tmp_path):
    with pytest.raises(UsageError, match="malformed-row.txt:12"):
        run_import("nccl-tests", str(NCCL / "malformed-row.txt"), None, str(tmp_path), "bad",
                   False, None)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(UsageError, match="cannot read"):
        run_import("osu", str(tmp_path / "missing.txt"), None, str(tmp_path), "x", False, 2)
    with pytest.raises(UsageError, match="unknown import kind 'perftest'"):
        read("perftest", str(NCCL / "v1-allreduce.json"))
    assert KINDS == ("nccl-tests", "osu")


def test_unknown_op_names():
    with pytest.raises(UsageError, match="unknown --op 'allreduc'"):
        nccl("v2.13-allreduce.txt", op="allreduc")
    with pytest.raises(UsageError, match="unknown --op 'ring'"):
        osu("table-only.txt", op="ring", world_size=2)


def test_importers_do_not_import_torch():
    code = ("import sys; import commbench.importers, commbench.commands.imports; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_model_keeps_in_place_and_out_of_place_apart_as_compare_does():
    """An nccl-tests import holds both column groups; one fit over both merged two curves
    (the in-place one here is 2 us faster at 1M) that compare keeps apart."""
    from commbench.model.fit import measured_curves

    imported = nccl("v2.13-allreduce.txt", op="allreduce")
    curves = measured_curves(imported.rows)
    assert sorted(key.variant for key in curves) == ["in-place", "out-of-place"]
    by_variant = {key.variant: dict(zip(*curves[key], strict=True)) for key in curves}
    assert by_variant["out-of-place"][1048576] == 50.0
    assert by_variant["in-place"][1048576] == 49.0
    assert all(key.describe().endswith(key.variant) for key in curves)
