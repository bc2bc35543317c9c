"""importers/nccl_tests/: nccl-tests' text and JSON output -> results rows, every expected
number worked out by hand from the fixtures (tests/fixtures/nccl-tests, written in the printf
formats of nccl-tests' common.cu/util.cu), and alltoallv_perf (2.19) as alltoallv rows.

The fixtures are written from nccl-tests 2.19.6's own printers and formulas (src/alltoallv.cu,
src/util.cu; tests/fixtures/nccl-tests/README.md): v2.19-alltoallv.txt is the generated pattern
(spread 1) on 4 ranks, where -b 1K prints size 1008 (0 + 160 + 336 + 512: each rank's chunks
of 1024 B by distance, rounded down to 16 B) and count 64; v3-alltoallv-matrix.json a 4 x 4
traffic matrix whose busiest rank moves 3670016 B, printed with count 0. Expected numbers are
worked out by hand from those, not by commbench's code.
"""

import json
import math

import pytest

from commbench.commands.imports import run_import
from commbench.compare.runs import compare_runs
from commbench.core.errors import EXIT_USAGE, UsageError
from commbench.importers import parse, read
from commbench.results import load_run
from commbench.results.schema import COLUMNS, row_problem
from tests.unit.importers.readers import NCCL, gbps, nccl, osu, row

TEXT = "v2.19-alltoallv.txt"
MATRIX = "v3-alltoallv-matrix.json"


def test_the_generated_pattern_is_balanced_with_the_busiest_ranks_bytes_as_size():
    imported = nccl(TEXT)
    assert len(imported.rows) == 4  # 2 sizes x (out-of-place, in-place)
    small = row(imported, 1008)
    assert (small["op"], small["pattern"], small["world_size"], small["nnodes"]) == (
        "alltoallv", "dispatch", 4, 1)
    assert small["lat_us_p50"] == 25.0
    assert small["algbw_gbps"] == pytest.approx(0.04032)  # 1008 B / 25 us
    assert small["busbw_gbps"] == pytest.approx(0.03024)  # x (n-1)/n = 3/4, as nccl-tests
    # every rank sends and receives 1008 B: the busiest rank's bytes are the mean's
    assert (small["max_rank_bytes"], small["imbalance"], small["split_id"]) == (
        1008, 1.0, "unknown")
    assert (small["reduce_op"], small["root"], small["wrong"]) == ("", None, 0)
    big = row(imported, 1048560)
    assert big["busbw_gbps"] == pytest.approx(6.5535)  # 1048560 B / 120 us x 3/4
    inplace = row(imported, 1048560, inplace=True)
    assert inplace["validation"] == "off: N/A in nccl-tests"  # it checks no in-place alltoallv
    assert imported.meta["routing"] == "nccl-tests:generated"  # the text prints no environment
    # the trailer's average busbw (3.31979) agrees with the rows: no "world size?" note
    assert not any("Avg bus bandwidth" in note for note in imported.notes)
    assert any("split_id is 'unknown'" in note for note in imported.notes)


def test_a_traffic_matrix_keeps_the_busiest_rank_and_leaves_the_imbalance_unknown():
    imported = nccl(MATRIX)
    assert len(imported.rows) == 2
    out = row(imported, 3670016)
    assert out["busbw_gbps"] == pytest.approx(7.86432)  # the file's bus_bw
    assert out["algbw_gbps"] == pytest.approx(10.48576)
    # the mean a rank sends needs the matrix file: not invented
    assert (out["max_rank_bytes"], out["imbalance"], out["split_id"]) == (
        3670016, 0.0, "unknown")
    assert out["rank_time"] == "max"  # -a 3, as alltoallv.cu advises
    assert imported.meta["routing"] == "nccl-tests:file:/data/traffic.txt"
    assert any("busiest rank's bytes" in note and "imbalance is 0" in note
               for note in imported.notes)


