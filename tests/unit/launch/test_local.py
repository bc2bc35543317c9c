"""How a local rank ends (launch.local): its exit code and what it leaves on stderr, which is
its log and, copied, the console. Ctrl-C in 1 of 6 tries printed a chained traceback of ~30
lines: a second SIGINT while the rank slept in Session.close() raised inside the clean-up of
the first."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes

from commbench.core.errors import Interrupted, RunFailed
from commbench.launch.local import (
    _await_end_or_tick,
    _interrupted,
    _processes,
    _rank_ends,
    _run_entry,
    start_method,
)


def ends(entry, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        _run_entry(entry, None, ())
    return stopped.value.code, capsys.readouterr().err


def test_an_error_raised_while_closing_after_ctrl_c_is_the_interrupt_in_no_words(capsys):
    def entry(env):
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("interrupted system call, in the store while closing")

    assert ends(entry, capsys) == (130, "")


def test_an_error_raised_from_a_stop_exits_with_the_stops_code(capsys):
    def entry(env):
        try:
            raise Interrupted("stopped by SIGTERM", exit_code=143)
        except Interrupted as stop:
            raise ValueError("the sink could not close") from stop

    assert ends(entry, capsys) == (143, "")


def test_a_plain_error_still_leaves_its_traceback_and_exits_1(capsys):
    """The rank log's last line is what the launcher quotes: an unexpected error keeps it."""
    def entry(env):
        raise ValueError("a spec this rank cannot parse")

    code, err = ends(entry, capsys)
    assert code == 1 and "Traceback" in err and err.strip().endswith(
        "ValueError: a spec this rank cannot parse")


def test_reported_failures_and_stops_keep_their_codes(capsys):
    def failed(env):
        raise RunFailed("rank 1 hung")

    def interrupted(env):
        raise KeyboardInterrupt

    assert ends(failed, capsys) == (3, "")
    assert ends(interrupted, capsys) == (130, "")


def test_a_second_ctrl_c_or_the_agents_sigterm_does_not_cut_into_the_clean_up():
    """After the first Ctrl-C, a second one (in Session.close()'s pause) and the agent's
    SIGTERM (once inside a weakref callback: "Exception ignored in", 1 of 6 double Ctrl-Cs)
    no longer raise; a SIGTERM first stops the rank as an Interrupted, once, too."""
    from commbench.launch.local import _stopped

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, _interrupted)
        signal.signal(signal.SIGTERM, _stopped)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # ignored: no exception while cleaning up
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) == signal.getsignal(signal.SIGTERM) \
            == signal.SIG_IGN
        signal.signal(signal.SIGINT, _interrupted)
        signal.signal(signal.SIGTERM, _stopped)
        with pytest.raises(Interrupted, match="stopped by SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_the_launcher_leaves_no_handler_of_torchs_behind_and_ignores_a_second_ctrl_c():
    """torch's agent installs SIGINT/SIGTERM handlers raising SignalException and leaves them:
    a second Ctrl-C while the command finished its folder raised one (a traceback, exit 1,
    in 3 of 6 double Ctrl-Cs on 8ce6570). After the launch the handlers are the ones from
    before; after a Ctrl-C was taken, a second one is ignored."""
    from commbench.launch.local import _finish_uninterrupted, _handlers, _restore

    saved = _handlers()

    def torchs(signum, frame):
        raise AssertionError("torch's handler left behind")

    try:
        before = _handlers()
        for sig in before:
            signal.signal(sig, torchs)  # what the agent does
        _restore(before)
        assert _handlers() == before
        for sig in before:
            signal.signal(sig, torchs)
        _finish_uninterrupted()
        _restore(before)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGINT)  # ignored
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


# --- the agent's look at its ranks ---
# The local agent's look at its ranks (launch.local._rank_ends, _await_end_or_tick), on real
# ranks started by torch's own process context: once a second while they run, at once when one
# returns (torch keeps a returned rank alive until every value is read).


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


def test_ranks_are_forked_only_from_a_launcher_without_an_openmp_team():
    assert start_method(cuda=False, intra_op_threads=1) == "fork"
    assert start_method(cuda=False, intra_op_threads=2) == "spawn"  # a team exists: not safe
    assert start_method(cuda=True, intra_op_threads=1) == "spawn"


def test_the_command_line_imports_torch_on_one_thread():
    """cli.main sets OMP_NUM_THREADS=1 (when unset) before torch is imported, so the launcher
    has no OpenMP team and its CPU ranks are forked from it (a user's own value is kept, and
    start_method then spawns them: tests/integration/test_collectives_real.py, 2 ranks)."""
    import subprocess
    import sys

    probe = ("from commbench.cli import main\ntry:\n    main(['--version'])\n"
             "except SystemExit:\n    pass\nimport torch\nprint(torch.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.stdout.split()[-1] == "1", done.stderr[-2000:]
