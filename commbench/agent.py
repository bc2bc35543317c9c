"""Start local ranks with torch's elastic agent, on loopback only, and explain how they ended.

torch's LocalElasticAgent does the process management (spawn, monitor, stop the rest when one
fails, no orphans); commbench supplies a rendezvous handler whose store listens on 127.0.0.1
only, and a shorter grace before SIGKILL so that a stopped (SIGSTOP) rank, which never handles
SIGTERM, does not hold the run for torch's default 30 s.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from datetime import timedelta

import torch.distributed as dist
from torch.distributed.elastic.agent.server.api import WorkerSpec
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException
from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousInfo
from torch.distributed.elastic.rendezvous.api import RendezvousStoreInfo

from commbench.engine.coordination import read_reports
from commbench.errors import Interrupted, RunFailed

SHUTDOWN_GRACE_S = 2  # SIGTERM, then SIGKILL after this long


class LoopbackRendezvous(RendezvousHandler):
    """A one-node rendezvous whose store is handed a socket bound to 127.0.0.1."""

    def __init__(self, timeout: float) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free one, no retry race
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self.store = dist.TCPStore(
            "127.0.0.1",
            self.port,
            None,
            True,
            timedelta(seconds=timeout),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=listener.detach(),
        )

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
    def _stop_workers(self, worker_group, *args, **kwargs) -> None:
        # torch's default waits 30 s for SIGTERM, which a SIGSTOPped rank never acts on.
        self._shutdown(timeout=SHUTDOWN_GRACE_S)


def quiet_torch_logs() -> None:
    """The agent logs every start and failure at length; commbench says it in one line."""
    for name in ("torch.distributed.elastic", "torch.distributed"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def run_local(entry: Callable, args: tuple, nproc: int, timeout: float) -> dict:
    """Run ``entry(*args)`` on ``nproc`` local ranks; return rank -> return value.

    Raises RunFailed (naming the rank, the op and the size) or Interrupted.
    """
    quiet_torch_logs()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    rendezvous = LoopbackRendezvous(timeout)
    log_dir = tempfile.mkdtemp(prefix="commbench-")
    spec = WorkerSpec(
        role="commbench",
        local_world_size=nproc,
        rdzv_handler=rendezvous,
        entrypoint=entry,
        args=args,
        max_restarts=0,
        monitor_interval=0.1,
    )
    agent = _Agent(spec, logs_specs=DefaultLogsSpecs(log_dir=log_dir), start_method="spawn")
    try:
        result = agent.run()
    except SignalException as error:
        agent._shutdown(timeout=SHUTDOWN_GRACE_S)
        raise Interrupted(f"stopped by {signal.Signals(error.sigval).name}") from None
    except KeyboardInterrupt:
        agent._shutdown(timeout=SHUTDOWN_GRACE_S)
        raise Interrupted("interrupted") from None
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    if result.is_failed():
        raise RunFailed(explain(result.failures, rendezvous.store, nproc))
    return result.return_values


def explain(failures: dict, store, world: int) -> str:
    """One line for the user: the root cause first (a timeout report, a killed rank, an error)."""
    errors, positions = read_reports(store, world)

    def where(rank: int) -> str:
        return f" during {positions[rank]}" if rank in positions else ""

    timeouts = [e for e in errors.values() if e["kind"] == "timeout"]
    if timeouts:
        return min(timeouts, key=lambda e: e["time"])["message"]
    killed = {r: f for r, f in failures.items() if f.exitcode is not None and f.exitcode < 0}
    if killed:
        rank = min(killed)
        name = killed[rank].signal_name()
        return f"rank {rank} died ({name}){where(rank)}; the other ranks were stopped"
    if errors:
        first = min(errors.values(), key=lambda e: e["time"])
        return f"rank {first['rank']}: {first['message']}"
    rank = min(failures)
    code = failures[rank].exitcode
    return f"rank {rank} exited with code {code}{where(rank)}; the other ranks were stopped"
