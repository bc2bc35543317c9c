"""replay's pure parts (replay.plan, replay.price, output.replay): which steps, the
recorded gaps, the distinct calls timed alone, the figures from ranks' numbers; no process."""

import pytest

from commbench.core.errors import UsageError
from commbench.replay import figures as replay_figures
from commbench.replay import plan as replay
from commbench.replay.price import ISOLATED, isolated_prices
from commbench.results import trace as trace_format
from tests.replay_traces import CALL_NS, GAP_NS, manual_loop
from tests.unit.stragglers.synthetic import ddp_job


def call(seq, op="allreduce", step=1, pg="0", numel=16, is_async=False, issue=None, end=None,
         peer=None, out=None):
    return trace_format.Call(seq=seq, pg=pg, op=op, dtype="float32", in_numel=numel,
                             out_numel=numel if out is None else out, step=step, peer=peer,
                             is_async=is_async, t_issue_ns=issue, t_end_ns=end)


def legacy(steps):
    """select_steps as a trace that does not say where its steps ended sees it."""
    return trace_format.StepSplit(tuple(steps[1:]), steps[0] if steps[1:] else None) \
        if steps else trace_format.StepSplit(())


def test_default_steps_skip_step_zero_in_whole_passes():
    assert replay.select_steps(legacy([0, 1, 2, 3]), [0, 1, 2, 3], None) == [1, 2, 3] * 4
    assert replay.select_steps(trace_format.StepSplit((0,)), [0], None) == [0] * 10
    assert replay.select_steps(legacy(list(range(30))), list(range(30)), None) == list(
        range(1, 30))


def test_steps_as_a_count_a_range_or_all():
    assert replay.select_steps(legacy([0, 1, 2]), [0, 1, 2], "5") == [1, 2, 1, 2, 1]
    assert replay.select_steps(legacy([0, 1, 2, 3]), [0, 1, 2, 3], "0,2-3") == [0, 2, 3]
    assert replay.select_steps(legacy([0, 1, 2]), [0, 1, 2], "all") == [0, 1, 2]
    for bad in ("0", "4-5", "x", "3-1"):
        with pytest.raises(UsageError, match="--steps"):
            replay.select_steps(legacy([0, 1, 2]), [0, 1, 2], bad)
    with pytest.raises(UsageError, match="no calls"):
        replay.select_steps(legacy([]), [], None)


def test_the_tail_after_the_last_step_end_and_set_up_are_not_steps(tmp_path):
    """A Trainer-like recording: 3 step ends, each step one allreduce, and one allgather
    after the last end (the tail). Only steps 1-2 are replayed and averaged over, and
    estimate --trace uses the very same rule."""
    trace = trace_format.load(ended_trace(tmp_path, ends=3, tail=True))
    split = trace_format.step_split(trace)
    assert split.steps == (1, 2) and split.setup == 0
    assert split.tail == (3,) and split.tail_calls == 1
    assert "step 0 (set-up" in split.left_out() and "a tail of 1 call" in split.left_out()
    assert replay.select_steps(split, trace.steps(), None) == [1, 2] * 5
    plan = replay.make_plan(trace, replay.select_steps(split, trace.steps(), None), "none",
                            isolated=False)
    results = fake_results(trace, plan)
    summary = replay_figures.summarise(trace, plan, results, lambda rank, c: (1e-4, "x"))
    ops = {row["op"]: row for row in summary.ops}
    assert set(ops) == {"allreduce"} and ops["allreduce"]["calls"] == 1  # not 0.75
    from commbench.model.trace_price import price_trace
    from commbench.results import load_run

    priced = price_trace(trace, load_run("tests/fixtures/base").rows)
    assert priced.steps == [1, 2]
    assert any("a tail of 1 call" in note for note in priced.notes)


