"""``record --flight-recorder``: a rank's Flight Recorder dump and step ends, written by
commbench.record.flight in a real (one-rank) gloo group, read back as the trace record keeps."""

import json
import pickle
import subprocess
import sys

import pytest

from commbench.commands.record import _trace_from_dumps, run_record
from commbench.core.errors import UsageError
from commbench.results import trace as trace_format

JOB = r"""
import sys, torch, torch.distributed as dist
import commbench.record
from commbench.record import flight
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
flight.start(sys.argv[1])
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    dist.all_reduce(torch.ones(4))
    opt.step()
    dist.all_reduce(torch.ones(8))
    opt.step()
    if sys.argv[2] == "explicit":
        commbench.record.step()
dist.all_reduce(torch.ones(2))
dist.destroy_process_group()
"""


def run_job(folder, steps):
    done = subprocess.run([sys.executable, "-c", JOB, str(folder), steps], capture_output=True,
                          text=True, timeout=60,
                          env={"GLOO_SOCKET_IFNAME": "lo", "PATH": "/usr/bin:/bin",
                               "TORCH_FR_BUFFER_SIZE": "100"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (folder / "flight-recorder" / "fr-0").is_file()
    _trace_from_dumps(folder)
    return trace_format.load(folder).ranks[0]


@pytest.mark.parametrize("marked, steps", [
    # every optimizer.step() ends a step: the second allreduce opens the next one
    ("optimizer", [0, 1, 2, 3, 4, 5, 6, 7, 8]),
    # a script that marks its steps is believed over its optimizer (two per step here)
    ("explicit", [0, 0, 1, 1, 2, 2, 3, 3, 4]),
])
def test_a_dump_becomes_a_trace_cut_at_the_rank_s_own_step_ends(tmp_path, marked, steps):
    rank = run_job(tmp_path, marked)
    assert [c.step for c in rank.calls] == steps
    assert [c.in_numel for c in rank.calls] == [4, 8] * 4 + [2]
    assert rank.header["steps_ended"] == steps[-1]
    assert rank.header["source"] == "flight-recorder" and rank.header["host"]
    assert rank.header["torch"]
    assert all(c.t_issue_ns for c in rank.calls) and not any(c.in_situ_s for c in rank.calls)


def test_unreadable_step_ends_fall_back_to_the_rhythm_with_a_warning(tmp_path, capsys):
    job = tmp_path / "job"
    run_job(job, "explicit")
    (job / "fr-steps-0.json").write_text("{torn")
    for old in job.glob("rank-*.jsonl"):
        old.unlink()
    _trace_from_dumps(job)
    assert "fr-steps-0.json: unreadable step ends" in capsys.readouterr().err
    rank = trace_format.load(job).ranks[0]
    assert len(rank.calls) == 9 and rank.header["steps_ended"] != 8


def test_no_dump_writes_no_trace(tmp_path):
    _trace_from_dumps(tmp_path)
    assert not list(tmp_path.glob("rank-*.jsonl"))


def test_steps_and_the_flight_recorder_are_refused_together(tmp_path):
    with pytest.raises(UsageError, match="--steps and --flight-recorder"):
        run_record([sys.executable, "-c", "pass"], str(tmp_path / "t"), False, 2,
                   flight_recorder=True)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("size", ["0", "lots"])
def test_a_buffer_that_keeps_nothing_is_refused(tmp_path, monkeypatch, size):
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", size)
    with pytest.raises(UsageError, match=f"TORCH_FR_BUFFER_SIZE={size}"):
        run_record([sys.executable, "-c", "pass"], str(tmp_path / "t"), False, None,
                   flight_recorder=True)
    assert not (tmp_path / "t").exists()


def test_dumps_that_kept_no_call_are_said_in_one_line_and_write_no_trace(tmp_path, capsys):
    """torch 2.4's Flight Recorder keeps nothing on gloo: its dumps hold no entries (make
    compat, 2026-12-06)."""
    (tmp_path / "flight-recorder").mkdir()
    for rank in (0, 1):
        (tmp_path / "flight-recorder" / f"fr-{rank}").write_bytes(
            pickle.dumps({"version": "2.1", "pg_config": {}, "entries": []}))
        (tmp_path / f"fr-steps-{rank}.json").write_text(json.dumps(
            {"rank": rank, "host": "h", "torch": "2.4.1", "step_ends_ns": [1, 2]}))
    _trace_from_dumps(tmp_path)
    err = capsys.readouterr().err
    assert "Flight Recorder kept no call (torch 2.4.1" in err and err.count("\n") == 1
    assert not list(tmp_path.glob("rank-*.jsonl"))
