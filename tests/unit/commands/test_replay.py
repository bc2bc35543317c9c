"""replay's exit codes are 0, 2 and 3: a replay whose bytes or calls differ from the trace's
is commbench's own fault (the bytes are checked before timing, the calls are the plan's by
construction), so it is a failed run (3), not a finding (1) that a user could act on."""

import json
from types import SimpleNamespace

from commbench import results
from commbench.commands.replay import finish
from commbench.core.errors import EXIT_OK, EXIT_RUN_FAILED
from commbench.replay import plan as replay
from commbench.results import trace as trace_format
from commbench.results.replay import REPLAYED_JSONL
from commbench.specs.replay import ReplayOutput, ReplaySpec
from tests.replay_traces import manual_loop


def finished(tmp_path, nbytes=None) -> int:
    trace = trace_format.load(manual_loop(tmp_path / "trace", world=2, steps=1, numel=64))
    plan = replay.make_plan(trace, [1], "none", isolated=False)
    path = results.create(str(tmp_path / "out"), "run")
    results.RunWriter(path, {"name": "run", "command": "replay"}).start()
    with open(path / REPLAYED_JSONL, "w") as out:
        for rank in trace.ranks:
            calls = [[c.seq, 0.0, 1e-3, c.size_bytes if nbytes is None else nbytes]
                     for c in trace.calls(rank, 1)]
            out.write(json.dumps({"rank": rank, "steps": [{"index": 0, "step": 1,
                                                           "wall_s": 1e-3, "calls": calls}]})
                      + "\n")
    job = SimpleNamespace(plan=plan, backend="gloo")
    pricer = type("Pricer", (), {"notes": [], "__call__": lambda self, r, c: (1e-4, "x")})()
    return finish(path, ReplaySpec(trace=str(tmp_path / "trace")), ReplayOutput(), trace, job,
                  (pricer, "curves"))


def test_a_replay_that_matches_its_trace_exits_0(tmp_path):
    assert finished(tmp_path) == EXIT_OK


def test_a_replay_that_differs_from_its_trace_is_a_failed_run_not_exit_1(tmp_path, capsys):
    assert finished(tmp_path, nbytes=4) == EXIT_RUN_FAILED
    assert "a commbench fault" in capsys.readouterr().err
