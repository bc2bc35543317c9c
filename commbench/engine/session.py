"""A rank's membership of the job: the store, heartbeats, the gloo control group, and the process
groups of the backends being measured. Shared by the measuring sweep and by doctor.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from commbench.core import compat
from commbench.engine import facts
from commbench.engine.binding import Binding
from commbench.engine.coordination import Control, Watch, connect, heartbeat_interval
from commbench.engine.failures import RankFailure, diagnose, first_line

EXIT_PAUSE_S = 0.1  # see Session.close
# See Session.join: start-up time a local rank gets, whatever --timeout. Longer than the local
# launcher's watchdog (launch.local.START_GRACE_S), which dumps every rank's stack first.
LOCAL_START_S = 75.0


@dataclass(frozen=True)
class Groups:
    """The groups one measurement runs in at once: every group of a mesh dimension, or the
    whole world. ``group``/``ranks``: this rank's group and its global ranks in group order;
    ``members``: every group's global ranks."""

    dim: str
    group: object  # torch.distributed.ProcessGroup
    ranks: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        return len(self.ranks)


def pick_device(local_rank: int, visible: int, nccl: bool) -> int:
    """This rank's GPU: the only visible one when the launcher gave each task its own
    (``srun --gpus-per-task=1``, ``--gpu-bind``, MPI wrappers setting CUDA_VISIBLE_DEVICES per
    rank), else the one at LOCAL_RANK. NCCL needs a GPU per rank; gloo's ranks may share."""
    if visible == 1:
        return 0
    if local_rank < visible:
        return local_rank
    if nccl:
        raise RankFailure("error", f"LOCAL_RANK {local_rank} has no GPU ({visible} visible)")
    return local_rank % visible


def shared_gpu(hosts: list[dict]) -> str:
    """Two ranks of one node bound to one GPU (NCCL refuses that, late and cryptically).

    A GPU is known by its UUID, else by its full PCI address (domain:bus:device), never by the
    bus number alone, which GPUs in different PCI domains share; a rank whose GPU has neither
    is not compared."""
    seen: dict[tuple, int] = {}
    for rank, found in enumerate(hosts):
        gpu = _gpu_identity(found)
        if gpu is None:
            continue
        key = (found.get("host"), found.get("node"), gpu)
        if key in seen:
            where = found.get("pci_bus_id") or gpu
            return (f"ranks {seen[key]} and {rank} on {found.get('host')} both use the GPU at "
                    f"{where}: give each rank its own GPU (CUDA_VISIBLE_DEVICES, "
                    "--gpus-per-task)")
        seen[key] = rank
    return ""


def _gpu_identity(found: dict) -> str | None:
    pci = found.get("pci_bus_id")
    return found.get("gpu_uuid") or (pci if isinstance(pci, str) and ":" in pci else None)


def nccl_error_handling() -> None:
    """Let NCCL's watchdog abort a timed-out communicator without ending the process
    (TORCH_NCCL_ASYNC_ERROR_HANDLING=2, CleanUpOnly), unless the user chose a mode.

    torch's default tears the process down: the watchdog thread kills the rank with SIGABRT
    while its host waits in a CUDA event's synchronize, so no Python code runs: the rank can
    neither report what it waited for, nor, as rank 0 of torchrun or SLURM, finish the results
    folder. With the communicator aborted, the stuck kernels end, the host wakes, and the next
    call through the control channel (gloo, --timeout) fails naming the rank that stopped."""
    if not any(name in os.environ for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                               "NCCL_ASYNC_ERROR_HANDLING")):
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "2"


def mesh_members(shape: tuple[int, ...], axis: int) -> tuple[tuple[int, ...], ...]:
    """The groups along ``axis`` of a row-major mesh of ``shape`` (the last axis contiguous):
    ranks that differ only in that coordinate, in mesh order."""
    import numpy as np

    ranks = np.arange(int(np.prod(shape))).reshape(shape)
    rows = np.moveaxis(ranks, axis, -1).reshape(-1, shape[axis])
    return tuple(tuple(int(r) for r in row) for row in rows)


