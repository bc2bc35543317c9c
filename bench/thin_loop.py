"""The reference a benchmark harness is judged against: a hand-written torch.distributed loop.

Two ranks started with torch.multiprocessing, gloo on loopback, each main thread bound to a core
of its own once the group exists (as commbench binds its local CPU ranks; --bind none: not), 0.5
s of untimed calls before the first size (as nccl-tests warms up before its sweep, and commbench
before a group's first size: right after start the machine runs slow for a few tenths of a
second, which would land on one side only), then back-to-back calls timed in blocks; each rank's
loop total over its iterations, averaged over the ranks, as nccl-tests reports its time (like
for like with commbench's default --rank-time avg mean). With --rounds R the sizes are visited
in R interleaved rounds (ascending, then descending, as commbench's --rounds), each visit a 1/R
share of --seconds. Prints one JSON object per size, after its last round: op, size_bytes,
mean_us (over the rounds' loop totals), median_us (of block averages, averaged over ranks),
round_means_us (each round's loop total per call), rounds_median_us (their median), first_row_s
(seconds from --started to this row), peak_rss_mib (largest rank).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import resource
import socket
import statistics
import sys
import threading
import time

from commbench.core import compat

BLOCKS = 5  # timed blocks per visit of a size, a barrier before each


def make_call(dist, op, buf, small, peer, first):
    gather = compat.all_gather_single(dist)
    if op == "allreduce":
        return lambda: dist.all_reduce(buf)
    if op == "allgather":
        return lambda: gather(buf, small)
    if op == "broadcast":
        return lambda: dist.broadcast(buf, 0)
    if op == "alltoallv":  # commbench alltoallv --routing uniform: even split sizes
        out, world = buf.clone(), dist.get_world_size()
        splits = [buf.numel() // world] * world
        return lambda: dist.all_to_all_single(out, buf, output_split_sizes=splits,
                                              input_split_sizes=splits)
    if first:  # pingpong: one iteration is a round trip

        def round_trip():
            dist.send(buf, peer)
            dist.recv(buf, peer)

        return round_trip

    def echo():
        dist.recv(buf, peer)
        dist.send(buf, peer)

    return echo


def _worker(rank, world, port, op, sizes, seconds, started, queue, bind, warm_up, rounds):
    import torch
    import torch.distributed as dist

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    cpus = sorted(os.sched_getaffinity(0))
    bound = bind == "core" and len(cpus) >= world
    if bound:  # as commbench's --bind auto: the main thread alone, after the group's threads
        os.sched_setaffinity(0, {cpus[rank]})

    def spread() -> None:
        """Threads torch started since, from the bound thread and so on its core, back on
        every CPU, at every visit (as commbench's Binding.settle)."""
        main = threading.get_native_id()
        for task in os.listdir("/proc/self/task"):
            if int(task) != main:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), cpus)
    warm = warm_up > 0
    calls, per_block, round_means = {}, {}, {size: [] for size in sizes}
    for index in range(rounds):
        # Round r visits every size once, ascending then descending (commbench's default
        # --order alternate), so a slow spell of the machine lands on every size alike.
        for size in (sizes if index % 2 == 0 else sizes[::-1]):
            if size not in calls:
                count = max(world, size // 4)
                count -= count % world
                buf, small = torch.ones(count), torch.ones(count // world)
                calls[size] = (count, make_call(dist, op, buf, small, rank ^ 1, rank == 0))
            call = calls[size][1]
            if bound:
                spread()
            for _ in range(3):  # untimed, at every visit: another size ran since
                call()
            if warm:  # before the first size, as nccl-tests warms up before its sweep
                warm = False
                spent, chunk = 0.0, 1
                while spent < warm_up:
                    start = time.perf_counter()
                    for _ in range(chunk):
                        call()
                    took = torch.tensor([time.perf_counter() - start])
                    dist.all_reduce(took, op=dist.ReduceOp.MAX)
                    spent, chunk = spent + took.item(), chunk * 2
            if size not in per_block:  # calibrated at the first visit
                dist.barrier()
                start = time.perf_counter()
                call()
                one = torch.tensor([time.perf_counter() - start])
                dist.all_reduce(one, op=dist.ReduceOp.MAX)
                per_block[size] = max(1, int(seconds / rounds / BLOCKS / max(one.item(),
                                                                             1e-6)))
            blocks = []
            for _ in range(BLOCKS):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(per_block[size]):
                    call()
                blocks.append((time.perf_counter() - start) / per_block[size])
            times = torch.tensor(blocks, dtype=torch.float64)
            dist.all_reduce(times, op=dist.ReduceOp.SUM)  # per block, the average over ranks
            round_means[size].append((times / world).tolist())
            if index == rounds - 1:  # the size's last visit: its row
                rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024])
                dist.all_reduce(rss, op=dist.ReduceOp.MAX)
                if rank == 0:
                    queue.put(_row(op, calls[size][0] * 4, round_means[size], started,
                                   float(rss.item())))
    dist.destroy_process_group()


def _row(op, size_bytes, visits, started, peak_rss_mib):
    """A size's row from its visits' block times (seconds, averaged over the ranks); a
    visit's blocks have equal counts, so their mean is the visit's loop total per call."""
    scale = 1e6 / (2 if op == "pingpong" else 1)  # pingpong: one way is half a round trip
    means = [statistics.mean(blocks) * scale for blocks in visits]
    every = [block * scale for blocks in visits for block in blocks]
    return {"op": op, "size_bytes": size_bytes, "mean_us": statistics.mean(means),
            "median_us": statistics.median(every), "round_means_us": means,
            "rounds_median_us": statistics.median(means),
            "first_row_s": time.time() - started, "peak_rss_mib": peak_rss_mib}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--op", default="allreduce",
                        choices=["allreduce", "allgather", "broadcast", "pingpong",
                                 "alltoallv"])
    parser.add_argument("--sizes", default="8,65536,16777216", help="bytes, comma-separated")
    parser.add_argument("--seconds", type=float, default=0.5, help="timed seconds per size")
    parser.add_argument("--started", type=float, default=None, help="epoch of the command")
    parser.add_argument("--bind", choices=["core", "none"], default="core",
                        help="core: rank i's main thread on the i-th CPU once the group "
                        "exists, as commbench's --bind auto (default); none: unbound")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved passes over the sizes, each a share of --seconds")
    parser.add_argument("--warm-up", type=float, default=0.5,
                        help="seconds of untimed calls before the first size (commbench's)")
    args = parser.parse_args(argv)
    started = args.started or time.time()
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = [int(s) for s in args.sizes.split(",")]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_worker, args=(2, port, args.op, sizes, args.seconds, started, queue, args.bind,
                               args.warm_up, args.rounds),
             nprocs=2)
    while not queue.empty():
        print(json.dumps(queue.get()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
