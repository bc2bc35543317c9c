"""--per-call on real gloo ranks: one run of two ranks where rank 1 starts every 4th call late
(COMMBENCH_FAULT late: it sleeps after the call before), and everything --per-call promises is
read back from the folder: the calls file (parquet, or jsonl without pyarrow) with one record per
call per rank, its columns, rounds and call numbers; the rows' per-call columns agreeing with
the file; and the planted rank named as the straggler more often than the other, in the rows,
summary.md and the console table."""

import numpy as np
import pytest

from commbench.core.percall import SPIKE_RATIO
from commbench.results.calls import COLUMNS, read_calls
from tests.conftest import commbench, read_meta, read_rows

pytestmark = pytest.mark.integration

SIZES = (64, 1024)
ITERS = 80


@pytest.mark.core
def test_per_call_keeps_every_call_and_names_the_late_rank(tmp_path):
    done, run_dir = commbench(
        ["allreduce", "--nproc", "2", "--sizes", ",".join(map(str, SIZES)), "--iters",
         str(ITERS), "-w", "1", "--rounds", "2", "--per-call", "--quiet", "--name", "pc"],
        tmp_path, timeout=240, check_rc=0,
        env={"COMMBENCH_FAULT": "late=0.004,4:1:allreduce"})

    meta = read_meta(run_dir)
    assert meta["calls"]["file"] in ("calls.parquet", "calls.jsonl")
    assert meta["config"]["per_call"] is True
    calls = read_calls(run_dir)
    assert list(calls.columns) == list(COLUMNS)
    rows = {row["size_bytes"]: row for row in read_rows(run_dir)}
    assert sorted(rows) == list(SIZES)
    assert len(calls) == 2 * ITERS * len(SIZES)  # every call of every rank: none left out
    for size, row in rows.items():
        mine = calls[calls.size_bytes == size]
        assert set(mine["op"]) == {"allreduce"} and set(mine["backend"]) == {"gloo"}
        for rank in (0, 1):
            of_rank = mine[mine["rank"] == rank]
            assert of_rank["call"].tolist() == list(range(ITERS))
        assert set(mine["round"]) == {0, 1}  # both interleaved rounds
        assert mine["time_us"].gt(0).all() and mine["late_us"].ge(0).all()
        assert row["calls"] == ITERS == row["iters"]
        # the row's per-call columns are the calls file's: each call's time the ranks' mean
        # (--rank-time avg), then its p95, CV and spikes, figured here from the file alone
        times = mine.pivot(index="call", columns="rank", values="time_us").mean(axis=1)
        times = times.to_numpy()
        assert row["rank_time"] == "avg"
        assert row["lat_us_p95"] == pytest.approx(np.percentile(times, 95), rel=1e-9)
        assert row["cv_pct"] == pytest.approx(times.std() / times.mean() * 100, rel=1e-9)
        assert row["spikes"] == int(np.count_nonzero(times > SPIKE_RATIO * np.median(times)))
        named = dict((int(r), int(c)) for r, c in
                     (pair.split(":") for pair in row["stragglers"].split(",") if pair))
        assert named.get(1, 0) > named.get(0, 0), row["stragglers"]
        # every call has a first rank to arrive (lateness 0): the file says who waited
        late = mine.pivot(index="call", columns="rank", values="late_us")
        assert (late.min(axis=1) == 0).all()

    summary = (run_dir / "summary.md").read_text()
    assert "p95 (us)" in summary and "spikes" in summary
    straggler_line = next(line for line in summary.splitlines() if "Stragglers" in line)
    assert "rank 1 in" in straggler_line
    assert "rank 0" not in straggler_line or (
        straggler_line.index("rank 1") < straggler_line.index("rank 0"))  # the most first
    assert "Stragglers" in done.stdout and "p95" in done.stdout  # the console table too