class Session:
    """One rank, joined to the others. ``env`` is the launcher's RankEnv."""

    def __init__(self, env, timeout: float, backends: tuple[str, ...], cuda: bool,
                 bind: str = "auto") -> None:
        self.env = env
        self.bind = bind
        self.binding = Binding(None, [])
        self.rank = env.rank
        self.world = env.world
        self.timeout = timeout
        self.backends = backends
        self.cuda = cuda
        self.watch: Watch | None = None
        self.control: Control | None = None
        self.hosts: list[dict] = []
        self._groups: dict = {}
        self._meshes: dict = {}
        self._subgroups: dict = {}  # (backend, ranks) -> group

    @property
    def nnodes(self) -> int:
        return len({(h["host"], h["node"]) for h in self.hosts}) if self.hosts else 1

    def join(self) -> None:
        """Bind the GPU, connect to the store, start the heartbeat, form the gloo group."""
        env, timeout = self.env, self.timeout
        if "nccl" in self.backends:  # read when an NCCL group is made
            nccl_error_handling()
        if self.cuda:  # bind before any group exists
            count = torch.cuda.device_count()
            torch.cuda.set_device(pick_device(env.local_rank, count, "nccl" in self.backends))
        is_master = env.rank == 0 and not env.agent_store
        try:
            # Under an agent (commbench's local launcher, torchrun) the store is up before
            # the ranks start: a connection it leaves unanswered is made again.
            up = bool(env.agent_store)
            store = connect(env.master_addr, env.master_port, timeout, is_master, env.world,
                            store_is_up=up)
            beat_store = connect(env.master_addr, env.master_port, timeout, store_is_up=up)
        except Exception as error:
            raise RankFailure(
                "timeout",
                f"rendezvous at {env.master_addr}:{env.master_port} failed within "
                f"{timeout:g}s: {first_line(error)}",
            ) from None
        self.watch = Watch(store, env.rank, env.world, heartbeat_interval(timeout))
        self.watch.start_heartbeat(beat_store)
        self.watch.at("rendezvous")
        if env.launcher == "local":
            # Ranks commbench started itself all exist (the agent reports one that dies): one
            # not here yet is still importing torch. 6 ranks on 2 busy cores took over 5 s,
            # and --timeout 5 ended such a run "rank 3 never arrived"; --timeout is for a
            # hung call, so start-up gets LOCAL_START_S at least. The local launcher names a
            # rank that never starts, with its stack, before this runs out.
            self.watch.await_arrivals(max(0.0, LOCAL_START_S - timeout))
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
        # After the world group: its gloo threads stay spread over every CPU (engine.binding).
        self.binding = Binding.for_rank(self.bind, env, self.cuda)
        self.binding.settle()
        self.watch.at("start-up")  # joined; a rank that fails before its first op was here

    def describe_hosts(self, devices: list[str]) -> list[dict]:
        """Every rank's host facts (host, node, pid, CPU, GPU), in rank order."""
        mine = {**facts.host_facts(self.env.local_rank, devices), **self.binding.facts()}
        self.hosts = self.control.objects(mine)
        if "nccl" in self.backends:
            clash = shared_gpu(self.hosts)
            if clash:
                raise RankFailure("error", clash)
        return self.hosts

    def group_for(self, backend: str):
        """One group per backend for the whole run (an NCCL communicator costs seconds).
        Every group takes --timeout: torch's defaults (10 min for NCCL, 30 for gloo) would
        leave a hung rank unnamed for that long."""
        if backend == "gloo":
            return dist.group.WORLD
        if backend not in self._groups:
            device = torch.device("cuda", torch.cuda.current_device())
            timeout = timedelta(seconds=self.timeout)
            try:
                group = dist.new_group(backend=backend, device_id=device, timeout=timeout)
            except TypeError:  # torch without new_group(device_id=)
                group = dist.new_group(backend=backend, timeout=timeout)
            self._groups[backend] = group
            self.binding.settle()
        return self._groups[backend]

    def subgroup_for(self, backend: str, ranks: tuple[int, ...]):
        """A group of some of the world's ranks (an op's Collective.subgroups), made once per
        backend with --timeout. Collective over the world: every rank calls it, in the same
        order (Sweep.prepare), ranks outside the group too."""
        key = (backend, tuple(ranks))
        if key not in self._subgroups:
            timeout = timedelta(seconds=self.timeout)
            self._subgroups[key] = dist.new_group(list(ranks), backend=backend,
                                                  timeout=timeout)
            self.binding.settle()
        return self._subgroups[key]

    def subgroups_of(self, backend: str) -> tuple:
        """(ranks, group) of every subgroup made for ``backend``, for OpContext.subgroups."""
        return tuple((ranks, group) for (made_for, ranks), group in self._subgroups.items()
                     if made_for == backend)

    def _options(self, backend: str):
        """Options carrying --timeout, or None (compat.backend_options)."""
        return compat.backend_options(dist, backend, self.timeout)

    def groups_for(self, backend: str, device: str, mesh: tuple[tuple[str, int], ...],
                   dim: str) -> Groups:
        """The groups of ``dim`` in ``mesh`` (or the whole world when ``dim`` is ''), built
        with torch's DeviceMesh, one mesh per backend for the whole run."""
        if not dim:
            members = (tuple(range(self.world)),)
            return Groups("", self.group_for(backend), members[0], members)
        names = tuple(name for name, _ in mesh)
        shape = tuple(size for _, size in mesh)
        key = (backend, device, mesh)
        if key not in self._meshes:
            self._meshes[key] = self._make_mesh(backend, device, names, shape)
            self.binding.settle()
        made = self._meshes[key]
        members = mesh_members(shape, names.index(dim))
        mine = next(ranks for ranks in members if self.rank in ranks)
        return Groups(dim, made[dim], mine, members)

    def _make_mesh(self, backend: str, device: str, names: tuple[str, ...],
                   shape: tuple[int, ...]) -> dict:
        """dim name -> this rank's group, every group with --timeout.

        torch >= 2.6 takes a backend per dimension (``backend_override``); before, DeviceMesh
        would give every dimension the default (gloo) backend. Some releases' DeviceMesh drop
        the options' timeout when they make the groups (they then get torch's default, 10 min
        for NCCL), so the timeout is set again on every group (``ProcessGroup.set_timeout``).
        Where torch lacks any of these, the groups are made by hand in the same row-major
        layout, with ``new_group(timeout=)``."""
        from torch.distributed.device_mesh import init_device_mesh

        timeout = timedelta(seconds=self.timeout)
        override = {name: (backend, self._options(backend)) for name in names}
        complete = all(options is not None for _, options in override.values())
        if complete and compat.can_set_group_timeout(dist):
            try:
                mesh = init_device_mesh("cuda" if device == "cuda" else "cpu", shape,
                                        mesh_dim_names=names, backend_override=override)
            except TypeError:  # torch without backend_override
                mesh = None
            if mesh is not None:
                groups = {name: mesh.get_group(name) for name in names}
                for group in groups.values():
                    group.set_timeout(timeout)
                return groups
        return self._mesh_by_hand(backend, names, shape, timeout)

    def _mesh_by_hand(self, backend: str, names: tuple[str, ...], shape: tuple[int, ...],
                      timeout: timedelta) -> dict:
        groups = {}
        for axis, name in enumerate(names):
            for ranks in mesh_members(shape, axis):  # every rank creates every group
                group = dist.new_group(list(ranks), backend=backend, timeout=timeout)
                if self.rank in ranks:
                    groups[name] = group
        return groups

    def nodes(self) -> list[tuple]:
        """Each rank's node: the launcher's node rank where it gives one, else the host."""
        return [(h["host"], h.get("node") or "") for h in self.hosts]

    def at(self, where: str) -> None:
        """Publish this rank's position (op, size), which failure messages name."""
        self.watch.at(where)

    def report(self, failure: RankFailure) -> None:
        if self.watch is not None:
            self.watch.report(failure.kind, str(failure))

    def close(self) -> None:
        """Leave: heartbeat stopped, every group destroyed here.

        A gloo worker thread may still be dropping the last reference to a finished call's
        tensors, which needs the GIL; torch (seen on 2.4.1) destroys a group with the GIL
        held and joins that thread, so the rank deadlocked at exit (2 of 12 runs, in
        ``~ProcessGroupGloo`` -> ``std::thread::join``). A pause with the GIL released lets
        the workers finish first, and the groups are dropped here, not at whichever line
        happens to release their last reference.
        """
        if self.watch is not None:
            self.watch.stop()
        time.sleep(EXIT_PAUSE_S)
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        self._groups.clear()
        self._meshes.clear()
        self._subgroups.clear()
        self.control = None
