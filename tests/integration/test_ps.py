"""ps on real gloo ranks: exact sums and counted bytes at 2+2, 3+1 and 2+1 ranks, the allreduce
baseline beside it, a corrupted push caught (#wrong > 0, exit 1), and the async staleness bound
reached and held under an injected straggler. Five launches in all (make test's budget); no
time is asserted, only that held pulls wait longer than pulls nobody holds."""

import json

import pytest

from commbench.collectives import ps
from tests.conftest import commbench

pytestmark = pytest.mark.integration

CLEAN, BROKEN = 4096, 16384  # bytes: 1024 and 4096 float32 elements, 4 and 16 partitions


def rows_of(done):
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def assert_counted_bytes_follow_the_formulas(row, workers, servers):
    formula = ps.traffic(row["size_bytes"], workers, servers)
    assert (row["workers"], row["servers"]) == (workers, servers)
    assert row["worker_tx_bytes"] == formula.worker_tx_bytes == row["size_bytes"]
    assert row["worker_rx_bytes"] == formula.worker_rx_bytes
    assert row["server_rx_bytes"] == formula.server_rx_bytes
    assert row["server_tx_bytes"] == formula.server_tx_bytes


def run_ps(tmp_path, workers, servers, *extra, env=None, sizes=f"{CLEAN},{BROKEN}", iters=3):
    return commbench(
        ["ps", "--servers", str(servers), "--nproc", str(workers + servers), "--sizes",
         sizes, "--partition", "1K", "-n", str(iters), "-w", "0", "--rounds", "1",
         "--json", "--quiet", *extra],
        tmp_path, timeout=60, env=env,
    )


@pytest.mark.core
def test_two_workers_two_servers_beside_allreduce(tmp_path):
    done, run_dir = run_ps(tmp_path, 2, 2)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(done)
    summary = (run_dir / "summary.md").read_text()
    assert "## ps/sync beside allreduce over the same 2 workers" in summary
    assert {(r["op"], r["pattern"]) for r in rows} == {("ps", "sync"), ("allreduce", "")}
    for row in rows:
        assert row["wrong"] == 0 and row["validation"] == "full", row
        assert row["world_size"] == 4 and row["rank_time"] == "max"
        assert row["slowest_rank"] in (0, 1)  # a worker: servers are not timed
        # every worker's n bytes reduced per step, ps and allreduce alike: W·n/t
        assert row["reduced_gbps"] == pytest.approx(
            2 * row["size_bytes"] / (row["lat_us_p50"] * 1e3)), row
        if row["op"] == "ps":
            assert_counted_bytes_follow_the_formulas(row, 2, 2)
            assert row["beside"] == "allreduce"
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])  # max(1, 2/2)
        else:
            assert row["group_size"] == 2 and row["workers"] == 2
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])  # 2(2-1)/2


def test_three_workers_one_server(tmp_path):
    done, _ = run_ps(tmp_path, 3, 1, "--no-baseline")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(done)
    assert {r["op"] for r in rows} == {"ps"} and len(rows) == 2
    for row in rows:
        assert row["wrong"] == 0, row
        assert_counted_bytes_follow_the_formulas(row, 3, 1)
        assert row["busbw_gbps"] == pytest.approx(3 * row["algbw_gbps"])  # max(1, 3/1)


def test_a_corrupted_push_is_caught(tmp_path):
    # The server's receive of the pushes at BROKEN moves the data by one element.
    done, _ = run_ps(tmp_path, 2, 1, "--no-baseline",
                     env={"COMMBENCH_FAULT": f"shift:2:ps:{BROKEN}"})
    assert done.returncode == 1, done.stderr[-3000:]
    assert "wrong element" in done.stderr
    rows = {r["size_bytes"]: r for r in rows_of(done)}
    assert rows[CLEAN]["wrong"] == 0
    assert rows[BROKEN]["wrong"] > 0
    for row in rows.values():
        assert_counted_bytes_follow_the_formulas(row, 2, 1)


def test_async_reaches_its_staleness_bound_under_a_straggler_and_never_passes_it(tmp_path):
    """Worker 1 sleeps 50 ms before each of its batches, far longer than a step of worker 0
    (a 16 KiB push and pull on loopback): worker 0 must run ahead, so the bound is reached,
    not merely respected; without the bound the same run goes past it. Worker 0's pulls are
    held by the bound while worker 1 sleeps, which is what the pull wait measures: more than
    in the run whose pulls nobody holds (a 50 ms sleep against a sub-millisecond step)."""
    straggler = {"COMMBENCH_FAULT": "delay=0.05:1:ps"}
    bounded, _ = run_ps(tmp_path / "bounded", 2, 1, "--mode", "async", "--staleness", "1",
                        "--no-baseline", env=straggler, sizes=str(BROKEN), iters=20)
    free, _ = run_ps(tmp_path / "free", 2, 1, "--mode", "async", "--no-baseline",
                     env=straggler, sizes=str(BROKEN), iters=20)
    for done in (bounded, free):
        assert done.returncode == 0, done.stderr[-3000:]
    (row,), (free_row,) = rows_of(bounded), rows_of(free)
    assert row["pattern"] == "async" and row["staleness_bound"] == 1
    assert row["wrong"] == 0 and row["validation"] == "full", row
    assert row["max_staleness"] == 1, row  # reached, and never passed
    assert row["rejected_pushes"] == 0, row
    assert free_row["max_staleness"] > 1, free_row  # the straggler does open a lag
    assert row["pull_wait_us"] > free_row["pull_wait_us"], (row, free_row)
    # no push rejected: each worker's n bytes at its own step rate
    assert row["reduced_gbps"] == pytest.approx(
        2 * row["size_bytes"] * row["steps_per_s"] / 1e9), row
    assert_counted_bytes_follow_the_formulas(row, 2, 1)
