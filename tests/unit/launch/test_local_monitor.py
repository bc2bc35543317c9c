"""The local agent's look at its ranks (launch.local._rank_ends, _await_end_or_tick), on real
ranks started by torch's own process context: once a second while they run, at once when one
returns (torch keeps a returned rank alive until every value is read)."""

import time
from types import SimpleNamespace

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes

from commbench.launch.local import _await_end_or_tick, _processes, _rank_ends


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _start(tmp_path, *naps: float):
    context = start_processes("nap", _nap, {r: (nap,) for r, nap in enumerate(naps)},
                              {r: {} for r in range(len(naps))},
                              DefaultLogsSpecs(log_dir=str(tmp_path)), start_method="fork")
    return SimpleNamespace(_pcontext=context)


def test_a_rank_returning_is_seen_at_once_not_at_the_next_tick(tmp_path):
    agent = _start(tmp_path, 0.2, 30)
    try:
        processes = _processes(agent)
        assert len(processes) == 2
        started = time.monotonic()
        _await_end_or_tick(_rank_ends(agent, processes), 10.0)
        assert time.monotonic() - started < 5  # rank 0's value, not the 10 s tick
        assert agent._pcontext.wait(0) is None  # torch reads it; rank 1 still runs
        assert 0 in agent._pcontext._return_values
        started = time.monotonic()
        _await_end_or_tick(_rank_ends(agent, processes), 0.3)  # read: it wakes no more
        assert 0.25 < time.monotonic() - started < 5
    finally:
        agent._pcontext.close()


def test_a_rank_dying_is_left_to_the_next_look(tmp_path):
    """A failure keeps its old timing: the other ranks' own failure path has its second."""
    agent = _start(tmp_path, 30, 30)
    try:
        processes = _processes(agent)
        processes[1].kill()
        processes[1].join()
        started = time.monotonic()
        _await_end_or_tick(_rank_ends(agent, processes), 0.5)
        assert time.monotonic() - started >= 0.45
    finally:
        agent._pcontext.close()


def test_without_the_ranks_it_keeps_the_cadence():
    assert _rank_ends(SimpleNamespace(), []) is None
    assert _rank_ends(SimpleNamespace(), [object()]) is None  # no queues: no 1 ms loop
    started = time.monotonic()
    _await_end_or_tick(None, 0.2)
    assert time.monotonic() - started >= 0.2
