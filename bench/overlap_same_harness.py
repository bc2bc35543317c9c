"""commbench's overlap loop (measure.overlap.measure_overlap) run inside bench/overlap.py's
hand-written harness, beside that harness's own loop, launch after launch: where the two loops
disagree in the same kind of process, the difference is in the loop; where they agree, it is in
how the ranks were launched. Prints one JSON line per launch pair (absolute medians in us).

    python bench/overlap_same_harness.py [--size 1024] [--matmul 256] [--launches 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import overlap  # noqa: E402  (bench/overlap.py: the reference and its harness)


def _rank(rank: int, port: int, queue, size: int, side: int, seconds: float) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    from commbench.engine.timers import HostTimer
    from commbench.measure.overlap import MatmulLoad, combined_compute, measure_overlap
    from commbench.measure.sampling import Budget

    cpus = overlap.join_placed(rank, port)  # as the reference's ranks and commbench's

    class Control:
        def barrier(self) -> None:
            dist.barrier()

        def gather(self, values: list[float]) -> np.ndarray:
            mine = torch.tensor(values, dtype=torch.float64)
            out = [torch.empty_like(mine) for _ in range(2)]
            dist.all_gather(out, mine)
            return torch.stack(out).numpy()

    buf = torch.ones(max(1, size // 4))
    load = MatmulLoad(side, "float32", "cpu")
    overlap.spread(cpus)  # the load's thread too
    samples = measure_overlap(functools.partial(dist.all_reduce, buf), HostTimer(), Control(),
                              Budget(min_time=seconds), load, 6)
    load.close()
    if rank == 0:
        def median(parts) -> float:
            return float(np.median(np.concatenate([p.mean(axis=0) for p in parts])))

        def kernels(parts) -> float:  # each rank's own kernels, as commbench's row combines them
            return float(np.median(np.concatenate(combined_compute(parts))))

        alone, beside = median(samples.comm_alone), median(samples.comm_beside)
        kernel_alone, kernel_beside = kernels(samples.compute_alone), kernels(
            samples.compute_beside)
        queue.put({"comm_slowdown": beside / alone, "comm_alone_us": alone * 1e6,
                   "comm_beside_us": beside * 1e6,
                   "compute_slowdown": kernel_beside / kernel_alone,
                   "compute_alone_us": kernel_alone * 1e6,
                   "compute_beside_us": kernel_beside * 1e6})
    dist.barrier()
    dist.destroy_process_group()


def commbench_loop(size: int, side: int, seconds: float) -> dict:
    (got,) = overlap.spawn_pair(_rank, (size, side, seconds), results=1)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--matmul", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.launches):
        loop = commbench_loop(args.size, args.matmul, args.seconds)
        reference = overlap.reference(args.size, args.matmul, args.seconds)
        print(json.dumps({"commbench_loop": {k: round(v, 3) for k, v in loop.items()},
                          "reference": {k: round(v, 3) for k, v in reference.items()}}))


if __name__ == "__main__":
    main()
