"""Real gloo process groups (2 and 3 ranks): every collective and p2p pattern, checked."""

import csv
import json
import os

import pytest

from commbench import collectives
from commbench.core.sizes import format_size
from commbench.results.schema import COLUMNS
from commbench.specs.measure import parse_ops
from tests.conftest import read_meta, read_rows

pytestmark = pytest.mark.integration
SIZES = [8, 1024, 65536]


@pytest.fixture(scope="module", params=[2, pytest.param(3, marks=pytest.mark.core)])
def sweep(request, tmp_path_factory):
    from tests.conftest import commbench

    world = request.param
    # 2 ranks: the user's OMP_NUM_THREADS is kept; 3 ranks: commbench's own 1 (unless set)
    env = {"OMP_NUM_THREADS": "2"} if world == 2 else None
    done, run_dir = commbench(
        ["run", "--ops", "all", "--pattern", "all", "--sizes", "8,1K,64K", "--iters", "6",
         "--warmup", "1", "--nproc", str(world), "--name", f"all-{world}"],
        tmp_path_factory.mktemp(f"n{world}"), timeout=240, env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return world, done, run_dir


def expected_size(name, size, world):
    op = collectives.get(name)
    return op.count_for(size, 4, world) * 4


def test_every_op_and_pattern_has_a_row_per_size(sweep):
    world, _, run_dir = sweep
    rows = read_rows(run_dir)
    seen = {}
    for row in rows:
        seen.setdefault((row["op"], row["pattern"]), []).append(row["size_bytes"])
    for name in parse_ops("all"):  # ps has its own world layout: tests/integration/test_ps.py
        patterns = ["pingpong", "unidir", "bidir", "ring"] if name == "p2p" else [""]
        for pattern in patterns:
            got = seen[(collectives.row_name(name), pattern)]
            if name == "barrier":
                assert got == [0]
            else:
                assert got == sorted({expected_size(name, s, world) for s in SIZES})


def test_results_are_exact_and_metrics_follow_the_formulas(sweep):
    world, _, run_dir = sweep
    for row in read_rows(run_dir):
        assert row["wrong"] == 0, row
        assert row["world_size"] == world and row["nnodes"] == 1
        assert row["iters"] == 6 and row["samples"] == 6
        assert row["lat_us_min"] <= row["lat_us_p50"] <= row["lat_us_max"]
        assert row["lat_us_ci_lo"] <= row["lat_us_p50"] <= row["lat_us_ci_hi"]
        if row["size_bytes"]:
            algbw = row["size_bytes"] / (row["lat_us_p50"] * 1e-6) / 1e9
            assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-9)
            factor = collectives.get(row["op"]).busbw_factor(world, row["pattern"])
            assert row["busbw_gbps"] == pytest.approx(algbw * factor, rel=1e-9)
        assert row["count"] * 4 == row["size_bytes"]
        assert 0 <= row["slowest_rank"] < world
        assert len(row["samples_us"]) == 6


