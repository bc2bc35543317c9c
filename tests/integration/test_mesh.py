"""Measuring the groups of a device mesh: real gloo ranks, every op on each dimension with its
faults caught, split communicators equal to their mesh, a slow group named, groups that run at
once inside one timed block."""

import json

import pytest

from tests.conftest import commbench, read_rows

pytestmark = pytest.mark.integration

OPS = "allreduce,reduce-scatter,allgather,alltoall,broadcast,reduce,gather,scatter,barrier,p2p"
CLEAN, BROKEN = 1024, 4096  # float32 sizes divisible by 2 ranks per group


def json_rows(done):
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.core
def test_every_op_on_every_dimension_is_checked_and_faults_are_caught(tmp_path):
    done, run_dir = commbench(
        ["run", "--ops", OPS, "--pattern", "pingpong,ring", "--mesh", "dp=2,tp=2", "--dim",
         "all", "--per-group", "--sizes", f"{CLEAN},{BROKEN}", "-n", "3", "-w", "0",
         "--nproc", "4", "--root", "1", "--op", "max", "--json", "--quiet"],
        tmp_path, timeout=240, env={"COMMBENCH_FAULT": f"shift:*:*:{BROKEN}"},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    rows = json_rows(done)
    assert rows == [{k: v for k, v in r.items() if k != "samples_us"} for r in read_rows(run_dir)]
    combined = [r for r in rows if r["group"] is None]
    per_group = [r for r in rows if r["group"] is not None]
    for dim, groups in (("dp", ["0,2", "1,3"]), ("tp", ["0,1", "2,3"])):
        mine = [r for r in combined if r["dim"] == dim]
        assert {(r["op"], r["pattern"]) for r in mine} == {
            (op.replace("-", "_"), p) for op in OPS.split(",")
            for p in (("pingpong", "ring") if op == "p2p" else ("",))}
        for row in mine:
            assert (row["mesh"], row["group_size"], row["groups"]) == ("dp=2,tp=2", 2, 2)
            assert row["world_size"] == 4 and row["span"] == "intra-node"
            if row["op"] == "barrier":
                continue
            assert row["validation"] == "full", row
            if row["size_bytes"] == CLEAN:
                assert row["wrong"] == 0, row
            else:
                assert row["wrong"] > 0, (dim, row["op"], row["pattern"])
            # busbw uses the group size: allreduce 2(n-1)/n with n = 2 is 1
            if row["op"] == "allreduce":
                assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])
        # The groups ran at once, in the same timed blocks: each per-group row comes from the
        # measurement of its combined row (same samples and iterations), one per group.
        for row in mine:
            twins = [g for g in per_group if g["dim"] == dim and g["op"] == row["op"]
                     and g["pattern"] == row["pattern"] and g["size_bytes"] == row["size_bytes"]]
            assert sorted(g["group_ranks"] for g in twins) == groups
            assert {(g["samples"], g["iters"]) for g in twins} == {(row["samples"],
                                                                     row["iters"])}


def group_ranks(done, dim=None) -> dict:
    rows = json_rows(done)
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["group"]: r["group_ranks"] for r in rows
            if r["group"] is not None and dim in (None, r["dim"])}


SPLIT_ARGS = ["allreduce", "--sizes", "64", "-n", "2", "-w", "0", "--nproc", "4", "--per-group",
              "--json", "--quiet"]


@pytest.fixture(scope="module")
def mesh_done(tmp_path_factory):
    """The mesh the splits must equal, both of its dimensions in one launch."""
    done, _ = commbench([*SPLIT_ARGS, "--mesh", "mod=2,div=2", "--dim", "all"],
                        tmp_path_factory.mktemp("mesh"))
    return done


@pytest.mark.parametrize(("split", "dim", "expected"),
                         [("mod:2", "mod", {0: "0,2", 1: "1,3"}),
                          ("div:2", "div", {0: "0,1", 1: "2,3"}),
                          ("and:0x1", "mod", {0: "0,2", 1: "1,3"})])
def test_split_communicators_are_the_matching_mesh(tmp_path, mesh_done, split, dim, expected):
    split_done, _ = commbench([*SPLIT_ARGS, "--split", split], tmp_path / "split")
    assert group_ranks(split_done) == group_ranks(mesh_done, dim) == expected
    (row,) = [r for r in json_rows(split_done) if r["group"] is None]
    assert (row["mesh"], row["dim"]) == ("mod=2,div=2", dim)


def test_a_slow_group_is_named_with_its_ranks_and_hosts(tmp_path):
    done, run_dir = commbench(
        ["allreduce", "--mesh", "dp=2,tp=2", "--dim", "tp", "--per-group", "--sizes", "1K,4K",
         "-n", "20", "-w", "1", "--nproc", "4", "--quiet"],
        tmp_path, env={"COMMBENCH_FAULT": "delay=0.004:2,3"},  # group 1 of tp: ranks 2 and 3
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "group 1 (ranks 2,3 on " in done.stderr and "slow link or node" in done.stderr
    assert "group 0 (ranks" not in done.stderr
    summary = (run_dir / "summary.md").read_text()
    assert "**Slow groups**" in summary and "group 1 (ranks 2,3" in summary
