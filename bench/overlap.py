"""--overlap against a hand-written reference, and what the alternation costs.

Reference: two gloo ranks started with torch.multiprocessing, each with a thread of matmuls
(one for the launch: ComputeThread) beside a loop of all_reduce, everything timed by hand with
perf_counter: per round, a block of all_reduce alone, a block beside the matmul thread (the
matmuls that ended inside it are the compute beside), a block of matmuls alone on that thread,
a barrier before each block, the order
reversed every other round; ratios of the medians over rounds. Its ranks are placed as
commbench places its own (the timing thread on a core, every other thread over all CPUs, one
intra-op thread). ``bench/overlap_same_harness.py`` runs commbench's own loop inside this
harness, to tell the loop from the launch. commbench: `commbench allreduce --overlap
matmul:N` at the same size. Launches alternate (reference first, then commbench first).
Figures: the median over pairs of commbench's comm_slowdown and compute_slowdown over the
reference's (target 0.95-1.05), and the cost of the alternation: an overlap row's wall_s
over a plain row's at the same --min-time.

    python bench/overlap.py [--pairs 3] [--size 1024] [--matmul 256] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue as queue_module
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PYTHON = sys.executable
ROUNDS = 6
BLOCKS = 3


def spawn_pair(target, args: tuple, results: int = 2) -> list:
    """Two gloo ranks spawned with torch.multiprocessing, each running ``target(rank, port,
    queue, *args)``; the first ``results`` items they put on the queue."""
    import torch.multiprocessing as mp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned ranks, every thread
    context = mp.get_context("spawn")
    queue = context.Queue()
    procs = [context.Process(target=target, args=(r, port, queue, *args)) for r in range(2)]
    for proc in procs:
        proc.start()
    got = [queue.get(timeout=600) for _ in range(results)]
    for proc in procs:
        proc.join(timeout=60)
    return got


def join_placed(rank: int, port: int) -> set[int]:
    """Join the 2-rank gloo group and place this rank as commbench places a rank it starts;
    returns the CPUs every thread but the timing one may use (``spread`` puts them there)."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # One intra-op thread, as in the ranks commbench starts (cli.main sets OMP_NUM_THREADS=1
    # before torch is imported): with torch's default of a thread per core, the first run of
    # this bench read the matmul 0.27x and 0.77x as slow beside the collective as alone.
    # spawn_pair also sets OMP_NUM_THREADS=1 before the ranks start, so the reference runs
    # under the environment commbench's ranks inherit, whatever thread does the matmul. Until
    # 2026-12-07 commbench's own CPU ranks did not: forked from a launcher that had imported
    # torch with an OpenMP team (launch.local.start_method), and their compute_slowdown read
    # 1.060x the reference's (1.025-1.097, 40 pairs); after the fix 1.001 (0.970-1.034).
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    # Placed as commbench places a rank it starts (--bind auto, engine.binding): the timing
    # thread on a core of its own, every other thread (gloo's, the matmul loop's) over all
    # CPUs. Unbound, a 1K allreduce here took 1.2-1.7 ms a call against commbench's 0.3-0.4,
    # and the reference then measured another placement than commbench's (comm_slowdown
    # ratio 1.94, 2026-12-05).
    cpus = set(os.sched_getaffinity(0))
    spread(cpus)
    os.sched_setaffinity(0, {sorted(cpus)[rank % len(cpus)]})
    return cpus


def spread(cpus: set[int]) -> None:
    """Every thread of this process but the calling one over ``cpus`` (engine.binding)."""
    for task in os.listdir("/proc/self/task"):
        if int(task) != threading.get_native_id():
            os.sched_setaffinity(int(task), cpus)


