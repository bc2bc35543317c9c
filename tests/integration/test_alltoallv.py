"""alltoallv on real gloo ranks: rows, imbalance, the split matrix file, and validation proven
by breaking the collective (a no-op, a misplaced element, a chunk from the wrong source, wrong
split sizes), then the same op along one dimension of a mesh, under compare, model and report.

The routing is hot:1:0.6 over 4 experts, top-1, 64 tokens a rank: every rank sends 64 token
copies, so at 256 B (64 float32 elements) a rank the split matrix is the drawn matrix itself,
and at 256·m B it is m times it. The expected imbalance is then read off the saved matrix
with plain sums (the busiest row or column over 64), not with commbench's apportionment.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import commbench, read_rows

pytestmark = pytest.mark.integration

ROUTING = ["--routing", "hot:1:0.6", "--experts", "4", "--topk", "1", "--tokens", "64"]
FAULTS = {512: "noop", 1024: "shift", 2048: "neighbour", 4096: "splits"}  # 256 B stays clean
QUICK = ["-n", "2", "-w", "0", "--json", "--quiet"]


def saved_matrix(run_dir: Path, split_id: str) -> list[list[int]]:
    text = (run_dir / f"splits-{split_id}.csv").read_text()
    return [[int(v) for v in line.split(",")] for line in text.splitlines()
            if line and not line.startswith("#")]


def busiest(matrix: list[list[int]]) -> int:
    return max([sum(row) for row in matrix] + [sum(col) for col in zip(*matrix, strict=True)])


@pytest.mark.capability
def test_alltoallv_on_four_gloo_ranks(tmp_path):
    sizes = ",".join(str(s) for s in (256, *FAULTS))
    faults = ";".join(f"{kind}:*:alltoallv:{size}" for size, kind in FAULTS.items())
    done, run_dir = commbench(
        ["alltoallv", "--nproc", "4", *ROUTING, "--combine", "--sizes", sizes, *QUICK],
        tmp_path / "faults", timeout=240, env={"COMMBENCH_FAULT": faults})
    assert done.returncode == 1, done.stderr[-3000:]  # wrong elements were found
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted((r["pattern"], r["size_bytes"]) for r in rows) == sorted(
        (p, s) for p in ("dispatch", "combine") for s in (256, *FAULTS))
    ids = {r["split_id"] for r in rows}
    assert len(ids) == 1
    matrix = saved_matrix(run_dir, ids.pop())
    assert [sum(row) for row in matrix] == [64] * 4  # 64 tokens, top-1, from every rank
    assert matrix[0][1] > 0 and matrix[1][0] > 0  # the splits fault has elements to move
    most = busiest(matrix)
    assert most > 64  # the hot expert's rank receives more than the mean
    for row in rows:
        m = row["size_bytes"] // 256
        assert row["validation"] == "full" and row["world_size"] == 4, row
        assert row["max_rank_bytes"] == most * 4 * m
        assert row["imbalance"] == pytest.approx(most / 64, abs=1e-6)
        # nccl-tests 2.19: busbw = busiest rank's bytes / time x (n-1)/n
        assert row["busbw_gbps"] == pytest.approx(
            row["max_rank_bytes"] / (row["lat_us_p50"] * 1e3) * 3 / 4, rel=1e-6)
        if row["size_bytes"] == 256:
            assert row["wrong"] == 0, row
        else:
            assert row["wrong"] > 0, (FAULTS[row["size_bytes"]], row["pattern"])

    # Along the ep dimension of a dp x ep mesh: two groups of 2 at once, a row per group too.
    done, mesh_dir = commbench(
        ["alltoallv", "--nproc", "4", *ROUTING, "--mesh", "dp=2,ep=2", "--dim", "ep",
         "--per-group", "--sizes", "256,512,1K,2K", "--name", "ep", *QUICK],
        tmp_path / "mesh", timeout=240, check_rc=0)
    rows = read_rows(mesh_dir)
    assert len(rows) == 4 * 3  # 4 sizes: the combined row and one per group
    assert {(r["dim"], r["group_size"], r["wrong"]) for r in rows} == {("ep", 2, 0)}
    assert {r["group"] for r in rows} == {None, 0, 1}
    matrix = saved_matrix(mesh_dir, rows[0]["split_id"])
    assert len(matrix) == 2 and [sum(row) for row in matrix] == [64, 64]
    for row in rows:
        assert row["imbalance"] == pytest.approx(busiest(matrix) / 64, abs=1e-6)

    # The offline commands read these rows like any others.
    for args in (["compare", str(mesh_dir), str(mesh_dir)], ["model", str(mesh_dir)],
                 ["report", str(mesh_dir), "--out", str(tmp_path / "report")]):
        done = subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (args[0], done.stderr[-2000:])
    assert "alltoallv (dispatch)" in (tmp_path / "report" / "report.md").read_text()
    model = (mesh_dir / "model.csv").read_text()
    assert "alltoallv" in model and "dispatch" in model
