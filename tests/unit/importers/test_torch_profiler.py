"""``commbench import torch-profiler``: profiler traces -> the trace format
(docs/reference/trace-format.md).

tests/fixtures/profiler/gloo/ is REAL: two gloo ranks run under torch.profiler by
tests/fixtures/profiler/make_gloo_traces.py (torch 2.13, CPU). tests/fixtures/profiler/
nccl-handmade/ is HAND-MADE by make_nccl_handmade.py in the layout Kineto exports for NCCL
(no GPU made it). Both scripts' docstrings list the calls expected below.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.commands.imports import run_import_profiler
from commbench.core.errors import EXIT_USAGE, UsageError
from commbench.importers import torch_profiler
from commbench.results import trace as trace_format

PROFILER = Path(__file__).parents[2] / "fixtures" / "profiler"
GLOO = PROFILER / "gloo"
NCCL = PROFILER / "nccl-handmade"


def shape(call):
    return (call.op, call.pg, call.dtype, call.in_numel, call.out_numel, call.step)


def test_real_gloo_trace_gives_the_scripts_calls_in_order():
    ranks = torch_profiler.read(GLOO)
    assert [r.rank for r in ranks] == [0, 1]
    step0 = [("allreduce", "0", "float32", 1024, 1024, 0),
             ("allgather", "0", "float64", 256, 512, 0),
             ("broadcast", "0", "int32", 300, 300, 0),
             ("reduce_scatter", "0", "float32", 256, 128, 0)]
    tail = [("allreduce", "0", "bfloat16", 2048, 2048, 0),
            ("allreduce", "0", "float32", 4096, 4096, 1)]
    sender, receiver = ranks
    assert [shape(c) for c in sender.calls] == [
        *step0, ("send", "0", "float16", 64, 64, 0), *tail]
    assert [shape(c) for c in receiver.calls] == [
        *step0, ("recv", "0", "float16", 64, 64, 0), *tail]
    assert [c.seq for c in sender.calls] == list(range(7))
    assert sender.calls[4].peer == 1 and receiver.calls[4].peer == 0
    assert sender.calls[2].root == 0  # broadcast from rank 0
    assert [c.is_async for c in sender.calls] == [False] * 5 + [True, False]
    # gloo's work events give each call its completion, after its issue.
    for call in sender.calls + receiver.calls:
        assert call.t_end_ns > call.t_issue_ns and call.dur_ns is None
    head = sender.header
    assert (head["format"], head["source"], head["backend"], head["world_size"]) == (
        "commbench-trace", "torch.profiler", "gloo", 2)
    assert {name: g["ranks"] for name, g in head["groups"].items()} == {"0": [0, 1],
                                                                       "1": [0, 1]}
    # The reduce-scatter and the bf16 allreduce ran on group 1; c10d:: ops do not say so.
    assert any("put on the default group '0'" in note for note in sender.notes)


def test_handmade_nccl_trace_sizes_groups_and_kernel_durations():
    ranks = torch_profiler.read(NCCL)
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    for profiled in ranks:
        r = profiled.rank
        tp = "1" if r < 2 else "2"
        p2p = ("send", "0", "float16", 65536, 65536, 5) if r % 2 == 0 else (
            "recv", "0", "float16", 65536, 65536, 5)
        splits = [16, 32, 48, 64]
        assert [shape(c) for c in profiled.calls] == [
            ("allreduce", "0", "bfloat16", 1048576, 1048576, 5),
            ("allgather", tp, "float32", 4096, 8192, 5),
            ("reduce_scatter", tp, "float32", 8192, 4096, 5),
            ("broadcast", "0", "int64", 1000, 1000, 5),
            p2p,
            ("alltoall", "0", "float32", 160, 4 * splits[r], 5),
            ("allreduce", "0", "bfloat16", 1048576, 1048576, 6)]  # the "wait"s are dropped
        # The kernel durations of the script (µs) are the in-situ times, to the ns.
        kernel_us = [412.5, 21.25, 23.75, 11.5, 35.0, 17.0, 401.0]
        assert [c.dur_ns for c in profiled.calls] == [round((us + r) * 1000)
                                                      for us in kernel_us]
        assert [c.in_situ_s for c in profiled.calls] == pytest.approx(
            [(us + r) * 1e-6 for us in kernel_us])
        assert profiled.calls[4].peer == (r + 1 if r % 2 == 0 else r - 1)
        assert profiled.calls[5].splits == {"in": splits, "out": [splits[r]] * 4}
        assert [c.is_async for c in profiled.calls] == [True] + [False] * 5 + [True]
        groups = {name: g["ranks"] for name, g in profiled.header["groups"].items()}
        assert groups == {"0": [0, 1, 2, 3], tp: [0, 1] if r < 2 else [2, 3]}
        assert profiled.header["backend"] == "nccl"


def test_the_command_writes_a_trace_that_load_and_check_order_accept(tmp_path, capsys):
    out = tmp_path / "trace"
    assert run_import_profiler(str(NCCL), str(out), force=False) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"rank-{r}.jsonl" for r in range(4)]
    trace = trace_format.load(out)
    assert trace.world_size == 4 and trace.steps() == [5, 6]
    assert trace_format.check_order(trace) == []
    assert {name: g.ranks for name, g in trace.groups.items()} == {
        "0": (0, 1, 2, 3), "1": (0, 1), "2": (2, 3)}
    assert trace.calls(0, step=6)[0].dur_ns == 401_000
    captured = capsys.readouterr()
    assert "imported 28 calls (28 with an in-situ time) from 4 rank trace(s)" in captured.out
    # Said once for the four ranks, not four times.
    assert captured.err.count("does not record the root") == 1
    with pytest.raises(UsageError, match="already holds a trace"):
        run_import_profiler(str(NCCL), str(out), force=False)
    assert run_import_profiler(str(GLOO), str(out), force=True) == 0
    assert sorted(trace_format.load(out).ranks) == [0, 1]  # the 4-rank files were replaced


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("content, fragment", [
    (None, "not JSON"),  # the real rank-0 trace cut in the middle
    ('{"schemaVersion": 1, "events": []}', "not a torch.profiler trace"),
    ("[1, 2, 3]", "not a torch.profiler trace"),
])
def test_a_truncated_or_foreign_json_is_one_line_and_exit_2(tmp_path, content, fragment):
    bad = tmp_path / "rank0.json"
    if content is None:
        text = (GLOO / "rank0.json").read_text()
        content = text[: len(text) // 2]
    bad.write_text(content)
    done = cli("import", "torch-profiler", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == EXIT_USAGE
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and str(bad) in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_folder_with_one_bad_file_writes_nothing(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    for file in GLOO.iterdir():
        (folder / file.name).write_text(file.read_text())
    (folder / "rank2.json").write_text('{"not": "a trace"}')
    with pytest.raises(UsageError, match="rank2.json: not a torch.profiler trace"):
        run_import_profiler(str(folder), str(tmp_path / "out"), force=False)
    assert not (tmp_path / "out").exists()


def comm_event(index, ts, name="allreduce", **extra):
    args = {"External id": index, "Collective name": name, "dtype": "Float",
            "In msg nelems": 256, "Out msg nelems": 256, "Group size": 2,
            "Process Group Name": "0", "Process Group Ranks": "[0, 1]", **extra}
    return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 5,
            "tid": 1, "args": args}


def document(events, rank=0):
    return {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "traceEvents": events}


def test_a_kernel_without_a_matching_id_is_matched_by_group_and_seq():
    events = [comm_event(1, 10.0, Seq=7),
              {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
               "ts": 20.0, "dur": 3.5, "args": {"External id": 999, "Process Group Name": "0",
                                                "Seq": 7}},
              {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL",
               "ts": 30.0, "dur": 1.0, "args": {"External id": 998}}]
    profiled = torch_profiler.parse(document(events), "x.json")
    assert profiled.calls[0].dur_ns == 3500
    assert profiled.calls[0].t_end_ns == 23500
    assert any("1 NCCL kernel(s) matched no record_param_comms" in n for n in profiled.notes)


def test_a_long_group_cut_with_dots_is_rebuilt_from_start_stride_and_size():
    cut = "[0, 2, 4, ..., 62]"
    events = [comm_event(1, 10.0, **{"Process Group Name": "5", "Process Group Ranks": cut,
                                     "Group size": 32, "Global rank start": 0,
                                     "Global rank stride": 2})]
    profiled = torch_profiler.parse({**document(events), "distributedInfo": {
        "backend": "nccl", "rank": 0, "world_size": 64}}, "x.json")
    assert profiled.header["groups"]["5"]["ranks"] == list(range(0, 64, 2))


def test_unknown_collectives_are_left_out_with_a_note_and_an_empty_trace_is_refused(tmp_path):
    events = [comm_event(1, 10.0), comm_event(2, 20.0, name="fancy_new_collective")]
    profiled = torch_profiler.parse(document(events), "x.json")
    assert [c.op for c in profiled.calls] == ["allreduce"]
    assert any("'fancy_new_collective'" in note for note in profiled.notes)
    empty = tmp_path / "rank0.json"
    empty.write_text(json.dumps(document([{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}])))
    with pytest.raises(UsageError, match="no collective calls in the trace"):
        torch_profiler.read(empty)


def test_two_files_of_one_rank_and_a_bad_field_are_refused(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(document([comm_event(1, 10.0)])))
    with pytest.raises(UsageError, match="rank 0 again"):
        torch_profiler.read(tmp_path)
    bad = [comm_event(1, 10.0, **{"In msg nelems": "lots"})]
    with pytest.raises(UsageError, match="event 0 \\(record_param_comms at ts 10.000\\): "
                                         "'In msg nelems' is 'lots'"):
        torch_profiler.parse(document(bad), "x.json")


def test_gloo_ops_without_recorded_shapes_say_how_to_profile():
    events = [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 1.0, "dur": 2.0,
               "args": {"External id": 4}}]
    with pytest.raises(UsageError, match="record_shapes=True"):
        torch_profiler.parse(document(events), "x.json")


def test_the_importer_does_not_import_torch():
    code = ("import sys; from commbench.importers import torch_profiler; "
            f"torch_profiler.read({str(GLOO)!r}); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_gzipped_traces_as_the_tensorboard_handler_writes_them(tmp_path):
    import gzip

    for file in GLOO.iterdir():
        (tmp_path / f"worker{file.stem[-1]}.1764.pt.trace.json.gz").write_bytes(
            gzip.compress(file.read_bytes()))
    ranks = torch_profiler.read(tmp_path)
    assert [len(r.calls) for r in ranks] == [7, 7]
    assert [shape(c) for c in ranks[0].calls] == [shape(c) for c in
                                                  torch_profiler.read(GLOO)[0].calls]


def test_every_op_with_a_root_is_said_to_have_lost_it():
    """record_param_comms records no root: a gather and a scatter lose it as a broadcast
    does, and an allreduce has none to lose."""
    events = [comm_event(1, 10.0), comm_event(2, 20.0, name="gather"),
              comm_event(3, 30.0, name="scatter"), comm_event(4, 40.0, name="broadcast")]
    profiled = torch_profiler.parse(document(events), "x.json")
    assert [c.root for c in profiled.calls] == [None] * 4
    (note,) = [n for n in profiled.notes if "does not record the root" in n]
    assert note.startswith("3 broadcast/gather/scatter call(s): "), note
    alone = torch_profiler.parse(document([comm_event(1, 10.0)]), "x.json")
    assert not [n for n in alone.notes if "does not record the root" in n]
