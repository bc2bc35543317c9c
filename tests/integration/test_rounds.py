"""--rounds on real gloo ranks: every size measured in interleaved rounds, checked, rows in
size order once an op's last round is done, and the rows of finished ops kept on a crash."""

import json

import pytest

from tests.conftest import read_meta, read_rows

pytestmark = [pytest.mark.integration, pytest.mark.capability]


def test_shuffled_rounds_on_real_ranks_keep_their_rounds_the_size_order_and_the_seed(run_cli):
    """--rounds 3 --order shuffle on real ranks, over a collective, p2p and the barrier: every
    rank draws the same order (a rank that visited another size would wait in a different
    collective until the timeout), the rows keep their rounds in size order, and run.json
    says how the rounds were ordered. (The default, alternate, order is on real ranks in the
    crash and --repeat tests below.)"""
    done, run_dir = run_cli("run", "--ops", "allreduce,p2p,barrier", "--sizes", "8,1K,64K,256K",
                            "--min-time", "0.3", "--rounds", "3", "--order", "shuffle", "--seed",
                            "5", "--nproc", "2", "--quiet", "--timeout", "60", "--name",
                            "shuffled", check_rc=0)
    rows = read_rows(run_dir)
    assert [(r["op"], r["size_bytes"]) for r in rows] == [
        ("allreduce", 8), ("allreduce", 1024), ("allreduce", 65536), ("allreduce", 262144),
        ("p2p", 8), ("p2p", 1024), ("p2p", 65536), ("p2p", 262144), ("barrier", 0)]
    for row in rows:
        assert row["rounds"] == 3 and len(row["round_samples"]) == 3
        assert sum(row["round_samples"]) == row["samples"] == len(row["samples_us"])
        assert len(row["round_p50_us"]) == 3 and row["wrong"] == 0
        assert row["lat_us_ci_lo"] <= row["lat_us_p50"] <= row["lat_us_ci_hi"]
    config = read_meta(run_dir)["config"]
    assert (config["order"], config["seed"], config["rounds"]) == ("shuffle", 5, 3)


def test_a_crash_in_rounds_keeps_the_rows_of_finished_ops(run_cli):
    """Finished ops keep their checked rows; of the op cut in its first round, the size that
    finished a round is kept too, unchecked and saying so (measure.sweep._emit_unchecked)."""
    done, run_dir = run_cli("run", "--ops", "allreduce,allgather", "--sizes", "8,1K",
                            "--min-time", "0.2", "--rounds", "3", "--nproc", "2", "--quiet",
                            "--name", "crash", env={"COMMBENCH_FAULT": "raise:1:allgather:1024"})
    assert done.returncode == 3, done.stderr[-2000:]
    rows = read_rows(run_dir)
    assert [(r["op"], r["size_bytes"]) for r in rows] == [
        ("allreduce", 8), ("allreduce", 1024), ("allgather", 8)]
    assert [r["validation"] == "full" for r in rows] == [True, True, False]
    assert rows[-1]["validation"].startswith("off: the run ended") and rows[-1]["rounds"] == 1
    assert read_meta(run_dir)["status"] == "partial"


def test_repeat_runs_fresh_launches_into_one_folder_and_compare_pools_them(run_cli):
    done, run_dir = run_cli("allreduce", "--sizes", "8,1K", "--min-time", "0.2", "--rounds",
                            "3", "--repeat", "2", "--nproc", "2", "--quiet", "--name", "twice",
                            check_rc=0)
    rows = read_rows(run_dir)
    assert [(r["launch"], r["size_bytes"]) for r in rows] == [(0, 8), (0, 1024), (1, 8),
                                                               (1, 1024)]
    meta = read_meta(run_dir)
    assert meta["status"] == "complete" and meta["repeat"] == 2 and meta["planned_rows"] == 4
    assert "launch 2 of 2" in done.stderr
    compared, _ = run_cli("compare", str(run_dir), str(run_dir), "--json", check_rc=0)
    pairs = [line for line in compared.stdout.splitlines() if '"verdict"' in line]
    # two launches a side: compare judges the launches (Welch's t over their medians)
    assert len(pairs) == 2 and all('"Welch t over launch medians (2 vs 2)"' in p for p in pairs)


def test_a_real_slowdown_fails_the_gate(tmp_path):
    """One real A/B pair: B's allreduce calls each cost 8x their own time inside the ranks
    (COMMBENCH_FAULT slow=8), through the real transport; compare must call it slower and
    fail. 8x, not 1.5x: one pair on a shared 2-core machine must not be a coin toss."""
    from tests.conftest import commbench

    # 10 rounds, 3 sizes, 8x: with 4 rounds, 2 sizes and 3x, 1 pair in 8 read every row
    # noisy (a 2.7x ratio, interval 0.95-4.70) on the idle VM; 10 rounds read 15 of 16 rows
    # slower there, yet two clean-clone CI runs of the whole suite still met a pair with no
    # slower row at 3x. The gate's power at small factors is measured in bench/gate.py.
    args = ["allreduce", "--sizes", "64K,256K,1M", "--min-time", "0.5", "--rounds", "10",
            "--nproc", "2", "--quiet"]
    _, base = commbench([*args, "--name", "a"], tmp_path, check_rc=0)
    _, slow = commbench([*args, "--name", "b"], tmp_path, check_rc=0,
                        env={"COMMBENCH_FAULT": "slow=8:*:allreduce"})
    done, _ = commbench(["compare", str(base), str(slow), "--json", "--fail-on-regression"],
                        tmp_path)
    pairs = [line for line in done.stdout.splitlines() if '"verdict"' in line]
    assert done.returncode == 1 and any('"verdict": "slower"' in p for p in pairs), [
        {k: json.loads(p)[k] for k in ("size_bytes", "ratio", "ratio_lo", "ratio_hi", "verdict")}
        for p in pairs]
