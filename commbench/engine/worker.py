"""One rank: join the group, measure every (backend, op, size), and at rank 0 stream the rows.

Started by commbench's local agent (``run_local``) or, under torchrun / srun / mpirun, by the
CLI in every process. Rank 0 alone writes results.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from commbench import collectives
from commbench.collectives.base import OpContext
from commbench.config import ITEMSIZE, RunConfig
from commbench.engine.coordination import Control, Watch, connect, heartbeat_interval
from commbench.engine.failures import (
    WorkerFailure,
    diagnose,
    die_with_parent,
    first_line,
    injected_fault,
)
from commbench.engine.measure import Budget, Measurement, measure
from commbench.engine.timers import CudaEventTimer, CudaGraphTimer, HostTimer
from commbench.errors import EXIT_RUN_FAILED
from commbench.launch import RankEnv
from commbench.results import metadata
from commbench.results.rundir import RunDir
from commbench.results.schema import Row
from commbench.sizes import format_size
from commbench.stats import instability, summarize

REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}
def run_worker(config: RunConfig, env: RankEnv | None = None) -> int:
    """Entry point of every rank; returns the number of wrong elements (rank 0's view)."""
    return run_in_worker(config, env, Worker.run)


def run_in_worker(config: RunConfig, env: RankEnv | None, body):
    """Run ``body(worker)`` as one rank: failures are reported to the store, exit code 3."""
    from commbench.launch import agent_rank_env, pin_interfaces

    env = env or agent_rank_env()
    if env.launcher == "local":
        die_with_parent()
    pin_interfaces(env)
    worker = Worker(config, env)
    try:
        return body(worker)
    except WorkerFailure as failure:
        worker.fail(failure)
        sys.exit(EXIT_RUN_FAILED)
    finally:
        worker.close()


class Worker:
    def __init__(self, config: RunConfig, env: RankEnv) -> None:
        self.config = config
        self.env = env
        self.rank = env.rank
        self.world = env.world
        self.watch: Watch | None = None
        self.run_dir = RunDir(config.run_dir) if env.rank == 0 and config.run_dir else None
        self.progress = None
        self.position = "rendezvous"
        self.wrong_total = 0
        self.nnodes = 1
        self._groups: dict = {}

    # ---- set-up -------------------------------------------------------------------------
    def join(self) -> None:
        """Bind the GPU, connect to the store, start the heartbeat, form the gloo group."""
        env, timeout = self.env, self.config.timeout
        uses_cuda = any(self.config.device_for(b) == "cuda" for b in self.config.backends)
        if uses_cuda:
            count = torch.cuda.device_count()
            if "nccl" in self.config.backends and env.local_rank >= count:
                raise WorkerFailure(
                    "error", f"LOCAL_RANK {env.local_rank} has no GPU ({count} visible)"
                )
            # NCCL needs a GPU per rank; gloo's CUDA ranks may share one.
            torch.cuda.set_device(env.local_rank % count)  # bind before any group exists
        is_master = env.rank == 0 and not env.agent_store
        try:
            store = connect(env.master_addr, env.master_port, timeout, is_master, env.world)
            beat_store = connect(env.master_addr, env.master_port, timeout)
        except Exception as error:
            raise WorkerFailure(
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

    def _describe_run(self) -> None:
        devices = [self.config.device_for(b) for b in self.config.backends]
        hosts = self.control.objects(metadata.host_facts(self.env.local_rank, devices))
        self.nnodes = len({(h["host"], h["node"]) for h in hosts})
        if self.rank != 0:
            return
        self.run_dir.write_meta(
            {
                "name": os.path.basename(self.config.run_dir),
                "status": "running",
                "error": None,
                "command_line": list(self.config.command_line),
                "start_time": metadata.now(),
                "end_time": None,
                "launcher": self.env.launcher,
                "world_size": self.world,
                "nnodes": self.nnodes,
                "hosts": sorted({h["host"] for h in hosts}),
                "ranks": hosts,
                "backends": list(self.config.backends),
                "config": {
                    k: v
                    for k, v in self.config.__dict__.items()
                    if k not in ("command_line", "run_dir")
                },
                "versions": metadata.versions(),
                "env": metadata.relevant_env(),
            }
        )

    # ---- the sweep ----------------------------------------------------------------------
    def run(self) -> int:
        self.join()
        self._describe_run()
        plan = [
            (backend, collectives.get(name), pattern)
            for backend in self.config.backends
            for name in self.config.ops
            for pattern in (self.config.patterns if name == "p2p" else ("",))
        ]
        self._start_progress(sum(len(self._counts(op)) for _, op, _ in plan))
        for backend, op, pattern in plan:
            self._measure_op(backend, op, pattern)
        self._stop_progress()
        self.watch.at("done")
        self._record_memory()
        return self.wrong_total

    def _record_memory(self) -> None:
        """Peak resident memory of every rank, kept in run.json (make bench reads it)."""
        import resource

        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        peaks = self.control.objects(round(peak_mib, 1))
        if self.rank == 0:
            meta = self.run_dir.read_meta()
            for facts, peak in zip(meta.get("ranks", []), peaks, strict=False):
                facts["peak_rss_mib"] = peak
            self.run_dir.write_meta(meta)

    def _counts(self, op) -> list[int]:
        if not op.sized:
            return [0]
        itemsize = ITEMSIZE[self.config.dtype]
        return sorted({op.count_for(s, itemsize, self.world) for s in self.config.sizes})

    def _measure_op(self, backend: str, op, pattern: str) -> None:
        config = self.config
        device = config.device_for(backend)
        group = self.group_for(backend)
        ctx = OpContext(
            rank=self.rank,
            world=self.world,
            group=group,
            dtype=config.dtype,
            reduce_op=config.reduce_op,
            torch_op=REDUCE_OPS[config.reduce_op],
            root=config.root,
            inplace=config.inplace,
            pattern=pattern,
        )
        counts = self._fitting(op, ctx, device, self._counts(op))
        largest = op.layout(ctx, counts[-1]) if counts else None
        dtype = getattr(torch, config.dtype)
        # Allocated once for the largest size; every size is a view (SPEC §4).
        send = torch.empty(largest.send if largest else 0, dtype=dtype, device=device)
        recv = torch.empty(largest.recv if largest else 0, dtype=dtype, device=device)
        timer = self._timer(device)
        budget = Budget(min_time=config.min_time, iters=config.iters, warmup=config.warmup)
        for count in counts:
            size_bytes = count * ITEMSIZE[config.dtype]
            label = f"{op.name}/{pattern}" if pattern else op.name
            self.position = f"{label} at {format_size(size_bytes) if count else '-'} ({backend})"
            self.watch.at(self.position)
            if self.progress is not None:
                self.progress.update(self._task, description=self.position)
            started = time.perf_counter()
            fault = injected_fault(self.rank, op.name, size_bytes)
            if fault == "raise":
                raise WorkerFailure("error", f"injected fault in {self.position}")
            try:
                bufs = op.views(ctx, send, recv, count)
                op.prepare(ctx, bufs)
                measurement = measure(op.call(ctx, bufs), timer, self.control, budget)
                corrupt = fault == "corrupt"
                wrong = self._check(op, ctx, bufs, corrupt) if config.check else 0
            except WorkerFailure:
                raise
            except Exception as error:
                raise diagnose(error, self.position, self.watch, config.timeout) from None
            self.wrong_total += wrong
            if self.rank == 0:
                scale = op.messages_per_iteration(ctx, bufs)
                row = self._row(op, ctx, backend, device, count, measurement, scale, wrong)
                row.wall_s = round(time.perf_counter() - started, 4)
                self._emit(row)

    def _fitting(self, op, ctx, device: str, counts: list[int]) -> list[int]:
        """On GPUs, cap the sweep by free device memory (nccl-tests caps maxBytes likewise)."""
        if device != "cuda" or not counts:
            return counts
        torch.cuda.empty_cache()  # the previous op's buffers are free, but still cached
        free = float(self.control.gather([torch.cuda.mem_get_info()[0]]).min())
        itemsize = ITEMSIZE[self.config.dtype]

        def need(count: int) -> int:
            layout = op.layout(ctx, count)
            return (layout.send + layout.recv) * itemsize

        fitting = [c for c in counts if need(c) <= 0.9 * free - (256 << 20)]
        if len(fitting) < len(counts) and self.rank == 0:
            skipped = ", ".join(format_size(c * itemsize) for c in counts[len(fitting) :])
            print(f"warning: skipping {op.name} sizes that do not fit in GPU memory: {skipped}",
                  file=sys.stderr)
        return fitting

    def _timer(self, device: str):
        if device != "cuda":
            return HostTimer()
        if self.config.host_timer:
            return HostTimer(sync=torch.cuda.synchronize)
        if self.config.cuda_graph:
            return CudaGraphTimer()
        return CudaEventTimer(blocking=self.config.blocking)

    def _check(self, op, ctx, bufs, corrupt: bool = False) -> int:
        """Outside the timed loop: fresh inputs, one call, every element compared."""
        op.prepare(ctx, bufs)
        self.control.barrier()
        op.call(ctx, bufs)()
        if bufs.recv.is_cuda:
            torch.cuda.synchronize()
        if corrupt:
            bufs.recv.view(-1)[0] += 1
        return self.control.total(op.wrong(ctx, bufs))

    def _row(self, op, ctx, backend, device, count, measurement: Measurement, scale, wrong) -> Row:
        per_rank_us = measurement.per_rank / scale * 1e6
        samples_us = per_rank_us.max(axis=0)
        stats = summarize(samples_us)
        size_bytes = count * ITEMSIZE[self.config.dtype]
        algbw = size_bytes / (stats.p50 * 1e-6) / 1e9 if stats.p50 > 0 else 0.0
        rank_medians = np.median(per_rank_us, axis=1)
        slowest = int(np.argmax(rank_medians))
        top = float(rank_medians[slowest])
        skew = (top - float(rank_medians.min())) / top * 100 if top > 0 else 0.0
        return Row(
            op=collectives.row_name(op.name),
            backend=backend,
            device=device,
            world_size=self.world,
            nnodes=self.nnodes,
            dtype=self.config.dtype,
            reduce_op=self.config.reduce_op if op.reduces else "",
            inplace=op.is_in_place(ctx),
            size_bytes=size_bytes,
            count=count,
            iters=measurement.iters,
            samples=int(samples_us.size),
            **stats.as_columns(),
            algbw_gbps=algbw,
            busbw_gbps=algbw * op.busbw_factor(self.world, ctx.pattern),
            wrong=wrong,
            slowest_rank=slowest,
            skew_pct=skew,
            pattern=ctx.pattern,
            root=self.config.root if op.rooted else None,
            unstable=instability(stats.p50, stats.p99, stats.ci_lo, stats.ci_hi),
            samples_us=[round(float(s), 4) for s in samples_us],
        )

    def _emit(self, row: Row) -> None:
        record = row.to_dict()
        self.run_dir.append_row(record)
        if self.config.json_rows:
            record.pop("samples_us")
            print(json.dumps(record), flush=True)
        if self.progress is not None:
            self.progress.advance(self._task)

    def _start_progress(self, total: int) -> None:
        if self.rank != 0 or not self.config.progress:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
        )
        self.progress.start()
        self._task = self.progress.add_task("measuring", total=total)

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    # ---- failures -----------------------------------------------------------------------
    def fail(self, failure: WorkerFailure) -> None:
        self._stop_progress()
        if self.watch is not None:
            self.watch.report(failure.kind, str(failure))
        if self.env.launcher == "local":
            return  # the launcher reads the report and says it once
        print(f"error: rank {self.rank}: {failure}", file=sys.stderr, flush=True)
        if self.rank == 0 and self.config.run_dir:
            from commbench.results.finish import finish

            rows = self.run_dir.read_rows()
            finish(self.run_dir.path, "partial" if rows else "failed", str(failure))

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self.run_dir is not None:
            self.run_dir.close()
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()