class ComputeThread:
    """The reference's compute runs here: one thread for the whole launch, over ``cpus``, as a
    job's compute thread lives through the job (and commbench's MatmulLoad through a run).
    The reference first started a thread per block, and the collective calls of the next few
    hundred milliseconds then ran slow: its comm-alone blocks read 1.0-2.1 ms a call against
    0.33-0.88 ms with one thread for the run (bench/overlap_settling.py, 2026-12-07)."""

    def __init__(self, cpus: set[int]) -> None:
        self._jobs: queue_module.Queue = queue_module.Queue()
        self._done: queue_module.Queue = queue_module.Queue()
        self._cpus = cpus
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        os.sched_setaffinity(0, self._cpus)  # not the timing thread's core alone
        while (job := self._jobs.get()) is not None:
            job()
            self._done.put(True)

    def start(self, job) -> None:
        self._jobs.put(job)

    def wait(self) -> None:
        self._done.get()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)


def reference_loop(size: int, side: int, seconds: float):
    """The reference's kernel and timed loop of all_reduce, warmed up, and its calls and
    kernels per block (the same on both ranks); bench/overlap_settling.py cuts the rounds
    around them down."""
    import torch
    import torch.distributed as dist

    buf = torch.ones(max(1, size // 4))
    # Two operands, as a job multiplies two matrices and as commbench's MatmulLoad does, so
    # that both sides run the same kernel. (a @ a was not why commbench's compute_slowdown
    # read 1.06x the reference's: geometric mean 1.059 over 31 pairs with a @ a, 1.060 over 40
    # with a @ b; the launcher's OpenMP team was, see join_placed, 2026-12-07.)
    a = torch.rand(side, side)
    b = a.clone()
    out = torch.empty_like(a)
    clock = time.perf_counter

    def kernel() -> None:
        torch.matmul(a, b, out=out)

    def timed_calls(count: int) -> float:
        start = clock()
        for _ in range(count):
            dist.all_reduce(buf)
        return (clock() - start) / count

    for _ in range(20):
        dist.all_reduce(buf)
    kernel()
    per_call = max(1e-6, timed_calls(20))
    start = clock()
    kernel()
    per_kernel = clock() - start
    share = seconds / ROUNDS / 3 / BLOCKS
    calls = max(int(share / per_call), int(4 * per_kernel / per_call) + 1)
    kernels = max(1, int(share / per_kernel))
    numbers = torch.tensor([float(calls), float(kernels)])
    dist.all_reduce(numbers, op=dist.ReduceOp.MAX)  # the same counts on both ranks
    return kernel, timed_calls, int(numbers[0]), int(numbers[1])


def _reference_rank(rank: int, port: int, queue, size: int, side: int,
                    seconds: float) -> None:
    import torch.distributed as dist

    cpus = join_placed(rank, port)
    clock = time.perf_counter
    kernel, timed_calls, calls, kernels = reference_loop(size, side, seconds)
    compute = ComputeThread(cpus)
    sides: dict[str, list[float]] = {k: [] for k in ("comm", "comm_b", "comp", "comp_b")}

    def comm_alone() -> None:
        for _ in range(BLOCKS):
            dist.barrier()
            sides["comm"].append(timed_calls(calls))

    def beside() -> None:
        for _ in range(BLOCKS):
            dist.barrier()
            stop, spans = threading.Event(), []

            def loop(stop=stop, spans=spans) -> None:
                while not stop.is_set():
                    begin = clock()
                    kernel()
                    spans.append((begin, clock()))

            compute.start(loop)
            begin = clock()
            sides["comm_b"].append(timed_calls(calls))
            end = clock()
            stop.set()
            compute.wait()
            inside = [b - a for a, b in spans if a >= begin and b <= end]
            if inside:
                sides["comp_b"].append(sum(inside) / len(inside))

    def compute_alone() -> None:
        for _ in range(BLOCKS):
            dist.barrier()

            def alone(times=sides["comp"]) -> None:  # where the beside loop runs
                start = clock()
                for _ in range(kernels):
                    kernel()
                times.append((clock() - start) / kernels)

            compute.start(alone)
            compute.wait()

    phases = [comm_alone, beside, compute_alone]
    for index in range(ROUNDS):
        # each side follows and precedes the others alike (as commbench alternates)
        for phase in (phases if index % 2 == 0 else phases[::-1]):
            phase()
    compute.close()
    queue.put((rank, sides))
    dist.barrier()
    dist.destroy_process_group()


def reference(size: int, side: int, seconds: float) -> dict:
    """The hand-written loop's two ratios (ranks' samples averaged block by block)."""
    results = dict(spawn_pair(_reference_rank, (size, side, seconds)))

    def median(name: str) -> float:
        per_rank = [results[r][name] for r in (0, 1)]
        length = min(len(values) for values in per_rank)
        return statistics.median((per_rank[0][i] + per_rank[1][i]) / 2 for i in range(length))

    return {"comm_slowdown": median("comm_b") / median("comm"),
            "compute_slowdown": median("comp_b") / median("comp"),
            "comm_alone_us": median("comm") * 1e6, "comm_beside_us": median("comm_b") * 1e6,
            "compute_alone_us": median("comp") * 1e6,
            "compute_beside_us": median("comp_b") * 1e6}


def commbench_row(scratch: Path, name: str, size: int, side: int, seconds: float,
                  overlap: bool) -> dict:
    args = [PYTHON, "-m", "commbench", "allreduce", "--nproc", "2", "--sizes", str(size),
            "--min-time", str(seconds), "--rounds", str(ROUNDS), "--quiet", "--out",
            str(scratch), "--name", name] + (["--overlap", f"matmul:{side}"] if overlap else [])
    subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads((scratch / name / "results.jsonl").read_text().splitlines()[0])


def figures(pairs: int, size: int, side: int, seconds: float) -> list[dict]:
    comm, compute, cost = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for index in range(pairs):
            order = ("ref", "cb") if index % 2 == 0 else ("cb", "ref")
            got = {}
            for side_name in order:
                if side_name == "ref":
                    got["ref"] = reference(size, side, seconds)
                else:
                    got["cb"] = commbench_row(scratch, f"ov-{index}", size, side, seconds, True)
            plain = commbench_row(scratch, f"plain-{index}", size, side, seconds, False)
            comm.append(got["cb"]["comm_slowdown"] / got["ref"]["comm_slowdown"])
            compute.append(got["cb"]["compute_slowdown"] / got["ref"]["compute_slowdown"])
            cost.append(got["cb"]["wall_s"] / plain["wall_s"])
            print(json.dumps({"pair": index, "reference": got["ref"],
                              "commbench": {k: got["cb"][k] for k in (
                                  "comm_slowdown", "comm_slowdown_lo", "comm_slowdown_hi",
                                  "compute_slowdown", "compute_slowdown_lo",
                                  "compute_slowdown_hi", "wall_s", "lat_us_p50_alone",
                                  "lat_us_p50")},
                              "plain_wall_s": plain["wall_s"]}), file=sys.stderr)
    label = f"allreduce {size} B beside matmul:{side}"
    rows = []
    for what, values in (("comm_slowdown", comm), ("compute_slowdown", compute)):
        ratio = statistics.median(values)
        rows.append({"figure": f"overlap {what} commbench / hand-written, {label}",
                     "value": f"{ratio:.3f}", "target": "0.95-1.05",
                     "met": 0.95 <= ratio <= 1.05,
                     "detail": f"median of {pairs} pairs ({_interval(values)}): "
                     + ", ".join(f"{v:.2f}" for v in values)})
    rows.append({"figure": f"overlap row wall / plain row wall, {label}, --min-time {seconds}",
                 "value": f"{statistics.median(cost):.2f}x", "target": "report", "met": None,
                 "detail": ", ".join(f"{v:.2f}" for v in cost)})
    return rows


def _interval(values: list[float]) -> str:
    """The pairs' geometric mean and its 95 % t interval: how far the median may be from the
    loops' true ratio (a pair here spreads over 0.3-2.6x, so 8 pairs cannot tell 1.0 from 1.3)."""
    if len(values) < 2:
        return "one pair: no interval"
    from commbench.core.student import paired_t

    centre, low, high, _ = paired_t([math.log(v) for v in values])
    return (f"geometric mean {math.exp(centre):.3f}, 95 % "
            f"{math.exp(low):.3f}-{math.exp(high):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--matmul", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    for row in figures(args.pairs, args.size, args.matmul, args.seconds):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
