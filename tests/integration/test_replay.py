"""replay on real gloo ranks: the calls replayed are the trace's (bytes and calls per step, per
op and per rank), the checks are proven by breaking what they check (a slowed collective reads
slower, a halved buffer is refused), bad input is one line and exit 2, a hung rank ends the
run in bounded time. No machine timing is asserted: the slowdown is planted, and the gap
check leans on sleeps, which only ever last at least as long as asked."""

import csv
import json
import statistics
import sys
import time
from pathlib import Path

import pytest

from commbench.results.replay import read_replayed
from tests.conftest import commbench
from tests.integration.recordings import fsdp_limit
from tests.replay_traces import CALL_NS, GAP_NS, every_op, manual_loop, per_step

pytestmark = pytest.mark.integration

BASE_RUN = "tests/fixtures/base"  # allreduce and allgather on 2 gloo ranks, 8 B - 1 MiB


def replay(tmp_path, trace, *args, env=None, timeout=150):
    done, run = commbench(["replay", str(trace), "--json", "--timeout", "60", *args], tmp_path,
                          timeout=timeout, env=env)
    summary = None
    if done.returncode in (0, 1) and done.stdout.strip():
        summary = json.loads(done.stdout.strip().splitlines()[-1])
    return done, run, summary


def read_csv(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def assert_matches_trace(trace, run, summary, steps):
    """Per op (mean over its ranks) and per rank: the replay's bytes and calls per step are
    the trace's."""
    expected = per_step(trace, steps)
    for row in summary["ops"]:
        mine = [value for (rank, op), value in expected.items() if op == row["op"]]
        assert row["replayed_bytes"] == row["bytes"], row
        assert row["replayed_calls"] == row["calls"], row
        assert row["bytes"] == pytest.approx(sum(b for b, _ in mine) / len(mine)), row
        assert row["calls"] == pytest.approx(sum(c for _, c in mine) / len(mine)), row
    ranks = read_csv(run / "replay_ranks.csv")
    assert {(int(r["rank"]), r["op"]) for r in ranks} == set(expected)
    for r in ranks:
        want_bytes, want_calls = expected[(int(r["rank"]), r["op"])]
        assert float(r["replayed_bytes"]) == pytest.approx(want_bytes), r
        assert float(r["replayed_calls"]) == pytest.approx(want_calls), r


def test_two_ranks_replay_the_trace_calls_and_write_the_folder(tmp_path):
    trace = manual_loop(tmp_path / "trace", world=2, steps=3)
    done, run, summary = replay(tmp_path, trace)
    assert done.returncode == 0, done.stderr[-3000:]
    # default: the steps after the first, in whole passes until 10 are replayed
    assert summary["steps"] == 12
    assert {row["op"] for row in summary["ops"]} == {"allreduce", "broadcast", "allgather"}
    assert_matches_trace(trace, run, summary, [1, 2, 3])
    allreduce = next(r for r in summary["ops"] if r["op"] == "allreduce")
    assert allreduce["calls"] == 2 and allreduce["bytes"] == 2 * 4 * (1 << 16)
    assert allreduce["in_situ_s"] == pytest.approx(2 * CALL_NS / 1e9)
    for row in summary["ops"]:
        assert row["replayed_s"] > 0 and row["model_s"] > 0, row
    step = summary["per_step"]
    assert step["in_situ_s"] == pytest.approx(4 * CALL_NS / 1e9)
    assert step["replayed_s"] > 0 and step["model_s"] > 0 and step["replayed_wall_s"] > 0
    for name in ("run.json", "replay.csv", "replay_ranks.csv", "replay_steps.csv",
                 "replayed.jsonl", "summary.md", "replay.png"):
        assert (run / name).exists(), name
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["replay"]["steps"] == 12
    assert "in situ" in (run / "summary.md").read_text()
    table = done.stderr  # --json: the table goes to stderr
    assert "step wall" in table and "calls added" in table and "replayed" in table


def test_four_ranks_two_groups_and_async_calls(tmp_path):
    trace = manual_loop(tmp_path / "trace", world=4, steps=2, numel=1 << 12)
    done, run, summary = replay(tmp_path, trace, "--steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["steps"] == 4
    assert_matches_trace(trace, run, summary, [1, 2, 1, 2])
    allreduce = next(r for r in summary["ops"] if r["op"] == "allreduce")
    assert allreduce["ranks"] == 4 and allreduce["calls"] == 2.5  # ranks 0, 1: 3; 2, 3: 2


def test_every_kind_of_call_is_replayed_with_the_trace_bytes(tmp_path):
    """Rooted ops on and off their root, uneven all-to-all splits, async calls sharing a
    buffer shape (each in flight gets its own), barriers, a reduction gloo lacks."""
    trace = every_op(tmp_path / "trace")
    done, run, summary = replay(tmp_path, trace, "--steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {row["op"] for row in summary["ops"]} == {
        "reduce_scatter", "reduce", "gather", "scatter", "alltoall", "barrier", "allreduce"}
    assert_matches_trace(trace, run, summary, [1, 2, 1, 2])


def test_named_steps_and_step_zero(tmp_path):
    trace = manual_loop(tmp_path / "trace", world=2, steps=3)
    done, run, summary = replay(tmp_path, trace, "--steps", "0,2-3", "--warmup", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["steps"] == 3
    assert_matches_trace(trace, run, summary, [0, 2, 3])
    steps = read_csv(run / "replay_steps.csv")
    assert [int(s["step"]) for s in steps if s["rank"] == "0"] == [0, 2, 3]


def min_step_time(run):
    """The fastest replayed step's call time, rank-mean: robust to a busy machine's spells."""
    steps = read_csv(run / "replay_steps.csv")
    by_index: dict[int, list[float]] = {}
    for s in steps:
        by_index.setdefault(int(s["index"]), []).append(float(s["calls_s"]))
    return min(sum(v) / len(v) for v in by_index.values())


def test_a_slowed_collective_reads_slower(tmp_path):
    """COMMBENCH_FAULT slow=2: every call costs 2x through the real transport; the replay
    really runs the calls, so it reads about 2x slower (bound: 1.4x, on the fastest step)."""
    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 18, allreduces=4)
    clean_done, clean, _ = replay(tmp_path / "clean", trace, "--steps", "12")
    slow_done, slow, _ = replay(tmp_path / "slow", trace, "--steps", "12",
                                env={"COMMBENCH_FAULT": "slow=2"})
    assert clean_done.returncode == 0, clean_done.stderr[-3000:]
    assert slow_done.returncode == 0, slow_done.stderr[-3000:]
    ratio = min_step_time(slow) / min_step_time(clean)
    assert ratio > 1.4, f"slow=2 read only {ratio:.2f}x the clean replay"


def test_a_halved_buffer_is_refused(tmp_path):
    trace = manual_loop(tmp_path / "trace", world=2, steps=2)
    done, run, _ = replay(tmp_path, trace, env={"COMMBENCH_REPLAY_FAULT": "halve:allgather"})
    assert done.returncode == 3, done.stderr[-3000:]
    assert "hands torch 16384 bytes, the trace says 32768" in done.stderr
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "the trace says" in meta["error"]


def test_recorded_gaps_are_waited_for(tmp_path):
    """--gaps recorded sleeps the 1 ms of compute recorded between calls: 3 gaps a step (the
    first call of a step waits for nothing). A step's wall is bounded on both sides by what the
    run recorded of that step, never by a time of this machine: at least its calls' own times
    and the 3 gaps (one rank's calls run one after another; a sleep lasts at least as asked);
    at most its calls' times and the intervals between them, with the wait before the first
    call (the compute since the previous step) a sleep of at least the gap too, and what lies
    after the last (the barrier's exit, the clock) under the median interval between calls. A
    wall that counted anything else (a barrier, a sleep after the last call, the warm-up)
    breaks the upper bound."""
    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 10)
    done, run, summary = replay(tmp_path, trace, "--gaps", "recorded", "--steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    gap = GAP_NS / 1e9
    rows = read_csv(run / "replay_steps.csv")
    assert len(rows) == 2 * 4
    for step in rows:
        assert float(step["wall_s"]) >= float(step["calls_s"]) + 3 * gap, step
    intervals, leads, tails = [], [], []
    records = read_replayed(run)
    assert len(records) == 2
    for record in records:
        for step in record["steps"]:
            if step["index"] < 0:
                continue  # the warm-up: not in the figures
            calls = sorted(step["calls"], key=lambda c: c[1])  # [seq, issued, ended, ...]
            assert len(calls) == 4
            between = [b[1] - a[2] for a, b in zip(calls, calls[1:], strict=False)]
            assert min(between) >= gap, between  # each interval is a sleep of the gap
            lead, tail = calls[0][1], step["wall_s"] - calls[-1][2]
            assert lead >= 0 and tail >= 0, (lead, tail)
            intervals += between
            leads.append(lead)
            tails.append(tail)
    usual = statistics.median(intervals)
    # A step's first call waits for the compute since the previous step's last completion (a
    # straggler's slow forward lives there, issue 42): a sleep of the gap, like the rest.
    assert min(leads) >= gap and statistics.median(tails) < usual, (leads, tails, intervals)
    walls = [float(step["wall_s"]) for step in rows]
    assert min(walls) <= summary["per_step"]["replayed_wall_s"] <= max(walls)
    assert any("--gaps recorded" in note for note in summary["notes"])


def test_curves_of_another_run_price_the_calls(tmp_path):
    """The base run measured allreduce and allgather (8 B - 1 MiB) on 2 ranks: the 1 MiB
    allreduce is read as measured, the 32K allgather interpolated, the broadcast (not in the
    run) is left unpriced with a note."""
    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 18, allreduces=1)
    done, _, summary = replay(tmp_path, trace, "--curves", BASE_RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    sources = {row["op"]: row["model_source"] for row in summary["ops"]}
    assert sources == {"allreduce": "measured", "allgather": "interpolated",
                       "broadcast": "not priced"}, sources
    allreduce = next(r for r in summary["ops"] if r["op"] == "allreduce")
    lines = Path(BASE_RUN, "results.jsonl").read_text().splitlines()
    base = [json.loads(line) for line in lines]
    at_1m = next(r for r in base if r["op"] == "allreduce" and r["size_bytes"] == 1 << 20)
    assert allreduce["model_s"] == pytest.approx(at_1m["lat_us_p50"] * 1e-6)
    broadcast = next(r for r in summary["ops"] if r["op"] == "broadcast")
    assert broadcast["model_s"] is None
    priced = sum(r["model_s"] for r in summary["ops"] if r["model_s"] is not None)
    assert summary["per_step"]["model_s"] == pytest.approx(priced)
    assert any("broadcast" in note and "not priced" in note for note in summary["notes"])


@pytest.mark.parametrize("case", ["missing", "not-a-trace", "order", "too-few-ranks",
                                  "bad-steps", "dtype", "cut-header", "torn-step"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    trace = manual_loop(tmp_path / "trace", world=2, steps=2)
    args = [str(trace)]
    if case == "missing":
        args = [str(tmp_path / "nowhere")]
    elif case == "not-a-trace":
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "rank-0.jsonl").write_text('{"format": "something-else"}\n')
        args = [str(tmp_path / "other")]
    elif case == "order":
        lines = (trace / "rank-1.jsonl").read_text().splitlines()
        del lines[3]  # rank 1 drops a call: the group's members disagree
        (trace / "rank-1.jsonl").write_text("\n".join(lines) + "\n")
    elif case == "too-few-ranks":
        args += ["--nproc", "1"]
    elif case == "bad-steps":
        args += ["--steps", "5-6"]  # steps the trace does not have
    elif case == "cut-header":  # a rank that crashed while writing its first line
        (trace / "rank-1.jsonl").write_text('{"format": "commbench-trace", "versi')
    elif case == "torn-step":  # rank 1's last line cut by a crash; step 2 asked for
        text = (trace / "rank-1.jsonl").read_text()
        (trace / "rank-1.jsonl").write_text(text[:-30])
        args += ["--steps", "1-2"]
    else:
        for path in trace.glob("rank-*.jsonl"):  # every rank alike: the order still agrees
            path.write_text(path.read_text().replace('"float32"', '"float99"', 1))
    started = time.monotonic()
    done, _ = commbench(["replay", *args], tmp_path, timeout=60)
    assert done.returncode == 2, (case, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert time.monotonic() - started < 30  # refused before any rank starts
    expected = {"missing": "no such trace folder", "not-a-trace": "not a commbench trace",
                "order": "disagree", "too-few-ranks": "needs 2 ranks and this launch has 1",
                "bad-steps": "the trace has steps 0-2",
                "dtype": "this torch has no dtype float99",
                "cut-header": "rank-1.jsonl:1: the header line is cut short",
                "torn-step": "a crash cut the recording short (rank-1.jsonl:"}[case]
    assert expected in lines[0], lines[0]


def test_a_hung_rank_ends_the_run_in_bounded_time(tmp_path):
    """Rank 1 sleeps 60 s before its collectives; with --timeout 5 rank 0's call times out,
    and the run ends, exit 3, naming the step, the call and rank 1."""
    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 10)
    started = time.monotonic()
    done, _ = commbench(["replay", str(trace), "--timeout", "5", "--name", "hung"], tmp_path,
                        timeout=120, env={"COMMBENCH_FAULT": "delay=60:1"})
    assert done.returncode == 3, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    assert "timeout" in done.stderr and "replay" in done.stderr, done.stderr[-2000:]
    run = tmp_path / "results" / "hung"
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed"
    # The failed run kept nothing (the figures need every rank's numbers, handed over at the
    # end): the same --name runs again without --force and replaces it.
    assert "no --force needed" in done.stderr
    again, _ = commbench(["replay", str(trace), "--name", "hung", "--steps", "1"], tmp_path,
                         timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "replacing" in again.stderr and "failed" in again.stderr
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    refused, _ = commbench(["replay", str(trace), "--name", "hung"], tmp_path, timeout=60)
    assert refused.returncode == 2 and "--force" in refused.stderr  # a complete run is kept


# ---- recorded by `commbench record` from real jobs, then replayed -----------------------------

@pytest.mark.core
def test_a_recorded_ddp_job_replays_ddps_buckets(tmp_path, ddp_recording):
    """DDP on 2 gloo ranks through torchrun, recorded: every replayed step (after the bucket
    rebuild of step 1) allreduces exactly DDP's gradient bytes in DDP's bucket count."""
    done, trace = ddp_recording.done, ddp_recording.folder
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(ddp_recording.facts.read_text())
    buckets = str(facts["bucket_bytes"]).split(",")
    done, run, summary = replay(tmp_path / "replay", trace, "--steps", "2-3")
    assert done.returncode == 0, done.stderr[-3000:]
    allreduce = next(r for r in summary["ops"] if r["op"] == "allreduce")
    assert allreduce["replayed_bytes"] == allreduce["bytes"] == facts["gradient_bytes"]
    assert allreduce["replayed_calls"] == allreduce["calls"] == len(buckets) >= 2
    assert allreduce["in_situ_s"] > 0 and allreduce["replayed_s"] > 0
    assert_matches_trace(trace, run, summary, [2, 3])


def test_a_recorded_job_with_subgroups_and_p2p_replays(tmp_path, spawning_recording):
    """3 ranks spawned by the script itself: world allreduces, a broadcast on a subgroup, a
    send from rank 0 to rank 2; the replay makes every one of them, the same bytes."""
    done, trace = spawning_recording.done, spawning_recording.folder
    assert done.returncode == 0, done.stderr[-3000:]
    done, run, summary = replay(tmp_path / "replay", trace, "--steps", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    ops = {row["op"]: row for row in summary["ops"]}
    assert set(ops) == {"allreduce", "broadcast", "send", "recv"}
    assert ops["send"]["ranks"] == ops["recv"]["ranks"] == 1
    assert ops["broadcast"]["ranks"] == 2 and ops["send"]["bytes"] == 40
    assert_matches_trace(trace, run, summary, [1, 2, 1, 2])


def test_a_recorded_fsdp2_job_replays_its_gathers_and_scatters(tmp_path, fsdp_recording):
    """FSDP2 (fully_shard) on a 2x2 CPU mesh, 4 gloo ranks through torchrun: per step the
    replay all-gathers the unsharded parameter bytes twice (forward, then backward again)
    and reduce-scatters them once, on the mesh's shard groups, as recorded."""
    if fsdp_limit(fsdp_recording):
        pytest.skip(fsdp_limit(fsdp_recording))
    done, trace = fsdp_recording.done, fsdp_recording.folder
    assert done.returncode == 0, done.stderr[-3000:]
    unsharded = json.loads(Path(f"{fsdp_recording.facts}.0").read_text())["unsharded_bytes"]
    done, run, summary = replay(tmp_path / "replay", trace, "--steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    ops = {row["op"]: row for row in summary["ops"]}
    assert ops["allgather"]["replayed_bytes"] == ops["allgather"]["bytes"] == 2 * unsharded
    assert ops["reduce_scatter"]["replayed_bytes"] == ops["reduce_scatter"]["bytes"] == unsharded
    assert_matches_trace(trace, run, summary, [1, 2])


def test_an_imported_torch_profiler_trace_replays(tmp_path):
    """A profiler trace of an NCCL job, imported (commbench import torch-profiler), replays on
    CPUs with --backend gloo; without it the trace's nccl is refused here in one line."""
    done, _ = commbench(["import", "torch-profiler", "tests/fixtures/profiler/nccl-handmade"],
                        tmp_path, timeout=60)  # the helper's --out is the trace folder here
    assert done.returncode == 0, done.stderr
    trace = tmp_path / "results"
    import torch

    if not torch.cuda.is_available():
        refused, _ = commbench(["replay", str(trace)], tmp_path / "refused", timeout=60)
        assert refused.returncode == 2 and "--backend gloo" in refused.stderr, refused.stderr
    done, run, summary = replay(tmp_path / "replay", trace, "--backend", "gloo", "--steps",
                                "all")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {"allreduce", "send", "recv", "alltoall"} <= {row["op"] for row in summary["ops"]}
    assert_matches_trace(trace, run, summary, [5, 6])


def test_under_torchrun_every_process_is_a_rank_and_extra_ranks_only_make_groups(tmp_path):
    """torchrun starts 3 processes for a 2-rank trace: rank 0 writes the one folder, rank 2
    only makes the groups; a 3-rank trace under 2 processes is refused in one line."""
    import os
    import subprocess

    trace = manual_loop(tmp_path / "trace", world=2, steps=2, numel=1 << 10)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_", "PMI"))}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    done = subprocess.run([*torchrun, "--nproc-per-node", "3", "-m", "commbench", "replay",
                           str(trace), "--json", "--out", str(tmp_path / "out"), "--name",
                           "under-torchrun", "--steps", "3"], capture_output=True, text=True,
                          timeout=150, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["under-torchrun"]
    meta = json.loads((tmp_path / "out" / "under-torchrun" / "run.json").read_text())
    assert (meta["launcher"], meta["world_size"]) == ("torchrun", 3)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 3
    assert "rank 2 only takes part in making the groups" in done.stderr
    wide = manual_loop(tmp_path / "wide", world=3, steps=1, numel=1 << 10)
    done = subprocess.run([*torchrun, "--nproc-per-node", "2", "-m", "commbench", "replay",
                           str(wide), "--out", str(tmp_path / "out2")], capture_output=True,
                          text=True, timeout=150, env=env)
    assert done.returncode != 0
    assert "needs 3 ranks and this launch has 2" in done.stderr
