"""``commbench doctor``: is this machine (or job) ready, and does every rank arrive?

First what is installed (torch, gloo, NCCL, MPI, CUDA devices) and which launcher started us,
then a real rendezvous, a barrier and a tiny allreduce across all ranks, timed per rank, so a
rank or host that does not arrive is named instead of hanging (nccl-tests' most common
support problem is a silent hang at bootstrap).
"""

from __future__ import annotations

import os
import shutil
import sys
import time

from commbench.config import RunConfig
from commbench.launch import RankEnv


def environment_report(env: RankEnv | None) -> list[tuple[str, str]]:
    """(item, finding) pairs about this process's machine."""
    import torch
    import torch.distributed as dist

    from commbench import __version__

    rows = [
        ("commbench", __version__),
        ("python", sys.version.split()[0]),
        ("torch", torch.__version__),
        ("gloo", "available" if dist.is_gloo_available() else "missing"),
    ]
    if dist.is_nccl_available() and torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as error:  # a broken NCCL install is a finding, not a crash
            nccl = f"error: {error}"
        rows.append(("nccl", nccl))
    else:
        rows.append(("nccl", "available" if dist.is_nccl_available() else "missing (no CUDA)"))
    rows.append(("torch mpi backend", "available" if dist.is_mpi_available() else "missing"))
    rows.append(("mpirun", shutil.which("mpirun") or "not on PATH"))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    rows.append(("cuda devices", str(count)))
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        rows.append((f"  cuda:{index}", f"{props.name}, {props.total_memory / 2**30:.0f} GiB"))
    if env is None:
        rows.append(("launcher", "none: commbench starts local ranks (--nproc)"))
    else:
        rows.append(("launcher", f"{env.launcher}: rank {env.rank} of {env.world}, "
                                 f"master {env.master_addr}:{env.master_port}"))
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES"):
        if name in os.environ:
            rows.append((name, os.environ[name]))
    return rows


def doctor_worker(config: RunConfig, env: RankEnv | None = None) -> list[dict] | None:
    """Join, barrier, allreduce 1 element; rank 0 returns every rank's report."""
    import socket

    import torch
    import torch.distributed as dist

    from commbench.engine.failures import WorkerFailure
    from commbench.engine.worker import Worker, run_in_worker

    def body(worker: Worker):
        start = time.perf_counter()
        worker.join()
        joined = time.perf_counter() - start
        start = time.perf_counter()
        dist.barrier()
        barrier_us = (time.perf_counter() - start) * 1e6
        value = torch.ones(1)
        start = time.perf_counter()
        dist.all_reduce(value)
        allreduce_us = (time.perf_counter() - start) * 1e6
        if int(value.item()) != worker.world:
            raise WorkerFailure("error", f"allreduce gave {value.item()}, not {worker.world}")
        report = {"rank": worker.rank, "host": socket.gethostname(),
                  "local_rank": worker.env.local_rank, "join_s": joined,
                  "barrier_us": barrier_us, "allreduce_us": allreduce_us}
        if "nccl" in worker.config.backends:  # communicator set-up plus one tiny allreduce
            start = time.perf_counter()
            on_gpu = torch.ones(1, device="cuda")
            dist.all_reduce(on_gpu, group=worker.group_for("nccl"))
            torch.cuda.synchronize()
            report["nccl_us"] = (time.perf_counter() - start) * 1e6
            if int(on_gpu.item()) != worker.world:
                raise WorkerFailure("error", f"nccl allreduce gave {on_gpu.item()}")
        reports = worker.control.objects(report)
        return reports if worker.rank == 0 else None

    return run_in_worker(config, env, body)


def run_doctor(nproc: int | None, timeout: float, backend: str) -> int:
    """Print the environment, then the per-rank connectivity table; 0 when every rank arrived."""
    from rich.table import Table

    from commbench import launch
    from commbench.errors import EXIT_OK, UsageError
    from commbench.measure_command import check_backends, resolve_backends

    env = launch.detect()
    if env is not None and nproc is not None:
        raise UsageError(f"--nproc cannot be used under {env.launcher}: it started the ranks")
    world = env.world if env else (nproc or 2)
    if world < 1:
        raise UsageError(f"bad --nproc {world}: at least 1 rank is needed")
    backends = resolve_backends(backend)
    from commbench.render import console as make_console

    console = make_console()
    if env is None or env.rank == 0:
        table = Table(title="environment", title_justify="left", show_header=False)
        for item, finding in environment_report(env):
            table.add_row(item, finding)
        console.print(table)
    config = RunConfig(ops=("allreduce",), backends=backends, timeout=timeout)
    check_backends(config, env.local_world if env else world)
    if env is None:
        from commbench.agent import run_local

        cuda = "nccl" in backends
        reports = run_local(doctor_worker, (config,), world, timeout, cuda)[0]
    else:
        reports = doctor_worker(config, env)
        if env.rank != 0:
            return EXIT_OK
    table = Table(title=f"rendezvous of {world} rank(s)", title_justify="left")
    nccl = "nccl_us" in reports[0]
    headers = ["rank", "host", "local rank", "join s", "barrier us", "allreduce us"]
    for header in headers + (["nccl first allreduce us"] if nccl else []):
        table.add_column(header, justify="right")
    for r in reports:
        cells = [str(r["rank"]), r["host"], str(r["local_rank"]), f"{r['join_s']:.2f}",
                 f"{r['barrier_us']:.0f}", f"{r['allreduce_us']:.0f}"]
        table.add_row(*cells, *([f"{r['nccl_us']:.0f}"] if nccl else []))
    console.print(table)
    console.print(f"all {world} rank(s) arrived and agree")
    return EXIT_OK