def ended_trace(folder, ends: int, tail: bool, world: int = 2):
    """A recorder's trace: step 0 a broadcast (set-up) and an allreduce, steps 1..ends-1 one
    allreduce each, then (tail) one allgather after the last end."""
    groups = {"0": trace_format.Group("0", tuple(range(world)), "gloo", "default_pg")}
    for rank in range(world):
        calls = [call(0, op="broadcast", step=0, numel=1024, issue=0, end=10)]
        for step in range(ends):
            calls.append(call(len(calls), step=step, numel=256, issue=100 * step + 20,
                              end=100 * step + 60))
        if tail:
            calls.append(call(len(calls), op="allgather", step=ends, numel=4, out=4 * world,
                              issue=100 * ends, end=100 * ends + 5))
        head = trace_format.header(torch_version="t", backend="gloo", world_size=world,
                                   rank=rank, host="h", groups=groups, steps_ended=ends)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls,
                                [100 * s for s in range(1, ends + 1)])
    return folder


def test_an_op_some_steps_lack_says_so_rather_than_a_mean_no_step_had(tmp_path):
    """DDP's rebuild broadcasts happen in one step: the table shows 0-2 calls a step, and a
    note names the step, instead of 0.67 as if every step had made it."""
    from commbench.output import replay as render

    trace = trace_format.load(manual_loop(tmp_path, world=2, steps=3, numel=64))
    for rank in trace.ranks.values():  # the broadcast of steps 2 and 3 dropped
        rank.calls = [c for c in rank.calls if not (c.op == "broadcast" and c.step > 1)]
    plan = replay.make_plan(trace, [1, 2, 3], "none", isolated=False)
    summary = replay_figures.summarise(trace, plan, fake_results(trace, plan),
                                       lambda rank, c: (1e-4, "x"))
    broadcast = next(r for r in summary.ops if r["op"] == "broadcast")
    assert (broadcast["calls_min"], broadcast["calls_max"]) == (0, 1)
    assert any("made in 1 of the 3 replayed recorded step(s) (step 1)" in n
               for n in summary.notes)
    head = {"trace": "t", "world": 2, "backend": "gloo", "gaps": "none", "model": "alone"}
    row = next(line for line in render.table_lines(summary, head, 200)
               if line.startswith("broadcast"))
    assert row.split()[3] == "0-1", row  # calls/step: fewest-most, not the mean 0.33


def test_the_step_wall_comes_before_the_calls_added(tmp_path):
    """The step's time is its wall; the calls' times added (overlapping async calls and their
    queueing counted each time) come second and say what they are."""
    from commbench.output import replay as render

    trace = trace_format.load(manual_loop(tmp_path, world=2, steps=1, numel=64))
    plan = replay.make_plan(trace, [1], "none", isolated=False)
    summary = replay_figures.summarise(trace, plan, fake_results(trace, plan),
                                       lambda rank, c: (1e-4, "x"))
    head = {"trace": "t", "world": 2, "backend": "gloo", "gaps": "none", "model": "alone",
            "left_out": "step 0 (set-up: before the first step ended)"}
    lines = render.table_lines(summary, head, 200)
    firsts = [line.split("  ")[0] for line in lines]
    assert firsts.index("step wall") < firsts.index("calls added")
    assert "step total" not in "\n".join(lines)
    assert "# not replayed: step 0 (set-up" in lines[1]


def test_gaps_run_from_the_predecessors_end_or_an_async_ones_issue():
    calls = [call(0, issue=0, end=10), call(1, issue=25, end=30, is_async=True),
             call(2, issue=32, end=50), call(3, issue=45, end=60)]
    waits = replay.gaps(calls)
    assert waits == {0: 0.0, 1: 15e-9, 2: 7e-9, 3: 0.0}  # the last overlaps: no wait


def test_isolated_plan_has_each_distinct_call_once_for_every_member(tmp_path):
    trace = trace_format.load(manual_loop(tmp_path, world=4, steps=2, numel=64))
    items = replay.isolated_plan(trace, [1, 2])
    # group (0, 1) first (sorted by members), then the world's three distinct calls
    assert [(i.group, i.op) for i in items] == [("1", "allreduce"), ("0", "allreduce"),
                                               ("0", "broadcast"), ("0", "allgather")]
    assert [rank for rank, _ in items[0].calls] == [0, 1]
    assert [rank for rank, _ in items[1].calls] == [0, 1, 2, 3]