def _generated_json(spread: str | None) -> str:
    """The matrix file's run made a generated one: -b 4M on 4 ranks at spread 0.5 prints count
    262144 (the even 1 MiB a peer) and size 524288 + 873808 + 1223328 + 1572864 = 4194288 B."""
    document = json.loads((NCCL / MATRIX).read_text())
    document["env"] = ["PATH=/usr/bin"] + ([f"NCCL_TESTS_ALLTOALLV_SPREAD={spread}"]
                                           if spread is not None else [])
    document["results"][0].update(size=4194288, count=262144)
    return json.dumps(document)


@pytest.mark.parametrize("spread, routing", [("0.5", "nccl-tests:spread=0.5"),
                                             (None, "nccl-tests:spread=1"),
                                             ("7", "nccl-tests:spread=1")])  # it clamps to 1
def test_the_json_environment_names_the_generated_spread(spread, routing):
    imported = parse("nccl-tests", _generated_json(spread), "g.json")
    out = row(imported, 4194288)  # 16 B under count x 4 B x 4 ranks: the rounded chunks
    assert (out["imbalance"], out["split_id"]) == (1.0, "unknown")
    assert imported.meta["routing"] == routing


def test_a_size_that_is_not_the_generated_patterns_is_refused():
    text = (NCCL / TEXT).read_text().replace("        1008            64",
                                             "        1008           128")
    with pytest.raises(UsageError, match=r"a.txt:14: size 1008 is not count 128 x 4 B x 4 "
                                         r"ranks less under 16 B a peer"):
        parse("nccl-tests", text, "a.txt")


def test_without_rank_lines_the_sizes_give_the_world():
    text = "\n".join(line for line in (NCCL / TEXT).read_text().splitlines()
                     if "Rank " not in line)
    assert {r["world_size"] for r in parse("nccl-tests", text, "a.txt").rows} == {4}
    with pytest.raises(UsageError, match="pass --world-size"):
        parse("nccl-tests", json.dumps({**json.loads((NCCL / MATRIX).read_text()),
                                        "config": {"iterations": 20}}), "m.json")


def test_an_old_file_without_the_program_line_takes_op_alltoallv():
    text = "\n".join(line for line in (NCCL / TEXT).read_text().splitlines()
                     if "Collective test" not in line)
    assert {r["op"] for r in parse("nccl-tests", text, "a.txt", op="alltoallv").rows} == {
        "alltoallv"}


@pytest.mark.parametrize("name, imbalance", [(TEXT, "1.00"), (MATRIX, "-")])
def test_import_then_compare_show_and_history(name, imbalance, tmp_path, capsys):
    from commbench.history.ingest import read_run_folder
    from commbench.output.console import table_groups
    from commbench.results import rows_frame

    assert run_import("nccl-tests", str(NCCL / name), None, str(tmp_path), "a2av", False,
                      None) == 0
    run = load_run(tmp_path / "a2av", strict=True)
    assert {r["split_id"] for r in run.rows} == {"unknown"}
    result = compare_runs([run, run], "lat_us_p50", 0.05, None)
    assert set(result.frame["verdict"]) == {"same"} and result.apart == []
    title, headers, rows = table_groups(rows_frame(run.rows))[0]
    assert title.startswith("alltoallv (dispatch)")
    at = headers.index("imbalance")
    assert headers[at - 1] == "busbw (GB/s)" and {r[at] for r in rows} == {imbalance}
    points = read_run_folder(tmp_path / "a2av").points
    assert {(p.op, p.split_id) for p in points} == {("alltoallv/dispatch", "unknown")}
    assert {p.routing for p in points} == {read("nccl-tests", str(NCCL / name)).meta["routing"]}


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


def test_unknown_op_names():
    with pytest.raises(UsageError, match="unknown --op 'allreduc'"):
        nccl("v2.13-allreduce.txt", op="allreduc")
    with pytest.raises(UsageError, match="unknown --op 'ring'"):
        osu("table-only.txt", op="ring", world_size=2)
