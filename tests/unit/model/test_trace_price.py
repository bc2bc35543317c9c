"""``commbench estimate --trace DIR --run RUN``: a recorded step priced on a run's curves.

Traces are written here with results.trace.write_rank; every expected time is looked up in the
fixture run's own rows (results.jsonl) at the sizes the trace's calls have, so the test knows
the answer without the pricing code's reading of curves.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.commands.estimate import run_trace_estimate
from commbench.core.errors import EXIT_USAGE
from commbench.model.trace_price import CurvePricer, price_trace
from commbench.results import load_run
from commbench.results import trace as trace_format
from commbench.results.trace import Call, Group
from commbench.specs.estimate import StepOptions
from tests.unit.stragglers.synthetic import ddp_job

FIXTURES = Path(__file__).parents[2] / "fixtures"


def p50(run, op, size, dim=""):
    """The fixture's own median at that size: the answer, read off the file."""
    rows = [json.loads(line) for line in (FIXTURES / run / "results.jsonl").open()]
    found = [r["lat_us_p50"] for r in rows if r["op"] == op and r["size_bytes"] == size
             and (r.get("dim") or "") == (dim or "")]
    assert len(found) == 1, (run, op, size, dim, found)
    return found[0] * 1e-6


def write_trace(folder, groups, calls_of_rank, backend="gloo"):
    folder.mkdir(parents=True, exist_ok=True)
    world = max(max(g.ranks) for g in groups.values()) + 1
    for rank in range(world):
        head = trace_format.header(torch_version="2.13.0", backend=backend, world_size=world,
                                   rank=rank, host="test", groups=groups)
        calls = [Call(seq=i, **fields) for i, fields in enumerate(calls_of_rank(rank))]
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls)
    return trace_format.load(folder)


WORLD2 = {"0": Group("0", (0, 1), "gloo", "default_pg")}


def two_rank_calls(rank):
    # Step 0: three allreduces of 4 KiB (1024 float32) and one of 1 MiB; a barrier.
    # Step 1: one allreduce of 64 KiB. In-situ times: 1 ms per call, from issue and end.
    small = dict(pg="0", op="allreduce", dtype="float32", in_numel=1024, out_numel=1024,
                 step=0, t_issue_ns=0, t_end_ns=1_000_000)
    return [small, small, small,
            {**small, "in_numel": 262144, "out_numel": 262144},
            dict(pg="0", op="barrier", dtype="float32", in_numel=0, out_numel=0, step=0),
            {**small, "in_numel": 16384, "out_numel": 16384, "step": 1}]


def test_a_recorded_step_costs_what_the_runs_rows_say_at_its_sizes(tmp_path):
    trace = write_trace(tmp_path / "t", WORLD2, two_rank_calls)
    priced = price_trace(trace, load_run(FIXTURES / "model-exact").rows, steps=[0, 1])
    step0 = (3 * p50("model-exact", "allreduce", 4096)
             + p50("model-exact", "allreduce", 1048576) + p50("model-exact", "barrier", 0))
    assert priced.step_model_s(0) == pytest.approx(step0, rel=1e-12)
    assert priced.step_model_s(1) == pytest.approx(p50("model-exact", "allreduce", 65536))
    lines = [(ln.step, ln.op, ln.nbytes, ln.calls, ln.source) for ln in priced.lines]
    assert lines == [(0, "allreduce", 4096, 3, "measured"),
                     (0, "allreduce", 1048576, 1, "measured"),
                     (0, "barrier", 0, 1, "measured (barrier)"),
                     (1, "allreduce", 65536, 1, "measured")]
    # In situ: 1 ms per timed call; the barrier has no times, so step 0's is unknown.
    assert priced.step_in_situ_s(0) is None
    assert priced.step_in_situ_s(1) == pytest.approx(1e-3)
    assert priced.mean_model_s == pytest.approx((step0 + priced.step_model_s(1)) / 2)
    assert priced.notes[-1] == "assumes no overlap with compute"


def test_an_allgather_reads_its_gathered_size_and_a_mesh_dims_rows_are_measured(tmp_path):
    # model-mesh: 8 ranks as dp=2,tp=4, bfloat16 allreduce rows for tp groups, dp groups and
    # the whole world. A call on a 4-rank group reads the tp rows, on a 2-rank group the dp
    # rows, on the world the whole-world rows: each measured, none projected.
    groups = {"0": Group("0", tuple(range(8)), "nccl", "default_pg"),
              "tp": Group("tp", (0, 1, 2, 3)), "dp": Group("dp", (0, 4))}

    def calls(rank):
        base = dict(op="allreduce", dtype="bfloat16", in_numel=524288, out_numel=524288)
        return [{**base, "pg": "tp"}, {**base, "pg": "dp"}, {**base, "pg": "0"}]

    trace = write_trace(tmp_path / "t", groups, calls, backend="nccl")
    priced = price_trace(trace, load_run(FIXTURES / "model-mesh").rows, rank=0)
    times = [ln.per_call_s for ln in priced.lines]
    assert times == pytest.approx([p50("model-mesh", "allreduce", 1048576, "tp"),
                                   p50("model-mesh", "allreduce", 1048576, "dp"),
                                   p50("model-mesh", "allreduce", 1048576)])
    assert {ln.source for ln in priced.lines} == {"measured"}
    # Size = the largest buffer (docs/reference/metrics-and-formulas.md#sizes): an allgather of 256
    # elements per rank into 512 is read at 512 x 4 B = 2 KiB.
    gather = Call(seq=0, pg="0", op="allgather", dtype="float32", in_numel=256, out_numel=512)
    assert gather.size_bytes == 2048


