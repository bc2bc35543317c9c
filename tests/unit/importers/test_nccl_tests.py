"""nccl-tests' alltoallv_perf (2.19) imported as commbench's alltoallv rows.

The fixtures are written from nccl-tests 2.19.6's own printers and formulas (src/alltoallv.cu,
src/util.cu; tests/fixtures/nccl-tests/README.md): v2.19-alltoallv.txt is the generated pattern
(spread 1) on 4 ranks, where -b 1K prints size 1008 (0 + 160 + 336 + 512: each rank's chunks
of 1024 B by distance, rounded down to 16 B) and count 64; v3-alltoallv-matrix.json a 4 x 4
traffic matrix whose busiest rank moves 3670016 B, printed with count 0. Expected numbers are
worked out by hand from those, not by commbench's code.
"""

import json

import pytest

from commbench.commands.imports import run_import
from commbench.compare.runs import compare_runs
from commbench.core.errors import UsageError
from commbench.importers import parse, read
from commbench.results import load_run
from tests.unit.importers.test_rows import NCCL, nccl, row

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
