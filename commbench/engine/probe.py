"""doctor's rank: join, barrier, a one-element allreduce (and NCCL's first one), each timed, so
that a rank or host that does not arrive is named instead of hanging."""

from __future__ import annotations

import socket
import time

import torch
import torch.distributed as dist

from commbench.engine.failures import RankFailure, diagnose
from commbench.engine.session import Session


def probe_rank(env, timeout: float, backends: tuple[str, ...]) -> list[dict] | None:
    """Rank 0 returns every rank's report; the others return None."""
    session = Session(env, timeout, backends, cuda="nccl" in backends)
    try:
        start = time.perf_counter()
        session.join()
        joined = time.perf_counter() - start
        try:
            start = time.perf_counter()
            dist.barrier()
            barrier_us = (time.perf_counter() - start) * 1e6
            value = torch.ones(1)
            start = time.perf_counter()
            dist.all_reduce(value)
            allreduce_us = (time.perf_counter() - start) * 1e6
        except Exception as error:
            raise diagnose(error, "the barrier and allreduce", session.watch, timeout) from None
        if int(value.item()) != session.world:
            raise RankFailure("error", f"allreduce gave {value.item()}, not {session.world}")
        report = {"rank": session.rank, "host": socket.gethostname(),
                  "local_rank": env.local_rank, "join_s": joined,
                  "barrier_us": barrier_us, "allreduce_us": allreduce_us}
        if "nccl" in backends:  # communicator set-up plus one tiny allreduce
            start = time.perf_counter()
            try:
                on_gpu = torch.ones(1, device="cuda")
                dist.all_reduce(on_gpu, group=session.group_for("nccl"))
                torch.cuda.synchronize()
            except Exception as error:
                raise diagnose(error, "the first NCCL allreduce", session.watch,
                               timeout) from None
            report["nccl_us"] = (time.perf_counter() - start) * 1e6
            if int(on_gpu.item()) != session.world:
                raise RankFailure("error", f"nccl allreduce gave {on_gpu.item()}")
        reports = session.control.objects(report)
        return reports if session.rank == 0 else None
    except RankFailure as failure:
        session.report(failure)
        raise
    finally:
        session.close()
