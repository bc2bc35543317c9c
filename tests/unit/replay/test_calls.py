"""An all-to-all replayed with its recorded split sizes (MoE dispatch and combine): the
buffers are the recorded rows, torch is handed the recorded splits, and a replay that evens
them out is caught by the bytes per peer although its bytes per call are the trace's. No
process group: the calls are bound, never issued."""

import pytest

from commbench.replay import figures as replay_figures
from commbench.replay import plan as replay
from commbench.replay.calls import REPLAY_FAULT_ENV, Binder
from commbench.results import trace as trace_format

HIDDEN = 32  # a token's row: the splits count rows of dim 0, not elements
GROUP = {"0": (None, (0, 1, 2, 3))}


def dispatch(seq=1, step=1, rows_in=(39, 21, 34, 34), rows_out=(25, 21, 18, 20)):
    return trace_format.Call(seq=seq, pg="0", op="alltoall", dtype="float32",
                             in_numel=sum(rows_in) * HIDDEN, out_numel=sum(rows_out) * HIDDEN,
                             step=step, splits={"in": list(rows_in), "out": list(rows_out)},
                             is_async=True, t_issue_ns=10, t_end_ns=20)


def test_the_recorded_rows_and_splits_are_what_torch_is_handed(monkeypatch):
    monkeypatch.delenv(REPLAY_FAULT_ENV, raising=False)
    bound = Binder(0, GROUP, "gloo", "cpu").bind(dispatch())
    output, inp = bound.issue.args[:2]
    assert tuple(inp.shape) == (128, HIDDEN) and tuple(output.shape) == (84, HIDDEN)
    assert bound.issue.keywords["input_split_sizes"] == [39, 21, 34, 34]
    assert bound.issue.keywords["output_split_sizes"] == [25, 21, 18, 20]
    assert bound.issue.keywords["async_op"] is True
    # bytes to and from each peer: rows x 32 float32 (128 B a row)
    assert bound.peers == {"in": [4992, 2688, 4352, 4352], "out": [3200, 2688, 2304, 2560]}
    assert (bound.sent, bound.received) == (128 * 128, 84 * 128)
    assert bound.peers == dispatch().peer_bytes(4) and bound.nbytes == dispatch().size_bytes


def test_even_on_both_sides_but_not_one_buffer_keeps_its_splits(monkeypatch):
    """3 rows to each peer, 2 from each: no even call of one buffer moves that."""
    monkeypatch.delenv(REPLAY_FAULT_ENV, raising=False)
    call = dispatch(rows_in=(3, 3, 3, 3), rows_out=(2, 2, 2, 2))
    bound = Binder(0, GROUP, "gloo", "cpu").bind(call)
    assert bound.peers == {"in": [3 * 128] * 4, "out": [2 * 128] * 4} == call.peer_bytes(4)


def test_a_replay_that_evens_the_splits_out_is_caught_by_the_bytes_per_peer(monkeypatch):
    monkeypatch.setenv(REPLAY_FAULT_ENV, "even")
    bound = Binder(0, GROUP, "gloo", "cpu").bind(dispatch())
    assert "input_split_sizes" not in bound.issue.keywords
    assert bound.nbytes == dispatch().size_bytes  # the per-call check alone would pass it
    assert bound.peers == {"in": [4096] * 4, "out": [4096] * 4} != dispatch().peer_bytes(4)


def test_peer_bytes_from_the_splits_or_the_even_split():
    assert dispatch().row_numel == HIDDEN
    counts = trace_format.Call(seq=0, pg="0", op="alltoall", dtype="int64", in_numel=8,
                               out_numel=8)
    assert counts.peer_bytes(4) == {"in": [16] * 4, "out": [16] * 4}
    nothing = dispatch(rows_in=(0, 0, 0, 0), rows_out=(0, 5, 0, 0))
    assert nothing.row_numel == HIDDEN and nothing.peer_bytes(4)["out"] == [0, 640, 0, 0]
    assert trace_format.Call(seq=0, pg="0", op="allreduce", dtype="float32", in_numel=8,
                             out_numel=8).peer_bytes(4) is None


def moe_trace(folder):
    """Two ranks, one uneven dispatch each step: what rank 0 sends rank 1 receives."""
    group = trace_format.Group("0", (0, 1), "gloo")
    rows = {0: [((5, 9), (5, 2)), ((1, 3), (1, 7))], 1: [((2, 6), (9, 6)), ((7, 4), (3, 4))]}
    for rank, steps in rows.items():
        calls = [trace_format.Call(seq=i, pg="0", op="alltoall", dtype="float32",
                                   in_numel=sum(r_in) * HIDDEN, out_numel=sum(r_out) * HIDDEN,
                                   step=i + 1, splits={"in": list(r_in), "out": list(r_out)},
                                   t_issue_ns=0, t_end_ns=10)
                 for i, (r_in, r_out) in enumerate(steps)]
        head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=2,
                                   rank=rank, host="h", groups={"0": group}, steps_ended=3)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls, [1, 2, 3])
    return trace_format.load(folder)


def results_of(trace, plan, moved):
    out = {}
    for rank in trace.ranks:
        steps = []
        for index, step in enumerate(plan.steps):
            calls = [[c.seq, 0.0, 1e-3, c.size_bytes, *moved(c)]
                     for c in trace.calls(rank, step)]
            steps.append({"index": index, "step": step, "wall_s": 1e-3, "calls": calls})
        out[rank] = replay_figures.RankResult(rank, steps, {})
    return out


def test_sent_and_received_per_step_and_a_replay_that_moved_other_bytes(tmp_path):
    trace = moe_trace(tmp_path)
    plan = replay.make_plan(trace, [1, 2], "none", isolated=False)

    def exact(call):
        return sum(call.splits["in"]) * 128, sum(call.splits["out"]) * 128

    def price(rank, call):
        return 1e-4, "timed alone here"

    summary = replay_figures.summarise(trace, plan, results_of(trace, plan, exact), price)
    ranks = {row["rank"]: row for row in summary.ranks}
    # rank 0 sends 14 then 4 rows, receives 7 then 8: means over the two steps
    assert ranks[0]["sent_bytes"] == ranks[0]["replayed_sent_bytes"] == pytest.approx(9 * 128)
    assert ranks[0]["received_bytes"] == pytest.approx(7.5 * 128)
    assert ranks[1]["sent_bytes"] == pytest.approx(9.5 * 128)
    assert replay_figures.mismatches(summary) == []
    assert any("split sizes replayed as recorded" in note for note in summary.notes)

    def evened(call):  # the largest buffer each way, as an even call of one buffer moves
        return call.size_bytes, call.size_bytes

    wrong = replay_figures.summarise(trace, plan, results_of(trace, plan, evened), price)
    assert replay_figures.mismatches(wrong)