def test_between_measured_sizes_the_price_lies_between_the_neighbours(tmp_path):
    groups = {"0": Group("0", (0, 1, 2, 3), "nccl", "default_pg")}
    trace = write_trace(tmp_path / "t", groups, lambda rank: [
        dict(pg="0", op="allreduce", dtype="float32", in_numel=1 << 20, out_numel=1 << 20)],
        backend="nccl")
    priced = price_trace(trace, load_run(FIXTURES / "torch-a100").rows)
    (line,) = priced.lines
    assert line.nbytes == 4 << 20 and line.source == "interpolated"
    assert p50("torch-a100", "allreduce", 1 << 20) < line.per_call_s < \
        p50("torch-a100", "allreduce", 16 << 20)


def test_an_op_the_run_lacks_is_left_out_with_a_note_naming_what_to_measure(tmp_path):
    def calls(rank):
        return [dict(pg="0", op="allreduce", dtype="float32", in_numel=1024, out_numel=1024),
                dict(pg="0", op="broadcast", dtype="float32", in_numel=1024, out_numel=1024,
                     root=0)]

    trace = write_trace(tmp_path / "t", WORLD2, calls)
    priced = price_trace(trace, load_run(FIXTURES / "model-exact").rows)
    broadcast = next(ln for ln in priced.lines if ln.op == "broadcast")
    assert broadcast.per_call_s is None and broadcast.model_s is None
    assert priced.step_model_s(0) == pytest.approx(p50("model-exact", "allreduce", 4096))
    assert ("broadcast calls are not priced: the run has no broadcast rows: measure "
            "`commbench broadcast`") in priced.notes
    assert "1 call(s) of rank 0 could not be priced and are left out of the step times" in \
        priced.notes


def test_the_rank_shown_is_the_costliest_and_p2p_reads_the_p2p_rows(tmp_path):
    # model-step (nccl, 8 ranks, bfloat16): every rank allreduces 1 MiB; rank 0 also sends
    # 1 MiB to rank 1, which receives it. Ranks 0 and 1 cost more than the others.
    groups = {"0": Group("0", tuple(range(8)), "nccl", "default_pg")}

    def calls(rank):
        mine = [dict(pg="0", op="allreduce", dtype="bfloat16", in_numel=1 << 19,
                     out_numel=1 << 19)]
        if rank == 1:
            mine.append(dict(pg="0", op="recv", dtype="bfloat16", in_numel=1 << 19,
                             out_numel=1 << 19, peer=0))
        if rank == 0:
            mine.append(dict(pg="0", op="send", dtype="bfloat16", in_numel=1 << 19,
                             out_numel=1 << 19, peer=1))
        return mine

    trace = write_trace(tmp_path / "t", groups, calls, backend="nccl")
    rows = load_run(FIXTURES / "model-step").rows
    priced = price_trace(trace, rows)
    pingpong = [r["lat_us_p50"] * 1e-6 for r in rows if r["op"] == "p2p"
                and r["pattern"] == "pingpong" and r["size_bytes"] == 1 << 20]
    assert priced.rank == 0  # ranks 0 and 1 cost the same; the lowest is shown
    assert priced.step_model_s(0) == pytest.approx(
        p50("model-step", "allreduce", 1 << 20) + pingpong[0])
    assert priced.rank_totals[2][0] == pytest.approx(p50("model-step", "allreduce", 1 << 20))
    assert priced.rank_totals[1] == priced.rank_totals[0]
    assert price_trace(trace, rows, rank=5).rank == 5
    # The pricer is a replay Price: (rank, call) -> (seconds, source).
    pricer = CurvePricer(rows, trace.groups)
    seconds, source = pricer(1, trace.calls(1)[1])
    assert (seconds, source) == (pytest.approx(pingpong[0]), "measured")