def test_csv_run_json_summary_and_plots(sweep):
    world, done, run_dir = sweep
    with open(run_dir / "results.csv") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames[: len(COLUMNS)]) == COLUMNS
        assert len(list(reader)) == len(read_rows(run_dir))
    meta = read_meta(run_dir)
    assert meta["status"] == "complete" and meta["error"] is None
    assert meta["world_size"] == world and meta["launcher"] == "local"
    assert meta["versions"]["torch"] and meta["hosts"]
    # Forked ranks kept the launcher's OpenMP team (a thread per core) until cli.main set
    # OMP_NUM_THREADS before torch is imported (launch.local.start_method); 2 cores here.
    threads = 2 if world == 2 else int(os.environ.get("OMP_NUM_THREADS") or 1)
    assert [rank["intra_op_threads"] for rank in meta["ranks"]] == [threads] * world
    assert meta["env"]["GLOO_SOCKET_IFNAME"] == "lo"
    for png in ("bandwidth.png", "latency.png"):  # the run moves data: both plots
        assert (run_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (run_dir / "summary.md").read_text()
    assert "## allreduce" in summary and "## p2p (ring)" in summary
    # The live table: a title and header per op and pattern, then one line per row.
    rows = read_rows(run_dir)
    footer = ("# Out of bounds values : ", "# Avg bus bandwidth    : ")
    titles = [line for line in done.stdout.splitlines() if line.startswith("# ")
              and not line.startswith(footer)]
    assert len(titles) == len({(r["op"], r["pattern"]) for r in rows})
    # nccl-tests' footer, once, and an average per table that moves data (not the barrier).
    assert done.stdout.count(footer[0]) == 1 and f"{footer[0]}0 OK" in done.stdout
    assert done.stdout.count(footer[1]) == len({(r["op"], r["pattern"]) for r in rows
                                                 if r["size_bytes"]})
    assert done.stdout.count("(GB/s)") == 2 * len(titles)  # algbw and busbw
    lines = done.stdout.splitlines()
    for row in rows:  # every row printed as it was measured, with its numbers whole
        size = format_size(row["size_bytes"]) if row["size_bytes"] else "-"
        assert any(line.split()[:1] == [size] and f" {row['lat_us_p50']:.1f} " in line
                   and f" {row['lat_us_p99']:.1f} " in line for line in lines), row["op"]


@pytest.mark.parametrize(
    ("dtype", "reduce_op", "extra"),
    [
        ("bfloat16", "prod", []),
        ("int8", "sum", []),
        ("float16", "avg", []),
        ("uint8", "max", ["--inplace"]),
        ("float64", "min", ["--inplace"]),
    ],
)
def test_reductions_are_exact_in_every_dtype(run_cli, dtype, reduce_op, extra):
    done, run_dir = run_cli(
        "run", "--ops", "allreduce,reduce-scatter,reduce,allgather", "--sizes", "3,1K,200K",
        "--dtype", dtype, "--op", reduce_op, "--iters", "3", "--warmup", "0", "--nproc", "3",
        "--json", "--root", "2", *extra,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows == [{k: v for k, v in r.items() if k != "samples_us"} for r in read_rows(run_dir)]
    assert {r["op"] for r in rows} == {"allreduce", "reduce_scatter", "reduce", "allgather"}
    for row in rows:
        assert row["wrong"] == 0 and row["dtype"] == dtype
        assert row["inplace"] == (row["op"] in ("allreduce", "reduce") or bool(extra))
        assert row["reduce_op"] == ("" if row["op"] == "allgather" else reduce_op)


def test_wrong_results_are_counted_and_exit_1(run_cli):
    done, run_dir = run_cli(
        "allgather", "--sizes", "1K,4K", "--iters", "2", "--quiet",
        env={"COMMBENCH_FAULT": "corrupt:1:allgather:4096"},
    )
    assert done.returncode == 1, done.stderr
    assert [r["wrong"] for r in read_rows(run_dir)] == [0, 1]
    assert "wrong element" in done.stderr


def test_adaptive_mode_and_single_rank(run_cli):
    done, run_dir = run_cli("allreduce", "--sizes", "8,64K", "--min-time", "0.05", "--nproc", "1")
    assert done.returncode == 0, done.stderr
    for row in read_rows(run_dir):
        assert row["samples"] >= 5 and row["iters"] >= row["samples"]
        assert row["busbw_gbps"] == 0  # 2(n-1)/n with n = 1


def test_barrier_takes_no_sizes(run_cli):
    done, run_dir = run_cli("barrier", "--iters", "4", "--nproc", "3")
    assert done.returncode == 0, done.stderr
    (row,) = read_rows(run_dir)
    assert (row["op"], row["size_bytes"], row["count"], row["busbw_gbps"]) == ("barrier", 0, 0, 0)


def test_p2p_between_chosen_peers_leaves_the_others_out(run_cli):
    """--peers 0:3 on 4 ranks: ranks 1 and 2 idle, the pair's data is checked, and the row's
    time, slowest rank and skew come from ranks 0 and 3 only."""
    done, run_dir = run_cli("p2p", "--pattern", "pingpong,unidir", "--peers", "0:3",
                            "--nproc", "4", "--sizes", "1K", "-n", "4", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(run_dir)
    assert [r["pattern"] for r in rows] == ["pingpong", "unidir"]
    for row in rows:
        assert row["peers"] == "0:3" and row["wrong"] == 0 and row["validation"] == "full"
        assert row["slowest_rank"] in (0, 3)


def test_both_places_in_one_launch_like_nccl_tests_two_column_groups(run_cli):
    done, run_dir = run_cli("reduce-scatter", "--both-places", "--sizes", "1K,8K", "--iters",
                            "6", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    rows = read_rows(run_dir)
    assert [(r["size_bytes"], r["inplace"]) for r in rows] == [
        (1024, False), (8192, False), (1024, True), (8192, True)]
    assert all(r["wrong"] == 0 and r["validation"] == "full" for r in rows)


def test_mbw_mr_pairs_each_rank_with_one_half_a_world_away_and_reports_a_rate(run_cli):
    """osu_mbw_mr's layout: rank r streams to r + n/2. A result moved on rank 2 is caught
    there (it receives from rank 0); under unidir's (0,1),(2,3) rank 2 only sends, so the
    same fault finds nothing: the pairing is what the pattern says. One launch: the fault is
    bound to the second size, the first is the clean control of each pattern."""
    done, run_dir = run_cli("p2p", "--pattern", "mbw_mr,unidir", "--nproc", "4", "--sizes",
                            "1K,4K", "--iters", "10", "--rounds", "1",
                            env={"COMMBENCH_FAULT": "shift:2:*:4096"})
    assert done.returncode == 1, done.stderr[-3000:]
    rows = {(r["pattern"], r["size_bytes"]): r for r in read_rows(run_dir)}
    assert sorted(rows) == [("mbw_mr", 1024), ("mbw_mr", 4096), ("unidir", 1024),
                            ("unidir", 4096)]
    assert all(r["validation"] == "full" for r in rows.values())
    clean = rows[("mbw_mr", 1024)]
    assert clean["wrong"] == 0 and clean["msg_rate"] > 0
    assert rows[("mbw_mr", 4096)]["wrong"] > 0  # rank 2 receives in mbw_mr
    assert [rows[("unidir", s)]["wrong"] for s in (1024, 4096)] == [0, 0]  # rank 2 only sends
    assert rows[("unidir", 1024)]["msg_rate"] == 0  # a rate is mbw_mr's alone
