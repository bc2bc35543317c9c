"""replay on a real framework's job: a Hugging Face Trainer (tiny GPT-2 from a config, DDP on
gloo under torchrun, gradient accumulation 2) recorded with `commbench record`, then replayed.

Trainer steps the optimizer once per two micro-batches and, after its last step, gathers the
loss once: that tail is not a step, nor is step 0's set-up. The replay's figures are per
real step: each has exactly one allreduce of the gradient bytes (DDP's one bucket), never a
mean that mixes the tail in (0.67 calls a step before the steps were decided by their ends).
No timing is asserted."""

import json

import pytest

from commbench.results import trace as trace_format
from tests.conftest import commbench
from tests.integration.recordings import facts, record_trainer

pytestmark = [pytest.mark.integration, pytest.mark.capability]
pytest.importorskip("transformers")
pytest.importorskip("accelerate")


@pytest.fixture(scope="module")
def trainer_recording(tmp_path_factory):
    return record_trainer(tmp_path_factory.mktemp("trainer"), steps=3)


def test_a_trainer_job_records_one_gradient_allreduce_per_optimizer_step(trainer_recording):
    done = trainer_recording.done
    assert done.returncode == 0, done.stderr[-3000:]
    told = facts(trainer_recording.facts)
    assert told["optimizer_steps"] == 3 and told["accumulation"] == 2
    trace = trace_format.load(trainer_recording.folder)
    split = trace_format.step_split(trace)
    assert split.steps == (1, 2) and split.setup == 0
    assert split.tail_calls == 1  # Trainer's closing gather of the loss
    for rank in trace.ranks:
        assert trace.ranks[rank].ended == 3
        for step in split.steps:
            grads = [c for c in trace.calls(rank, step)
                     if c.op == "allreduce" and c.dtype == "float32"]
            assert [c.size_bytes for c in grads] == [told["gradient_bytes"]], (rank, step)
        assert all(c.op == "allgather" for c in trace.calls(rank, 3))
    assert "a tail of 1 call" in done.stderr, done.stderr[-2000:]


def test_a_trainer_job_replays_per_real_step(tmp_path, trainer_recording):
    assert trainer_recording.done.returncode == 0, trainer_recording.done.stderr[-3000:]
    told = facts(trainer_recording.facts)
    done, _ = commbench(["replay", str(trainer_recording.folder), "--json", "--timeout", "60"],
                        tmp_path, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 10  # steps 1-2, five passes
    ops = {(row["op"], row["dtype"]): row for row in summary["ops"]}
    gradient = ops[("allreduce", "float32")]
    assert gradient["calls"] == gradient["replayed_calls"] == 1
    assert (gradient["calls_min"], gradient["calls_max"]) == (1, 1)
    assert gradient["bytes"] == gradient["replayed_bytes"] == told["gradient_bytes"]
    assert all(row["calls_min"] == row["calls_max"] for row in summary["ops"]), summary["ops"]
    assert "step 0 (set-up" in summary["left_out"] and "a tail of 1 call" in summary["left_out"]
    assert "# not replayed: step 0 (set-up" in done.stderr