def test_json_is_one_object_and_bad_combinations_are_one_line_exit_2(tmp_path, capsys):
    folder = tmp_path / "t"
    write_trace(folder, WORLD2, two_rank_calls)
    assert run_trace_estimate(str(folder), str(FIXTURES / "model-exact"), [1], None,
                              json_out=True) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["steps"] == [1] and document["run"] == "model-exact"
    assert document["per_step"][0]["model_s"] == pytest.approx(
        p50("model-exact", "allreduce", 65536))
    assert {"op", "dtype", "bytes", "calls", "model_s", "in_situ_s", "source"} <= set(
        document["ops"][0])
    cut = tmp_path / "cut"
    write_trace(cut, WORLD2, two_rank_calls)
    (cut / "rank-1.jsonl").write_text('{"format": "commbench-trace", "vers')  # crashed at once
    done = subprocess.run([sys.executable, "-m", "commbench", "estimate", "--trace", str(cut),
                           "--run", str(FIXTURES / "model-exact")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {cut / 'rank-1.jsonl'}:1: the header line is cut short (the recording "
        "crashed before its first line was written): not a usable trace"]
    cases = [(["--params", "7B"], "--params describe an idealised model"),
             (["--step", "9"], "no step 9 in the trace"),
             (["--rank", "4"], "no file for rank 4")]
    for extra, fragment in cases:
        done = subprocess.run([sys.executable, "-m", "commbench", "estimate", "--trace",
                               str(folder), "--run", str(FIXTURES / "model-exact"), *extra],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == EXIT_USAGE, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], lines
    done = subprocess.run([sys.executable, "-m", "commbench", "estimate", "--trace",
                           str(folder), str(FIXTURES / "model-exact")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip().splitlines()
    assert out[-1] == "assumes no overlap with compute"
    # by default the trace's steps only: step 0 (set-up) is named as left out, not priced
    assert any(line.startswith("1     step total") for line in out)
    assert not any(line.startswith("0 ") for line in out)
    assert any(line.startswith("note: not priced: step 0 (set-up") for line in out), out


def test_an_imported_profiler_trace_is_priced(tmp_path, capsys):
    from commbench.commands.imports import run_import_profiler

    folder = tmp_path / "nccl"
    assert run_import_profiler(str(FIXTURES / "profiler" / "nccl-handmade"), str(folder),
                               force=False) == 0
    capsys.readouterr()
    assert run_trace_estimate(str(folder), str(FIXTURES / "model-step"), None, None,
                              json_out=True) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["steps"] == [5, 6]
    in_situ = {line["step"]: line["in_situ_s"] for line in document["ops"]
               if line["op"] == "allreduce"}
    assert in_situ == {5: pytest.approx(412.5e-6), 6: pytest.approx(401e-6)}


def test_pricing_a_trace_does_not_import_torch():
    code = ("import sys; import commbench.model.trace_price, commbench.commands.estimate; "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_run_is_an_argument_or_run_and_trace_options_need_trace(tmp_path):
    from commbench.commands.estimate import choose_run, run_estimate
    from commbench.core.errors import UsageError

    assert choose_run("a", None) == choose_run(None, "a") == choose_run("a", "a") == "a"
    with pytest.raises(UsageError, match="two runs given"):
        choose_run("a", "b")
    with pytest.raises(UsageError, match="needs a result folder"):
        choose_run(None, None)
    with pytest.raises(UsageError, match="--step reads a recorded trace"):
        run_estimate(str(FIXTURES / "model-exact"), StepOptions(params="1B", dp=2), False, step=[1])
    with pytest.raises(UsageError, match="needs --params"):
        run_estimate(str(FIXTURES / "model-exact"), StepOptions(params=None, dp=2), False)


# --- waits before a call ---
# estimate --trace on a job with a straggler: nothing priced is said as such (not 0.000 and
# "the rank whose steps cost most"), and the rank the others waited for is named (by the
# command, which asks stragglers' rule and hands the note to the pricer).


def test_nothing_priced_is_said_and_the_straggler_named(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, slow={2: 0.03}))
    # model-exact has allreduce rows, but not at float32 x 4 ranks: nothing prices
    rows = [r for r in load_run(FIXTURES / "model-exact").rows if r["op"] == "broadcast"]
    priced = price_trace(trace, rows)
    text = "\n".join(priced.notes)
    assert "nothing was priced" in text
    assert "the rank whose steps cost most" not in text
    assert "waited for" not in text  # the pricer names no one by itself


def test_the_command_names_the_rank_the_others_waited_for(tmp_path, capsys):
    from tests.unit.history.cli_helper import run_cli

    folder = ddp_job(tmp_path, slow={2: 0.03})
    code, out, err = run_cli(capsys, "estimate", str(FIXTURES / "model-exact"),
                             "--trace", str(folder))
    assert code == 0, err
    assert "the others waited for rank 2 (culprit" in out + err
    assert "commbench stragglers" in out + err


def test_a_clean_job_names_no_rank_waited_for(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path))
    priced = price_trace(trace, load_run(FIXTURES / "model-exact").rows)
    assert not any("waited for" in note for note in priced.notes)
