"""Start local ranks with torch's elastic agent, on loopback only, and explain how they ended.

torch's LocalElasticAgent does the process management (spawn, monitor, stop the rest when one
fails, no orphans); commbench supplies a rendezvous handler whose store listens on 127.0.0.1
only, and a shorter grace before SIGKILL so that a stopped (SIGSTOP) rank, which never handles
SIGTERM, does not hold the run for torch's default 30 s.

Whatever way a rank ends, it leaves words behind (launch.ranklogs): its stderr goes into
``rank-<r>.log`` in the run folder as well as to the console, and the failure's one line ends
with the rank's last line there. A rank that has not made its first heartbeat within
``START_GRACE_S`` of the launch is a stalled start: every rank's Python stack is dumped
(faulthandler, into ``rank-<r>.stack``) after its threads' kernel state (launch.procstate), and
the error names the rank, where it was and the system call its threads were blocked in.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.agent.server.api import WorkerSpec
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException
from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousInfo
from torch.distributed.elastic.rendezvous.api import RendezvousStoreInfo

from commbench.core import compat
from commbench.core.errors import EXIT_RUN_FAILED, Interrupted, RunFailed
from commbench.launch import lifetime, ranklogs
from commbench.launch.environment import agent_rank_env, pin_interfaces
from commbench.launch.storehost import StoreHost

SHUTDOWN_GRACE_S = 2  # SIGTERM, then SIGKILL after this long
# How often the agent looks at its ranks. Each look wakes this process, which on a small
# machine preempts a measuring rank (a pingpong of 50 us then shows a 4 ms scheduler tick);
# a failure is still seen within a second.
MONITOR_INTERVAL_S = 1.0
# The agent's own pause between looks (WorkerSpec.monitor_interval, which must be positive):
# _Agent waits for the next look itself, in poll() on what a rank's return makes ready, so that
# the end of a run is seen at once (~0.5 s sooner on average) and nothing else wakes it.
AGENT_PAUSE_S = 0.001
# A rank with no heartbeat this long after the launch has stalled at start-up. 6 ranks on 2
# busy cores start within 10 s; engine.session waits longer (LOCAL_START_S) before the ranks
# themselves name a missing one, so that this watchdog, which can read every rank's stack,
# speaks first.
START_GRACE_S = 45.0


class LoopbackRendezvous(RendezvousHandler):
    """A one-node rendezvous whose store listens on 127.0.0.1 only, served by a process of its
    own (launch.storehost: no rank is forked from a process running the server's thread)."""

    def __init__(self, timeout: float) -> None:
        self.host = StoreHost(timeout, die_with_parent)
        self.port = self.host.port
        try:
            self.store = dist.TCPStore("127.0.0.1", self.port, None, False,
                                       timedelta(seconds=timeout), wait_for_workers=False)
        except Exception:
            self.host.stop()
            raise

    def close(self) -> None:
        """End the store's server (after the ranks have ended and their reports are read)."""
        self.host.stop()

    def get_backend(self) -> str:
        return "commbench-loopback"

    @property
    def use_agent_store(self) -> bool:
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        return RendezvousInfo(
            dist.PrefixStore("agent", self.store),
            0,
            1,
            RendezvousStoreInfo("127.0.0.1", self.port),
        )

    def is_closed(self) -> bool:
        return False

    def set_closed(self) -> None:
        pass

    def num_nodes_waiting(self) -> int:
        return 0

    def get_run_id(self) -> str:
        return "commbench"

    def shutdown(self) -> bool:
        return True


class _Agent(LocalElasticAgent):
    """torch's agent, with a bounded stop: its default waits 30 s after SIGTERM, which a
    SIGSTOPped rank never acts on, before SIGKILL."""

    def __init__(self, *args, watchdog: ranklogs.StartWatchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.first_failures: dict[int, int] = {}  # local rank -> exit code, before any stop
        self.watchdog = watchdog
        self.stalled = ""  # the watchdog's one line, when a rank never started

    def _monitor_workers(self, worker_group):
        processes = _processes(self)
        _await_end_or_tick(_rank_ends(self, processes), MONITOR_INTERVAL_S)
        failed = {i: p.exitcode for i, p in enumerate(processes) if p.exitcode not in (None, 0)}
        if failed and not self.first_failures and not self.stalled:
            self.first_failures = failed
            _terminate(processes)
        elif not self.first_failures and not self.stalled:
            self.stalled = self.watchdog.check([p.pid for p in processes])
            if self.stalled:
                _terminate(processes)
        return super()._monitor_workers(worker_group)

    def _stop_workers(self, worker_group, *args, **kwargs) -> None:
        self.stop()

    def stop(self) -> None:
        """Every rank stopped within SHUTDOWN_GRACE_S, then torch's own clean-up."""
        _terminate(_processes(self))
        compat.shutdown_agent(self, SHUTDOWN_GRACE_S)


def _processes(agent) -> list:
    """The agent's worker processes (multiprocessing.Process), or [] where torch keeps them
    elsewhere: ``_pcontext._pc.processes`` is private; without it the first failure is read
    from torch's RunResult instead and the stop falls back to torch's own."""
    return list(getattr(getattr(getattr(agent, "_pcontext", None), "_pc", None), "processes",
                        None) or [])


def _rank_ends(agent, processes: list) -> list | None:
    """What becomes ready when a rank returns, for ``multiprocessing.connection.wait``; None
    where torch keeps it elsewhere. A rank that returns puts its value in its return queue
    (torch's ``_wrap``) and then waits, alive, until the agent has read every rank's value:
    its queue's reader is what tells. Both are private (``_pcontext._ret_vals``,
    ``SimpleQueue._reader``). A rank that fails is still seen at the next look, as before:
    the other ranks' own failure path (rank 0 writing the sizes it measured) keeps the time
    it had before their SIGTERM."""
    if not processes:
        return None
    pcontext = getattr(agent, "_pcontext", None)
    queues = getattr(pcontext, "_ret_vals", None) or {}
    read = getattr(pcontext, "_return_values", None) or {}
    readers = [getattr(queue, "_reader", None) for rank, queue in queues.items()
               if rank not in read]
    # None, not []: with nothing to wait on, the look must not come round every millisecond.
    return [reader for reader in readers if reader is not None] or None


def _await_end_or_tick(ends: list | None, interval: float) -> None:
    """Sleep until a rank returns or ``interval`` passes: the agent's look, at the same cadence
    while the ranks run (one wake-up a second), at once when one of them returns. Without
    ``ends`` (torch keeps them elsewhere), the cadence alone."""
    if ends:
        multiprocessing.connection.wait(ends, timeout=interval)
    else:
        time.sleep(interval)


def _terminate(processes) -> None:
    """SIGCONT (a stopped rank must run to act on SIGTERM), SIGTERM, then SIGKILL after a grace."""
    alive = [p for p in processes if p.is_alive()]
    for process in alive:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
    deadline = time.monotonic() + SHUTDOWN_GRACE_S
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.is_alive():
            process.kill()
            process.join(SHUTDOWN_GRACE_S)


def quiet_torch_logs() -> None:
    """The agent logs every start and failure at length; commbench says it in one line."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("torch.distributed", "torch.multiprocessing")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def die_with_parent() -> None:
    """A rank started by commbench must not outlive it (kill -9 of the launcher included)."""
    lifetime.die_with_parent(signal.SIGKILL, EXIT_RUN_FAILED)


def _rank_main(entry: Callable, logs: ranklogs.RankFiles, *args):
    """What each local rank runs: ``entry(rank_env, *args)``; a failure exits with code 3.

    The failure has already been reported to the rendezvous store by the rank, where the
    launcher reads it and says it once. Any other exception (one raised before the rank could
    report, such as a fault spec it cannot parse) is printed to stderr, which is the rank's log,
    whose last line the launcher then shows.
    """
    logs.attach(int(os.environ["LOCAL_RANK"]))
    env = agent_rank_env()
    die_with_parent()
    pin_interfaces(env)
    # The agent stops the other ranks with SIGTERM when one fails: as an exception, rank 0
    # still writes the sizes its unfinished --rounds measured (measure.sweep) within the grace.
    signal.signal(signal.SIGTERM, _stopped)
    signal.signal(signal.SIGINT, _interrupted)
    return _run_entry(entry, env, args)


def _run_entry(entry: Callable, env, args: tuple):
    """``entry(env, *args)``, its failure turned into the rank's exit code: 3 for a reported
    failure, 128 + the signal for a stop, 1 (with the traceback, the rank log's last words)
    for anything else. An error raised while stopping (a second Ctrl-C while the rank closes
    its groups printed a chained traceback of ~30 lines) is the stop: no words, its code;
    the launcher says "interrupted" once."""
    try:
        return entry(env, *args)
    except RunFailed:
        sys.exit(EXIT_RUN_FAILED)
    except Interrupted as stop:
        sys.exit(stop.exit_code)
    except KeyboardInterrupt:
        sys.exit(128 + signal.SIGINT)
    except Exception as error:
        stop = _stop_behind(error)
        if stop is not None:
            sys.exit(stop)
        traceback.print_exc()
        sys.stderr.flush()
        sys.exit(1)


def _stop_behind(error: BaseException) -> int | None:
    """The exit code of a stop (Interrupted, KeyboardInterrupt) this error was raised while
    handling or from, if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, Interrupted):
            return error.exit_code
        if isinstance(error, KeyboardInterrupt):
            return 128 + signal.SIGINT
        error = error.__cause__ or error.__context__
    return None


def _stopped(signum: int, frame) -> None:
    _stopping()
    raise Interrupted(f"stopped by {signal.Signals(signum).name}", exit_code=128 + signum)


def _interrupted(signum: int, frame) -> None:
    """Ctrl-C (it reaches every rank: one process group) interrupts the rank once, as
    Python's default does."""
    _stopping()
    raise KeyboardInterrupt


def _stopping() -> None:
    """One stop per rank: once SIGINT or SIGTERM stopped it, later ones are ignored, so that
    its clean-up is not cut into (a second Ctrl-C in Session.close()'s pause, or the agent's
    SIGTERM inside a weakref callback, raised again there and printed a traceback). The
    agent's SIGKILL after SHUTDOWN_GRACE_S still bounds it."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


Explain = Callable[..., str]  # (exit_codes, store, world, last_words=) -> one line
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handlers() -> dict:
    """This process's SIGINT and SIGTERM handlers before the launch: torch's agent installs
    its own (raising SignalException) and leaves them behind after the run."""
    return {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}


def _restore(handlers: dict) -> None:
    """The handlers from before the launch, but a Ctrl-C already taken stays ignored."""
    for sig, handler in handlers.items():
        if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        with contextlib.suppress(ValueError, TypeError):  # not the main thread; not Python's
            signal.signal(sig, handler)


def _finish_uninterrupted() -> None:
    """After a Ctrl-C, a second one is ignored while the ranks stop (SHUTDOWN_GRACE_S at
    most) and the command keeps what they measured: torch's handler raised it, in the middle
    of that, as a traceback of ~30 lines and exit 1 (4 of 6 double Ctrl-Cs on 8ce6570).
    SIGTERM and SIGKILL still end the process."""
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(entry: Callable, args: tuple, *, nproc: int, timeout: float, cuda: bool,
              explain: Explain, folder: str | Path | None = None,
              start_grace: float = START_GRACE_S) -> dict:
    """Run ``entry(rank_env, *args)`` on ``nproc`` local ranks; return rank -> return value.

    CPU-only runs fork the ranks from this process (start_method says when they spawn). When
    a rank fails, ``explain(exit_codes, store, nproc, last_words=)`` words the one-line reason
    from what the ranks left in the store and the last line each failed rank wrote to stderr;
    raises RunFailed with it, or Interrupted.

    ``folder`` (the run folder) keeps each rank's log and, after a stalled start, its stack;
    without one they live in a temporary folder for the launch only.
    """
    quiet_torch_logs()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    # As torchrun does: ranks sharing a machine must not each start a thread per core, whose
    # spinning steals the CPU from the ranks being measured (gloo needs no OpenMP). cli.main
    # sets it before torch is imported; here for other callers (ranks they spawn read it).
    if not os.environ.get("OMP_NUM_THREADS"):
        os.environ["OMP_NUM_THREADS"] = "1"
    rendezvous = LoopbackRendezvous(timeout)  # first: its server is forked before any thread
    try:
        return _run_agent(entry, args, nproc, cuda, explain, folder, start_grace, rendezvous)
    finally:
        rendezvous.close()


def start_method(cuda: bool, intra_op_threads: int) -> str:
    """Fork the ranks from this process, which has torch imported (a spawned rank spends a
    second importing it again), unless they use CUDA, which must not be forked, or this
    process runs torch on more than one thread: torch then started an OpenMP team as it was
    imported, and GNU OpenMP is not fork-safe once a team exists. Forked from such a launcher
    (OMP_NUM_THREADS unset when torch was imported, 2 cores), a rank's 64 x 64 matmul on a
    thread of its own took 1-7 ms against 8-10 us spawned, so ``--overlap matmul:64`` read
    compute_slowdown 0.02, and a test process forked the same way died in free() (2026-12-07).
    cli.main sets OMP_NUM_THREADS=1 before torch is imported; a user's larger value spawns."""
    return "spawn" if cuda or intra_op_threads > 1 else "fork"


def _run_agent(entry: Callable, args: tuple, nproc: int, cuda: bool, explain: Explain,
               folder: str | Path | None, start_grace: float,
               rendezvous: LoopbackRendezvous) -> dict:
    log_dir = tempfile.mkdtemp(prefix="commbench-")
    files = ranklogs.RankFiles(Path(folder) if folder is not None else Path(log_dir), log_dir,
                               nproc)
    spec = WorkerSpec(
        role="commbench",
        local_world_size=nproc,
        rdzv_handler=rendezvous,
        entrypoint=_rank_main,
        args=(entry, files, *args),
        max_restarts=0,
        monitor_interval=AGENT_PAUSE_S,
    )
    watchdog = ranklogs.StartWatchdog(rendezvous.store, nproc, start_grace, files,
                                      rendezvous.host.pid)
    agent = _Agent(spec, logs_specs=DefaultLogsSpecs(log_dir=log_dir),
                   start_method=start_method(cuda, torch.get_num_threads()), watchdog=watchdog)
    copier = ranklogs.StderrCopier(files)
    handlers = _handlers()
    try:
        result = agent.run()
    except SignalException as error:
        _finish_uninterrupted()
        agent.stop()
        name = signal.Signals(error.sigval).name
        raise Interrupted(f"stopped by {name}", exit_code=128 + error.sigval) from None
    except KeyboardInterrupt:
        _finish_uninterrupted()
        agent.stop()
        raise Interrupted("interrupted") from None
    finally:
        _restore(handlers)
        copier.close()  # every rank has ended: what they wrote is in their logs
        last_words = files.last_lines()
        files.tidy()
        shutil.rmtree(log_dir, ignore_errors=True)
    if agent.stalled:
        raise RunFailed(agent.stalled)
    if result.is_failed():
        exit_codes = agent.first_failures or {r: f.exitcode for r, f in result.failures.items()}
        raise RunFailed(explain(exit_codes, rendezvous.store, nproc, last_words=last_words))
    return result.return_values
