"""The trace format: reading torn files, group lines, and the order check that catches a
recorder which lost a call."""

import json

import pytest

from commbench.record.calls import bind, numel
from commbench.results import trace as trace_format

WORLD = trace_format.Group("0", (0, 1), "gloo", "default_pg")


def write(folder, rank, calls, groups=None, world=2):
    head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=world,
                               rank=rank, host="h", groups=groups or {"0": WORLD})
    trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls)


def allreduce(seq, numel_, step=0, pg="0"):
    return trace_format.Call(seq=seq, pg=pg, op="allreduce", dtype="float32", in_numel=numel_,
                             out_numel=numel_, step=step, reduce_op="sum", t_issue_ns=1000,
                             t_end_ns=3000)


def test_a_round_trip_keeps_every_field(tmp_path):
    call = trace_format.Call(seq=0, pg="0", op="alltoall", dtype="bfloat16", in_numel=8,
                             out_numel=8, splits={"in": [3, 5], "out": [4, 4]}, is_async=True,
                             t_issue_ns=5, t_end_ns=9, dur_ns=3, step=2)
    write(tmp_path, 0, [call])
    write(tmp_path, 1, [call])
    trace = trace_format.load(tmp_path)
    assert trace.calls(0) == [call]
    assert trace.calls(0)[0].in_situ_s == 3e-9  # the device's time wins over issue-to-end
    assert trace.calls(0)[0].size_bytes == 16
    assert trace.world_size == 2 and trace.steps() == [2]


def test_a_line_torn_by_a_crash_is_dropped_and_group_lines_are_folded_in(tmp_path):
    write(tmp_path, 0, [allreduce(0, 4)])
    path = tmp_path / "rank-0.jsonl"
    pair = trace_format.Group("5", (0, 1), "gloo")
    with path.open("a") as out:
        out.write(json.dumps(trace_format.group_line(pair)) + "\n")
        out.write(json.dumps(allreduce(1, 8, pg="5").to_json()) + "\n")
        out.write('{"seq": 2, "pg": "5", "op": "allre')  # SIGKILL mid-write
    rank = trace_format.read_rank(path)
    assert [c.seq for c in rank.calls] == [0, 1]
    assert rank.groups["5"].ranks == (0, 1)


def test_a_bad_line_in_the_middle_names_file_and_line(tmp_path):
    write(tmp_path, 0, [allreduce(0, 4), allreduce(1, 4)])
    path = tmp_path / "rank-0.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = "garbage"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(trace_format.TraceError, match=r"rank-0.jsonl:2: not a JSON line"):
        trace_format.read_rank(path)


@pytest.mark.parametrize("change, message", [
    ({"format": "other"}, "not a commbench trace"),
    ({"version": 99}, "newer than this commbench reads"),
])
def test_a_foreign_or_newer_header_is_refused(tmp_path, change, message):
    write(tmp_path, 0, [])
    path = tmp_path / "rank-0.jsonl"
    head = {**json.loads(path.read_text().splitlines()[0]), **change}
    path.write_text(json.dumps(head) + "\n")
    with pytest.raises(trace_format.TraceError, match=message):
        trace_format.read_rank(path)


def test_an_undeclared_group_and_an_empty_folder_are_refused(tmp_path):
    with pytest.raises(trace_format.TraceError, match="no rank-<r>.jsonl"):
        trace_format.load(tmp_path)
    write(tmp_path, 0, [allreduce(0, 4, pg="9")])
    with pytest.raises(trace_format.TraceError, match="never declares"):
        trace_format.load(tmp_path)


def test_check_order_is_quiet_when_the_members_agree_and_names_a_lost_call(tmp_path):
    calls = [allreduce(0, 4), allreduce(1, 8), allreduce(2, 16)]
    write(tmp_path, 0, calls)
    write(tmp_path, 1, calls)
    assert trace_format.check_order(trace_format.load(tmp_path)) == []
    write(tmp_path, 1, [calls[0], calls[2]])  # rank 1's recorder lost the 8-element call
    problems = trace_format.check_order(trace_format.load(tmp_path))
    # calls are named by their seq, the number in the rank's file, whatever steps are read
    assert problems == ["group 0: rank 1's call 2 (step 0: allreduce float32 64 B) is not "
                        "rank 0's call 1 (step 0: allreduce float32 32 B)"]
    write(tmp_path, 1, calls[:2])  # rank 1 stops early: rank 0's extra call is named
    assert trace_format.check_order(trace_format.load(tmp_path)) == [
        "group 0: rank 0's call 2 (step 0: allreduce float32 64 B) has no match on rank 1, "
        "which makes 2 call(s) on the group to rank 0's 3"]


