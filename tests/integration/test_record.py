"""commbench record on real jobs: DDP and FSDP2 through torchrun, a script that spawns its own
ranks, a crash, and the checks proven by a recorder that drops a call."""

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from commbench.results import trace as trace_format
from tests.integration.recordings import (
    facts,
    fsdp_limit,
    record,
    record_ddp,
)


def per_step(calls, op):
    """{step: (calls, bytes handed in)} for one op."""
    found = defaultdict(lambda: [0, 0])
    for call in calls:
        if call.op == op:
            found[call.step][0] += 1
            found[call.step][1] += call.in_numel * call.itemsize
    return {step: tuple(value) for step, value in found.items()}


def ddp_mismatches(trace, facts) -> list[str]:
    """Where the recording disagrees with what DDP itself says it did (its gradient bytes and
    the buckets it rebuilt after the first step), for every step after the rebuild."""
    buckets = [int(b) for b in str(facts["bucket_bytes"]).split(",")]
    problems = []
    for rank in trace.ranks:
        calls = trace.calls(rank)
        steps = per_step(calls, "allreduce")
        for step in range(2, max(steps) + 1):
            count, size = steps.get(step, (0, 0))
            if (count, size) != (len(buckets), facts["gradient_bytes"]):
                problems.append(f"rank {rank} step {step}: {count} allreduces of {size} B, "
                                f"DDP: {len(buckets)} buckets of {facts['gradient_bytes']} B")
            sizes = sorted(c.in_numel * c.itemsize for c in calls
                           if c.step == step and c.op == "allreduce")
            if sizes != sorted(buckets):
                problems.append(f"rank {rank} step {step}: sizes {sizes} != buckets {buckets}")
    return problems


@pytest.fixture(scope="module")
def ddp_trace(ddp_recording):
    done = ddp_recording.done
    assert done.returncode == 0, done.stderr[-3000:]
    return done, trace_format.load(ddp_recording.folder), facts(ddp_recording.facts)


@pytest.mark.core
def test_ddp_allreduces_equal_the_gradient_and_ddps_buckets(ddp_trace):
    done, trace, facts = ddp_trace
    assert sorted(trace.ranks) == [0, 1]
    assert len(str(facts["bucket_bytes"]).split(",")) >= 2, "the example must make several buckets"
    assert trace.steps() == [0, 1, 2, 3]
    assert ddp_mismatches(trace, facts) == []
    assert trace_format.check_order(trace) == []
    group = trace.groups[trace.calls(0)[-1].pg]
    assert group.ranks == (0, 1)
    for rank in trace.ranks:
        for call in trace.calls(rank):
            assert call.t_end_ns is not None and call.t_end_ns >= call.t_issue_ns
            assert call.in_situ_s is not None
    assert "commbench record: " in done.stderr


def test_a_recorder_that_drops_a_call_fails_the_ddp_checks(tmp_path, ddp_trace):
    """Rank 1's recorder leaves out one of step 2's allreduces (COMMBENCH_RECORD_DROP=SEQ:1):
    the product's own order check says so at the end of the record, names the group and the
    call rank 0 made that rank 1 has no match for, and replay refuses the trace."""
    _, clean, ddp_facts = ddp_trace
    dropped_seq = next(c.seq for c in clean.calls(1) if c.step == 2 and c.op == "allreduce")
    broken = record_ddp(tmp_path, env={"COMMBENCH_RECORD_DROP": f"{dropped_seq}:1"})
    assert broken.done.returncode == 0, broken.done.stderr[-3000:]
    trace = trace_format.load(broken.folder)
    assert len(trace.calls(1)) == len(trace.calls(0)) - 1
    problems = trace_format.check_order(trace)
    assert len(problems) == 1 and "rank 0's" in problems[0], problems
    warned = [line for line in broken.done.stderr.splitlines()
              if line.startswith("commbench record: warning: group")]
    assert warned == [f"commbench record: warning: {problems[0]}"], broken.done.stderr[-3000:]
    refused = subprocess.run([sys.executable, "-m", "commbench", "replay", str(broken.folder),
                              "--out", str(tmp_path / "replays")], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "disagree" in refused.stderr, refused.stderr[-2000:]
    assert any("rank 1 step 2" in problem  # and DDP's own figures agree it is step 2
               for problem in ddp_mismatches(trace, ddp_facts))


def test_fsdp2_gathers_and_scatters_the_sharded_parameters_on_the_mesh_groups(
        fsdp_recording):
    if fsdp_limit(fsdp_recording):
        pytest.skip(fsdp_limit(fsdp_recording))
    done = fsdp_recording.done
    assert done.returncode == 0, done.stderr[-3000:]
    trace = trace_format.load(fsdp_recording.folder)
    assert trace_format.check_order(trace) == []
    for rank in range(4):
        rank_facts = facts(f"{fsdp_recording.facts}.{rank}")
        calls = trace.calls(rank)
        for step in (1, 2):
            gathers = [c for c in calls if c.step == step and c.op == "allgather"]
            scatters = [c for c in calls if c.step == step and c.op == "reduce_scatter"]
            assert gathers and scatters
            for call in gathers + scatters:
                assert trace.groups[call.pg].ranks == tuple(rank_facts["mesh_ranks"])
                assert call.in_situ_s is not None  # reduce_scatter_tensor's work has no future
            # forward gathers each layer's shard once: their inputs are this rank's shard
            forward = gathers[:rank_facts["layers"]]
            assert sum(c.in_numel * c.itemsize for c in forward) == rank_facts["shard_bytes"]
            assert all(c.out_numel == 2 * c.in_numel for c in gathers)
            # every gradient is reduce-scattered once: the whole model in, the shard out
            assert sum(c.in_numel * c.itemsize for c in scatters) == rank_facts["unsharded_bytes"]
            assert sum(c.out_numel * c.itemsize for c in scatters) == rank_facts["shard_bytes"]


def test_a_script_that_spawns_its_ranks_with_explicit_steps_and_subgroups(spawning_recording):
    done = spawning_recording.done
    assert done.returncode == 0, done.stderr[-3000:]
    trace = trace_format.load(spawning_recording.folder)
    assert sorted(trace.ranks) == [0, 1, 2]
    assert trace.steps() == [0, 1, 2]
    for step in range(3):
        ops = {rank: [c.op for c in trace.calls(rank, step)] for rank in range(3)}
        assert ops == {0: ["allreduce", "send"], 1: ["allreduce", "broadcast"],
                       2: ["allreduce", "broadcast", "recv"]}
    broadcast = trace.calls(1, 0)[1]
    assert trace.groups[broadcast.pg].ranks == (1, 2)
    assert broadcast.root == 2  # a global rank, though it is rank 1 of the pair
    send, recv = trace.calls(0, 1)[1], trace.calls(2, 1)[2]
    assert (send.peer, recv.peer, send.in_numel) == (2, 0, 10)
    assert send.t_end_ns is not None and recv.t_end_ns is not None  # no future: polled
    assert trace_format.check_order(trace) == []


CRASHING = """
import os, signal, torch, torch.distributed as dist
import commbench.record
dist.init_process_group("gloo", init_method="file://" + os.environ["STORE"], rank=0,
                        world_size=1)
for step in range(2):
    dist.all_reduce(torch.ones(64))
    commbench.record.step()
dist.all_reduce(torch.ones(64))  # step 2: never flushed before the crash
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crash_keeps_the_finished_steps_and_its_exit_status(tmp_path):
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    done, folder = record(tmp_path, [sys.executable, str(script)],
                          env={"STORE": str(tmp_path / "store")})
    assert done.returncode == 128 + 9
    trace = trace_format.load(folder)
    assert [(c.step, c.op, c.in_numel) for c in trace.calls(0)] == [(0, "allreduce", 64),
                                                                     (1, "allreduce", 64)]
    assert json.loads((folder / "record.json").read_text())["exit_code"] == 137
    assert "exited 137" in done.stderr


TERMINATED = """
import os, signal, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + os.environ["STORE"], rank=0,
                        world_size=1)