def test_p2p_items_pair_the_kth_send_with_the_kth_recv(tmp_path):
    groups = {"0": trace_format.Group("0", (0, 1))}
    for rank in (0, 1):
        op, peer = ("send", 1) if rank == 0 else ("recv", 0)
        calls = [call(0, op=op, peer=peer, numel=8), call(1, op=op, peer=peer, numel=8),
                 call(2, op=op, peer=peer, numel=32)]
        head = trace_format.header(torch_version="t", backend="gloo", world_size=2, rank=rank,
                                   host="h", groups=groups)
        trace_format.write_rank(tmp_path / f"rank-{rank}.jsonl", head, calls)
    items = replay.isolated_plan(trace_format.load(tmp_path), [1])
    assert [(i.op, i.calls) for i in items] == [("p2p", ((0, 0), (1, 0))),
                                               ("p2p", ((0, 2), (1, 2)))]


def test_check_trace_refuses_missing_ranks_too_few_ranks_and_disorder(tmp_path):
    folder = manual_loop(tmp_path / "t", world=2, steps=1)
    trace = trace_format.load(folder)
    replay.check_trace(trace, 2)
    with pytest.raises(UsageError, match="needs 2 ranks and this launch has 1"):
        replay.check_trace(trace, 1)
    (folder / "rank-1.jsonl").unlink()
    with pytest.raises(UsageError, match="no file for rank"):
        replay.check_trace(trace_format.load(folder), 2)
    folder = manual_loop(tmp_path / "u", world=2, steps=1)
    lines = (folder / "rank-0.jsonl").read_text().splitlines()
    (folder / "rank-0.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(UsageError, match=r"disagree.*in step\(s\) 1: --steps can leave"):
        replay.check_trace(trace_format.load(folder), 2, [0, 1])
    replay.check_trace(trace_format.load(folder), 2, [0])  # a short last step: the rest replays


def test_gaps_recorded_needs_times(tmp_path):
    folder = manual_loop(tmp_path, world=2, steps=1)
    trace = trace_format.load(folder)
    plan = replay.make_plan(trace, [1], "recorded", isolated=False)
    # the step's first call waits for the compute after step 0's last call too
    assert plan.gaps[0] == {1: GAP_NS / 1e9, 2: GAP_NS / 1e9, 3: GAP_NS / 1e9,
                            4: GAP_NS / 1e9}
    for rank in trace.ranks.values():
        for c in rank.calls:
            c.t_issue_ns = c.t_end_ns = None
    with pytest.raises(UsageError, match="needs issue and end times"):
        replay.make_plan(trace, [1], "recorded", isolated=False)
    with pytest.raises(UsageError, match="--gaps"):
        replay.make_plan(trace, [1], "sometimes", isolated=False)


def fake_results(trace, plan, seconds=1e-3, isolated=2e-4, nbytes=None):
    """What the ranks would hand back: every call took ``seconds``, back to back."""
    results = {}
    for rank in trace.ranks:
        steps = []
        for index, step in enumerate(plan.steps):
            calls, clock = [], 0.0
            for c in trace.calls(rank, step):
                size = c.size_bytes if nbytes is None else nbytes
                calls.append([c.seq, clock, clock + seconds, size])
                clock += seconds
            steps.append({"index": index, "step": step, "wall_s": clock, "calls": calls})
        timed = {n: isolated for n, item in enumerate(plan.isolated)
                 if any(r == rank for r, _ in item.calls)}
        results[rank] = replay_figures.RankResult(rank, steps, timed)
    return results


def test_summary_figures_per_op_and_step(tmp_path):
    trace = trace_format.load(manual_loop(tmp_path, world=2, steps=2, numel=256))
    plan = replay.make_plan(trace, [1, 2], "none", isolated=True)
    results = fake_results(trace, plan)
    summary = replay_figures.summarise(trace, plan, results, isolated_prices(trace, plan, results))
    ops = {row["op"]: row for row in summary.ops}
    assert ops["allreduce"]["bytes"] == 2 * 256 * 4 and ops["allreduce"]["calls"] == 2
    assert ops["allgather"]["bytes"] == 4096 * 2 * 4  # the gathered output
    assert ops["allreduce"]["in_situ_s"] == pytest.approx(2 * CALL_NS / 1e9)
    assert ops["allreduce"]["replayed_s"] == pytest.approx(2e-3)
    assert ops["allreduce"]["model_s"] == pytest.approx(4e-4)
    assert ops["allreduce"]["model_source"] == ISOLATED
    assert summary.per_step["replayed_s"] == pytest.approx(4e-3)
    assert summary.per_step["replayed_wall_s"] == pytest.approx(4e-3)
    assert summary.per_step["in_situ_s"] == pytest.approx(4 * CALL_NS / 1e9)
    # a step's span starts where the step before it last completed: its lead gap is in it,
    # as it is in a replay with recorded gaps (the first call waits for it)
    assert summary.per_step["in_situ_span_s"] == pytest.approx((4 * CALL_NS + 4 * GAP_NS) / 1e9)
    assert summary.notes == [] and replay_figures.mismatches(summary) == []
    assert set(summary.as_json()) >= {"steps", "per_step", "ops"}
    assert {"op", "dtype", "bytes", "calls", "in_situ_s", "replayed_s", "model_s"} <= set(
        summary.ops[0])


def test_a_replay_that_moved_other_bytes_is_a_mismatch(tmp_path):
    trace = trace_format.load(manual_loop(tmp_path, world=2, steps=1, numel=256))
    plan = replay.make_plan(trace, [1], "none", isolated=False)
    results = fake_results(trace, plan, nbytes=4)
    summary = replay_figures.summarise(trace, plan, results, lambda rank, c: (None, "not priced"))
    assert replay_figures.mismatches(summary)
    assert summary.per_step["model_s"] is None
    assert any("not priced" in note for note in summary.notes)


def test_table_and_chart_render(tmp_path):
    from commbench.output import replay as render

    trace = trace_format.load(manual_loop(tmp_path / "t", world=2, steps=1, numel=256))
    plan = replay.make_plan(trace, [1], "none", isolated=True)
    results = fake_results(trace, plan)
    summary = replay_figures.summarise(trace, plan, results, isolated_prices(trace, plan, results))
    head = {"trace": "t", "world": 2, "backend": "gloo", "gaps": "none", "model": "alone"}
    lines = render.table_lines(summary, head, 80)
    assert any(line.startswith("allreduce") for line in lines)
    assert any(line.startswith("step wall") for line in lines)
    figure = render.bar_chart(tmp_path / "chart.png", summary, "t")
    assert (tmp_path / "chart.png").stat().st_size > 1000
    assert [t.get_text() for t in figure.axes[0].get_legend().get_texts()] == [
        "in situ", "replayed", "model"]
    markdown = render.summary_markdown(summary, head, {"status": "complete"})
    assert "| op |" in markdown


def test_a_call_the_recording_never_saw_complete_is_left_out_of_in_situ(tmp_path):
    trace = trace_format.load(manual_loop(tmp_path, world=2, steps=1, numel=256))
    trace.ranks[1].calls[-1].t_end_ns = None  # the allgather of step 1 on rank 1
    plan = replay.make_plan(trace, [1], "none", isolated=False)
    results = fake_results(trace, plan)
    summary = replay_figures.summarise(trace, plan, results, lambda rank, c: (1e-4, "x"))
    allgather = next(r for r in summary.ops if r["op"] == "allgather")
    assert allgather["in_situ_s"] == pytest.approx(CALL_NS / 1e9)  # rank 0's alone
    assert allgather["untimed_calls"] == 1
    assert any("left out of in situ" in note for note in summary.notes)


# --- --gaps before a step's first call ---
# --gaps recorded waits for the compute before a step's first call too: a straggler's slow
# forward is what made its step long (docs/commands/replay.md).


def test_a_steps_first_call_waits_for_the_compute_before_it(tmp_path):
    trace = trace_format.load(ddp_job(tmp_path, slow={2: 0.03}, noise_s=0.0))
    plan = replay.make_plan(trace, [3], "recorded", isolated=False)
    first = {rank: trace.calls(rank, 3)[0].seq for rank in trace.ranks}
    waits = {rank: plan.gaps[rank][first[rank]] for rank in trace.ranks}
    assert 0.015 < waits[0] < 0.03  # the others' forward
    assert abs(waits[2] - waits[0] - 0.03) < 0.002  # the straggler's, 30 ms longer
    # without the previous step, the first call waited for nothing (the old rule)
    assert replay.gaps(trace.calls(2, 3))[first[2]] == 0.0
