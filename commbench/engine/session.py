"""A rank's membership of the job: the store, heartbeats, the gloo control group, and the process
groups of the backends being measured. Shared by the measuring sweep and by doctor.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import torch
import torch.distributed as dist

from commbench.engine import facts
from commbench.engine.coordination import Control, Watch, connect, heartbeat_interval
from commbench.engine.failures import RankFailure, diagnose, first_line


class Session:
    """One rank, joined to the others. ``env`` is the launcher's RankEnv."""

    def __init__(self, env, timeout: float, backends: tuple[str, ...], cuda: bool) -> None:
        self.env = env
        self.rank = env.rank
        self.world = env.world
        self.timeout = timeout
        self.backends = backends
        self.cuda = cuda
        self.watch: Watch | None = None
        self.control: Control | None = None
        self.hosts: list[dict] = []
        self._groups: dict = {}

    @property
    def nnodes(self) -> int:
        return len({(h["host"], h["node"]) for h in self.hosts}) if self.hosts else 1

    def join(self) -> None:
        """Bind the GPU, connect to the store, start the heartbeat, form the gloo group."""
        env, timeout = self.env, self.timeout
        if self.cuda:
            count = torch.cuda.device_count()
            if "nccl" in self.backends and env.local_rank >= count:
                raise RankFailure(
                    "error", f"LOCAL_RANK {env.local_rank} has no GPU ({count} visible)"
                )
            # NCCL needs a GPU per rank; gloo's CUDA ranks may share one.
            torch.cuda.set_device(env.local_rank % count)  # bind before any group exists
        is_master = env.rank == 0 and not env.agent_store
        try:
            store = connect(env.master_addr, env.master_port, timeout, is_master, env.world)
            beat_store = connect(env.master_addr, env.master_port, timeout)
        except Exception as error:
            raise RankFailure(
                "timeout",
                f"rendezvous at {env.master_addr}:{env.master_port} failed within "
                f"{timeout:g}s: {first_line(error)}",
            ) from None
        self.watch = Watch(store, env.rank, env.world, heartbeat_interval(timeout))
        self.watch.start_heartbeat(beat_store)
        self.watch.at("rendezvous")
        try:
            dist.init_process_group(
                "gloo",
                store=dist.PrefixStore("commbench/pg", store),
                rank=env.rank,
                world_size=env.world,
                timeout=timedelta(seconds=timeout),
            )
        except Exception as error:
            raise diagnose(error, "rendezvous", self.watch, timeout) from None
        self.control = Control(dist.group.WORLD, env.world)

    def describe_hosts(self, devices: list[str]) -> list[dict]:
        """Every rank's host facts (host, node, pid, CPU, GPU), in rank order."""
        self.hosts = self.control.objects(facts.host_facts(self.env.local_rank, devices))
        return self.hosts

    def group_for(self, backend: str):
        """One group per backend for the whole run (an NCCL communicator costs seconds)."""
        if backend == "gloo":
            return dist.group.WORLD
        if backend not in self._groups:
            device = torch.device("cuda", torch.cuda.current_device())
            try:
                group = dist.new_group(backend=backend, device_id=device)
            except TypeError:  # torch without new_group(device_id=)
                group = dist.new_group(backend=backend)
            self._groups[backend] = group
        return self._groups[backend]

    def at(self, where: str) -> None:
        """Publish this rank's position (op, size), which failure messages name."""
        self.watch.at(where)

    def report(self, failure: RankFailure) -> None:
        if self.watch is not None:
            self.watch.report(failure.kind, str(failure))

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