for _ in range(3):
    dist.all_reduce(torch.ones(64))  # no step marked: nothing flushed before the signal
os.kill(os.getpid(), signal.SIGTERM)  # what torchrun sends a rank when another one failed
time.sleep(30)
"""


def test_sigterm_keeps_the_calls_not_yet_flushed_and_its_exit_status(tmp_path):
    script = tmp_path / "terminated.py"
    script.write_text(TERMINATED)
    done, folder = record(tmp_path, [sys.executable, str(script)],
                          env={"STORE": str(tmp_path / "store")})
    assert done.returncode == 128 + 15
    trace = trace_format.load(folder)
    assert [(c.step, c.op, c.in_numel) for c in trace.calls(0)] == [(0, "allreduce", 64)] * 3


@pytest.mark.core
def test_the_exit_code_of_a_job_that_never_joins_is_passed_through(tmp_path):
    done, folder = record(tmp_path, [sys.executable, "-c", "import sys; sys.exit(4)"])
    assert done.returncode == 4
    assert "nothing recorded" in done.stderr


@pytest.mark.core
def test_a_sitecustomize_the_recorder_shadows_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['MARK'], 'w').write('ran')\n")
    mark = tmp_path / "mark"
    done, _ = record(tmp_path, [sys.executable, "-c", "pass"],
                     env={"PYTHONPATH": str(theirs), "MARK": str(mark)})
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "ran"


@pytest.mark.core
@pytest.mark.parametrize("args, message", [
    ([], "needs a command"),
    (["--", "/no/such/program"], "no such command"),
    (["--steps", "0", "--", "true"], "--steps"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    done = subprocess.run([sys.executable, "-m", "commbench", "record", "--out",
                           str(tmp_path / "t"), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.core
def test_an_existing_trace_is_kept_without_force(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rank-0.jsonl").write_text("{}\n")
    done = subprocess.run([sys.executable, "-m", "commbench", "record", "--out", str(folder),
                           "--", "true"], capture_output=True, text=True)
    assert done.returncode == 2 and "--force" in done.stderr
    assert (folder / "rank-0.jsonl").read_text() == "{}\n"


@pytest.mark.core
def test_a_command_that_cannot_run_leaves_no_folder(tmp_path):
    """`record -- nonexistent-binary`: one line, exit 2, and no empty trace folder behind."""
    done = subprocess.run([sys.executable, "-m", "commbench", "record", "--",
                           "commbench-no-such-binary", "--x"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot run 'commbench-no-such-binary'" in lines[0], lines
    assert not (tmp_path / "results").exists()


@pytest.mark.core
def test_two_records_in_one_second_keep_their_own_folders(tmp_path, monkeypatch):
    """Two failed records in the same second: each its own default folder and record.json,
    the second never overwrites the first's."""
    from datetime import datetime

    from commbench.commands import record as record_command

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(record_command, "datetime", Frozen)
    monkeypatch.chdir(tmp_path)
    codes = [record_command.run_record([sys.executable, "-c", f"raise SystemExit({code})"],
                                       None, False, None) for code in (3, 4)]
    assert codes == [3, 4]
    folders = sorted((tmp_path / "results").iterdir())
    assert [f.name for f in folders] == ["trace-20260102-030405", "trace-20260102-030405-2"]
    assert [json.loads((f / "record.json").read_text())["exit_code"] for f in folders] == [3, 4]
