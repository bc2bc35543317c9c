"""The reference a benchmark harness is judged against: a hand-written torch.distributed loop.

Two ranks started with torch.multiprocessing, gloo on loopback, back-to-back calls timed as one
loop; the loop average of the slowest rank (like for like with commbench's mean). Prints one
JSON object per size: {"op", "size_bytes", "mean_us", "median_us", "first_row_s"}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time


def _worker(rank, world, port, op, sizes, seconds, started, queue):
    import torch
    import torch.distributed as dist

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    for size in sizes:
        count = max(world, size // 4)
        count -= count % world
        buf = torch.ones(count)
        small = torch.ones(count // world)
        peer = rank ^ 1
        if op == "allreduce":
            def call():
                dist.all_reduce(buf)
        elif op == "allgather":
            def call():
                gather(buf, small)
        elif op == "broadcast":
            def call():
                dist.broadcast(buf, 0)
        elif rank == 0:  # pingpong: one iteration = a round trip
            def call():
                dist.send(buf, peer)
                dist.recv(buf, peer)
        else:
            def call():
                dist.recv(buf, peer)
                dist.send(buf, peer)
        for _ in range(3):
            call()
        # Calibrate a count that takes about `seconds`, agreed by all ranks.
        dist.barrier()
        t0 = time.perf_counter()
        call()
        one = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(one, op=dist.ReduceOp.MAX)
        iters = max(5, int(seconds / max(one.item(), 1e-6)))
        blocks = []
        for _ in range(5):  # five loops: a mean, and a median of loop averages
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters // 5 or 1):
                call()
            blocks.append((time.perf_counter() - t0) / (iters // 5 or 1))
        times = torch.tensor(blocks, dtype=torch.float64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        scale = 2 if op == "pingpong" else 1
        if rank == 0:
            queue.put({"op": op, "size_bytes": count * 4,
                       "mean_us": float(times.mean()) / scale * 1e6,
                       "median_us": statistics.median(times.tolist()) / scale * 1e6,
                       "first_row_s": time.time() - started})
    dist.destroy_process_group()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--op", default="allreduce",
                        choices=["allreduce", "allgather", "broadcast", "pingpong"])
    parser.add_argument("--sizes", default="8,65536,16777216")
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--started", type=float, default=None)
    args = parser.parse_args(argv)
    started = args.started or time.time()
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = [int(s) for s in args.sizes.split(",")]
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    mp.spawn(_worker, args=(2, port, args.op, sizes, args.seconds, started, queue), nprocs=2)
    while not queue.empty():
        print(json.dumps(queue.get()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