def test_check_order_catches_a_halved_size(tmp_path):
    write(tmp_path, 0, [allreduce(0, 4), allreduce(1, 8)])
    write(tmp_path, 1, [allreduce(0, 4), allreduce(1, 4)])
    assert len(trace_format.check_order(trace_format.load(tmp_path))) == 1


def test_gather_sizes_differ_by_rank_and_still_agree(tmp_path):
    def gather(rank):
        out = 8 if rank == 0 else 0
        return trace_format.Call(seq=0, pg="0", op="gather", dtype="float32", in_numel=4,
                                 out_numel=out, root=0)

    write(tmp_path, 0, [gather(0)])
    write(tmp_path, 1, [gather(1)])
    assert trace_format.check_order(trace_format.load(tmp_path)) == []


class _Argument:
    def __init__(self, name, default=None):
        self.name, self.default_value = name, default

    def has_default_value(self):
        return self.default_value is not None


class _Schema:
    arguments = [_Argument("tensors"), _Argument("process_group"), _Argument("dst"),
                 _Argument("async_op", True)]


class _Tensor:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n


def test_arguments_are_read_by_name_with_defaults():
    bound = bind(_Schema(), ([_Tensor(3), _Tensor(5)], "pg"), {"dst": 4})
    assert bound == {"tensors": bound["tensors"], "process_group": "pg", "dst": 4,
                     "async_op": True}
    assert numel(bound["tensors"]) == 8
    assert numel([[_Tensor(2)], [_Tensor(2), _Tensor(1)]]) == 5


def test_step_ends_round_trip_and_decide_the_steps(tmp_path):
    """The recorder's step-end lines (and the header's count) say where steps ended: step 0
    is set-up, the calls after the last end a tail, the rest steps."""
    calls = [allreduce(0, 4, step=0), allreduce(1, 4, step=1), allreduce(2, 4, step=2),
             allreduce(3, 4, step=3)]
    for rank in (0, 1):
        head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=2,
                                   rank=rank, host="h", groups={"0": WORLD}, steps_ended=3)
        trace_format.write_rank(tmp_path / f"rank-{rank}.jsonl", head, calls, [10, 20, 30])
    lines = (tmp_path / "rank-0.jsonl").read_text().splitlines()
    assert json.loads(lines[2]) == {"step_end": 1, "t_ns": 10}  # before step 1's call
    trace = trace_format.load(tmp_path)
    assert trace.ranks[0].ended == 3 and trace.calls(0) == calls
    split = trace_format.step_split(trace)
    assert (split.steps, split.setup, split.tail, split.tail_calls) == ((1, 2), 0, (3,), 1)


def test_a_crash_mid_run_leaves_step_end_lines_that_count(tmp_path):
    """A crashed recorder's header says 0 steps ended; its step-end lines say how many did."""
    for rank in (0, 1):
        head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=2,
                                   rank=rank, host="h", groups={"0": WORLD}, steps_ended=0)
        trace_format.write_rank(tmp_path / f"rank-{rank}.jsonl", head,
                                [allreduce(s, 4, step=s) for s in range(4)], [1, 2, 3])
    assert trace_format.step_split(trace_format.load(tmp_path)).steps == (1, 2)


def test_a_torn_last_line_is_said_and_its_step_is_not_a_step(tmp_path):
    """The torn line is left out, the trace says so (file and line), and the torn rank's last
    step is no longer whole: it is part of the tail, not blamed on the ranks."""
    calls = [allreduce(s, 4, step=s) for s in range(4)]
    write(tmp_path, 0, calls)
    write(tmp_path, 1, calls)
    path = tmp_path / "rank-1.jsonl"
    path.write_text(path.read_text()[:-20])  # the last call's line cut mid-write
    trace = trace_format.load(tmp_path)
    assert trace.ranks[1].torn_line == 5
    assert trace.notes == ["rank-1.jsonl:5: the last line was cut short (a crash mid-write) "
                           "and is left out; rank 1's recording is whole up to step 1"]
    split = trace_format.step_split(trace)
    assert split.steps == (1,) and split.tail == (2, 3) and split.torn == ("rank-1.jsonl",)
    assert "cut short by a crash in rank-1.jsonl" in split.left_out()


def test_a_file_holding_only_a_cut_header_is_one_error(tmp_path):
    write(tmp_path, 0, [allreduce(0, 4)])
    (tmp_path / "rank-1.jsonl").write_text('{"format": "commbench-trace", "vers')
    with pytest.raises(trace_format.TraceError, match=r"rank-1.jsonl:1: the header line is "
                       "cut short"):
        trace_format.load(tmp_path)
