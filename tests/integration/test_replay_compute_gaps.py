"""replay --gaps compute on real gloo ranks: the recorded 1 ms gaps are spent multiplying
matrices (replay.rank.ComputeGaps) instead of sleeping, so a step still lasts at least its
gaps, and the calls are replayed as recorded (the run completes, every step timed)."""

import pytest

from tests.integration.test_replay import read_csv, replay
from tests.replay_traces import GAP_NS, manual_loop

pytestmark = pytest.mark.integration


def test_compute_gaps_fill_the_recorded_time(tmp_path):
    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 10)
    done, run, _ = replay(tmp_path, trace, "--gaps", "compute", "--steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    steps = read_csv(run / "replay_steps.csv")
    assert len(steps) >= 4
    for step in steps:
        assert float(step["wall_s"]) >= 3 * GAP_NS / 1e9, step
