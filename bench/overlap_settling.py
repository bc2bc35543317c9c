"""Why the hand-written overlap reference reads its collective alone slow (issue 43): three
measurements, each printing what it saw (docs/guides/overlap-and-contention.md, "Cost").

``phases``: bench/overlap.py's reference loop with parts of each round left out, launches
alternated: ``all`` (as the reference runs), ``alone`` (the comm-alone phase only), ``beside``
(comm alone and beside), ``compute`` (comm alone and compute alone), ``main`` (compute alone on
the main thread, not a thread of its own), ``persistent`` (all phases, the compute on one thread
that lives through the run, as commbench's MatmulLoad, instead of a thread per block). Prints
each launch's comm-alone and beside medians.

``settle``: per rank, 500 allreduce calls, 80 ms of matmuls on a thread, then two more runs of
500 calls; for each, its wall time, the calls that took over 2 ms (on this VM a slow call
waits about one 4 ms scheduler tick), and the CPU ticks each thread of the rank used.

``levels``: launches of 2,000 4 KiB allreduce calls, ranks placed as commbench places them,
nothing else in the run: per launch the median and mean call and the calls over 2 ms. What
makes a launch land on the fast or the slow level (docs/guides/ci-gate.md).

    python bench/overlap_settling.py phases [--launches 4]
    python bench/overlap_settling.py settle [--launches 2]
    python bench/overlap_settling.py levels [--launches 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overlap  # noqa: E402  (the reference's harness: spawn_pair, join_placed)

ROUNDS, BLOCKS = overlap.ROUNDS, overlap.BLOCKS
VARIANTS = ("all", "alone", "beside", "compute", "main", "persistent")
STALL_S = 0.002


def _phases_rank(rank: int, port: int, queue, variant: str, size: int, side: int,
                 seconds: float) -> None:
    import torch.distributed as dist

    cpus = overlap.join_placed(rank, port)
    kernel, timed_calls, calls, kernels = overlap.reference_loop(size, side, seconds)
    sides: dict[str, list[float]] = {"alone": [], "beside": []}
    persistent = overlap.ComputeThread(cpus) if variant == "persistent" else None

    def on_compute_thread(job) -> threading.Thread | None:
        """Start ``job`` on a thread of its own, or on the launch's one thread."""
        if persistent is not None:
            persistent.start(job)
            return None
        worker = threading.Thread(target=job)
        worker.start()
        return worker

    def wait(worker: threading.Thread | None) -> None:
        if worker is None:
            persistent.wait()
        else:
            worker.join()

    def comm_alone() -> None:
        for _ in range(BLOCKS):
            dist.barrier()
            sides["alone"].append(timed_calls(calls))

    def beside() -> None:
        for _ in range(BLOCKS):
            dist.barrier()
            stop = threading.Event()

            def loop(stop: threading.Event = stop) -> None:
                os.sched_setaffinity(0, cpus)
                while not stop.is_set():
                    kernel()

            worker = on_compute_thread(loop)
            sides["beside"].append(timed_calls(calls))
            stop.set()
            wait(worker)

    def compute_alone() -> None:
        for _ in range(BLOCKS):
            dist.barrier()
            if variant == "main":
                for _ in range(kernels):
                    kernel()
                continue

            def alone() -> None:
                os.sched_setaffinity(0, cpus)
                for _ in range(kernels):
                    kernel()

            wait(on_compute_thread(alone))

    phases = {"all": [comm_alone, beside, compute_alone], "alone": [comm_alone],
              "beside": [comm_alone, beside], "compute": [comm_alone, compute_alone],
              "main": [comm_alone, beside, compute_alone],
              "persistent": [comm_alone, beside, compute_alone]}[variant]
    for index in range(ROUNDS):
        for phase in phases if index % 2 == 0 else phases[::-1]:
            phase()
    if persistent is not None:
        persistent.close()
    queue.put((rank, {k: statistics.median(v) * 1e6 if v else None for k, v in sides.items()}))
    dist.barrier()
    dist.destroy_process_group()


def _thread_ticks() -> dict[str, int]:
    """CPU ticks (user + system) of every thread of this process, by name:tid."""
    found = {}
    for task in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{task}/stat").read_text()
            name = Path(f"/proc/self/task/{task}/comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found[f"{name}:{task}"] = int(fields[11]) + int(fields[12])
    return found


def _settle_rank(rank: int, port: int, queue, calls: int) -> None:
    import torch
    import torch.distributed as dist

    cpus = overlap.join_placed(rank, port)
    buf = torch.ones(256)
    a = torch.rand(256, 256)
    out = torch.empty_like(a)
    for _ in range(50):
        dist.all_reduce(buf)
    seen = []
    for phase in ("calls before", "matmuls", "calls right after", "calls after those"):
        dist.barrier()
        ticks, start, stalls = _thread_ticks(), time.perf_counter(), 0
        if phase == "matmuls":
            def loop() -> None:
                os.sched_setaffinity(0, cpus)
                for _ in range(200):
                    torch.matmul(a, a, out=out)

            worker = threading.Thread(target=loop)
            worker.start()
            worker.join()
        else:
            for _ in range(calls):
                begin = time.perf_counter()
                dist.all_reduce(buf)
                stalls += time.perf_counter() - begin > STALL_S
        after = _thread_ticks()
        used = {k: after[k] - ticks.get(k, 0) for k in after if after[k] > ticks.get(k, 0)}
        seen.append({"phase": phase, "wall_s": round(time.perf_counter() - start, 3),
                     "calls_over_2ms": stalls, "thread_ticks": used})
    queue.put((rank, seen))
    dist.barrier()
    dist.destroy_process_group()


def _levels_rank(rank: int, port: int, queue, calls: int) -> None:
    import torch
    import torch.distributed as dist

    overlap.join_placed(rank, port)
    buf = torch.ones(1024)
    for _ in range(50):
        dist.all_reduce(buf)
    dist.barrier()
    times = []
    for _ in range(calls):
        begin = time.perf_counter()
        dist.all_reduce(buf)
        times.append(time.perf_counter() - begin)
    queue.put((rank, {"p50_us": round(statistics.median(times) * 1e6),
                      "mean_us": round(statistics.fmean(times) * 1e6),
                      "calls_over_2ms": sum(t > STALL_S for t in times),
                      "of_them_3_to_5ms": sum(0.003 <= t < 0.005 for t in times),
                      "calls_1_to_2ms": sum(0.001 <= t <= STALL_S for t in times),
                      "calls": calls}))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("part", choices=("phases", "settle", "levels"))
    parser.add_argument("--launches", type=int, default=4)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    if args.part == "levels":
        for _ in range(args.launches):
            print(dict(overlap.spawn_pair(_levels_rank, (2000,)))[0], flush=True)
        return
    if args.part == "settle":
        for _ in range(args.launches):
            for rank, seen in sorted(overlap.spawn_pair(_settle_rank, (500,))):
                for phase in seen:
                    print({"rank": rank, **phase}, flush=True)
        return
    found: dict[str, list[dict]] = {v: [] for v in args.variants}
    for index in range(args.launches):
        for variant in args.variants if index % 2 == 0 else args.variants[::-1]:
            got = dict(overlap.spawn_pair(_phases_rank, (variant, 1024, 256, 1.0)))
            found[variant].append(got[0])
    for variant, launches in found.items():
        print(variant, "comm alone / beside (us): " + "  ".join(
            f"{r['alone']:.0f}/{r['beside']:.0f}" if r["beside"] else f"{r['alone']:.0f}/-"
            for r in launches), flush=True)


if __name__ == "__main__":
    main()
