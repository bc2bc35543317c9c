"""commbench stragglers on real 4-rank DDP jobs (examples/ddp_mlp.py under torchrun, gloo),
recorded with `commbench record`: each fault is injected through the example's environment
(COMMBENCH_EXAMPLE_SLOW / _HANG) and must be named; the clean job must name nobody."""

import json
import subprocess
import sys

import pytest

from commbench.results import trace as trace_format
from tests.integration.recordings import DDP_ARGS, EXAMPLES, TORCHRUN, record

STEPS = ["--steps", "14"]


def ddp(tmp_path, name, env, extra=(), options=()):
    done, folder = record(tmp_path, [*TORCHRUN, "4", str(EXAMPLES / "ddp_mlp.py"), *DDP_ARGS,
                                     *STEPS, *extra], env=env, name=name, timeout=240,
                          options=options)
    return done, folder


def stragglers(*args):
    done = subprocess.run([sys.executable, "-m", "commbench", "stragglers", *map(str, args),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None


@pytest.mark.core
def test_a_slowed_rank_is_named_from_its_recording_and_its_flight_recorder_dump(tmp_path):
    dumps = tmp_path / "fr"
    dumps.mkdir()
    done, folder = ddp(tmp_path, "slow", {"COMMBENCH_EXAMPLE_SLOW": "2:0.03",
                                          "TORCH_FR_BUFFER_SIZE": "2000",
                                          "COMMBENCH_EXAMPLE_FR_DUMP": str(dumps / "fr-")})
    assert done.returncode == 0, done.stderr[-3000:]
    # record ends with the answer
    assert "commbench record: rank 2 made the others wait: culprit" in done.stderr
    code, doc = stragglers(folder)
    assert code == 1 and doc["clock"] == "shared" and doc["missing"] == []
    assert [(c["rank"], c["verdict"]) for c in doc["culprits"]] == [(2, "culprit")]
    # ... while its own allreduces are the shortest: the trap per-rank times set
    trace = trace_format.load(folder)
    mean = {}
    for rank in trace.ranks:
        times = [c.in_situ_s for c in trace.calls(rank) if c.step > 1 and c.in_situ_s]
        mean[rank] = sum(times) / len(times)
    assert min(mean, key=mean.get) == 2, mean
    # torch's own Flight Recorder dump of the same job names the same rank
    assert sorted(p.name for p in dumps.iterdir()) == ["fr-0", "fr-1", "fr-2", "fr-3"]
    code, doc = stragglers(dumps)
    assert code == 1 and [(c["rank"], c["verdict"]) for c in doc["culprits"]] == [
        (2, "culprit")]


def test_a_clean_job_names_nobody_and_a_transient_one_its_steps(tmp_path):
    done, clean = ddp(tmp_path, "clean", {})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no rank made the others wait beyond the noise" in done.stderr
    code, doc = stragglers(clean)
    assert code == 0 and doc["culprits"] == [] and doc["missing"] == []
    done, transient = ddp(tmp_path, "transient", {"COMMBENCH_EXAMPLE_SLOW": "1:0.05:5-8"})
    assert done.returncode == 0, done.stderr[-3000:]
    code, doc = stragglers(transient)
    assert code == 1
    assert [(c["rank"], c["verdict"], c["steps"]) for c in doc["culprits"]] == [
        (1, "transient", [5, 8])]


def test_a_hung_rank_is_named_missing_at_its_call(tmp_path):
    done, folder = ddp(tmp_path, "hung", {"COMMBENCH_EXAMPLE_HANG": "3:6"},
                       extra=["--timeout", "8"])
    assert done.returncode != 0  # the others time out waiting for rank 3
    assert "rank 3 never issued call" in done.stderr, done.stderr[-3000:]
    code, doc = stragglers(folder)
    assert code == 1
    (missing,) = [m for m in doc["missing"] if m["rank"] == 3]
    assert missing["op"] == "allreduce" and missing["group"] == "0"
    trace = trace_format.load(folder)
    # call N is the first call rank 3 lacks on the world group, which the others issued
    assert missing["call"] == len([c for c in trace.calls(3) if c.pg == "0" and not c.is_p2p])
    assert all(len([c for c in trace.calls(r) if c.pg == "0"]) > missing["call"]
               for r in (0, 1, 2))


@pytest.mark.core
def test_record_through_the_flight_recorder_names_the_same_rank_by_the_same_steps(tmp_path):
    """``record --flight-recorder``: no recorder in the ranks, torch's ring buffer dumped at
    the end and read back, its steps cut at the optimizer's step ends noted beside it."""
    done, folder = ddp(tmp_path, "fr", {"COMMBENCH_EXAMPLE_SLOW": "2:0.03"},
                       options=["--flight-recorder"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "commbench record: rank 2 made the others wait: culprit" in done.stderr
    assert sorted(p.name for p in (folder / "flight-recorder").iterdir()) == [
        "fr-0", "fr-1", "fr-2", "fr-3"]
    trace = trace_format.load(folder)
    assert sorted(trace.ranks) == [0, 1, 2, 3]
    for rank in trace.ranks.values():
        assert rank.header["source"] == "flight-recorder" and rank.header["host"]
        assert rank.header["steps_ended"] == 14  # one per optimizer.step(), not the rhythm's
        assert {c.step for c in rank.calls if c.op == "allreduce"} == set(range(14))
        assert all(c.t_issue_ns for c in rank.calls)
    code, doc = stragglers(folder)
    assert code == 1 and doc["clock"] == "shared"
    assert [(c["rank"], c["verdict"]) for c in doc["culprits"]] == [(2, "culprit")]


def test_a_hung_rank_is_named_from_the_flight_recorder_too(tmp_path):
    """The ranks still dump when they end on an error (the others' timeout) or on torchrun's
    SIGTERM (the hung rank, asleep in its step)."""
    done, folder = ddp(tmp_path, "fr-hung", {"COMMBENCH_EXAMPLE_HANG": "3:6"},
                       extra=["--timeout", "8"], options=["--flight-recorder"])
    assert done.returncode != 0
    assert "rank 3 never issued call" in done.stderr, done.stderr[-3000:]
    code, doc = stragglers(folder)
    assert code == 1 and [m["rank"] for m in doc["missing"]] == [3]
