"""A small DDP training loop, for `commbench record` (run it under torchrun).

    torchrun --nproc-per-node 2 examples/ddp_mlp.py --steps 5
    commbench record --out results/trace-ddp -- torchrun --nproc-per-node 2 examples/ddp_mlp.py

Prints, on rank 0, the gradient bytes and DDP's own bucket sizes (so a recording can be
checked against them) and the mean step time.

Faults to find with `commbench stragglers` (docs/guides/who-is-slowing-my-job.md), read from
the environment so the command line stays the job's:

- COMMBENCH_EXAMPLE_SLOW="2:0.03": rank 2 sleeps 30 ms in every forward; "2:0.03:5-8" in
  steps 5 to 8 only (step i is the loop's i-th iteration, as `record` counts steps);
- COMMBENCH_EXAMPLE_HANG="3:6": rank 3 stops before step 6's forward and never comes back
  (the others wait in their allreduce until --timeout);
- COMMBENCH_EXAMPLE_FR_DUMP=PREFIX: at the end each rank writes its Flight Recorder buffer
  to PREFIX<rank> (set TORCH_FR_BUFFER_SIZE too, or torch keeps nothing).
"""

import argparse
import datetime
import gc
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--bucket-mb", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--backend", default="gloo", help="gloo (CPU) or nccl (a GPU per rank)")
    parser.add_argument("--facts", help="write gradient bytes and DDP's buckets here (JSON)")
    parser.add_argument("--timeout", type=float, help="seconds a collective may wait")
    args = parser.parse_args()

    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    timeout = {"timeout": datetime.timedelta(seconds=args.timeout)} if args.timeout else {}
    dist.init_process_group(args.backend, **timeout)
    rank = dist.get_rank()
    slow_s, slow_steps = _fault("COMMBENCH_EXAMPLE_SLOW", rank)
    hang_at, _ = _fault("COMMBENCH_EXAMPLE_HANG", rank)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to(device),
                                    bucket_cap_mb=args.bucket_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(args.batch, args.width, device=device)
    times = []
    for step in range(args.steps):
        started = time.perf_counter()
        if hang_at is not None and step >= hang_at:
            time.sleep(3600)  # a hung rank: it never issues this step's calls
        optimizer.zero_grad()
        if slow_s and (slow_steps is None or slow_steps[0] <= step <= slow_steps[1]):
            time.sleep(slow_s)  # a straggler's slow forward
        model(inputs).square().mean().backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    facts = {
        "gradient_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "bucket_bytes": model._get_ddp_logging_data().get("rebuilt_bucket_sizes"),
        "step_s": sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0],
    }
    if dist.get_rank() == 0:
        print(json.dumps(facts))
        if args.facts:
            with open(args.facts, "w") as out:
                json.dump({**facts, "step_times_s": times}, out)  # every step, rank 0's
    if os.environ.get("COMMBENCH_EXAMPLE_FR_DUMP"):
        from commbench.core.compat import dump_flight_recorder

        dump_flight_recorder(f"{os.environ['COMMBENCH_EXAMPLE_FR_DUMP']}{rank}")
    # The model holds the group: drop it (and its cycles) first, or gloo's threads may still
    # be running at interpreter exit and abort it (torch 2.13: "terminate called without an
    # active exception" in about 1 run in 6 of this loop, recorded or not).
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


def _fault(name: str, rank: int) -> tuple[float | None, tuple[int, int] | None]:
    """RANK:VALUE[:FIRST-LAST] from the environment: this rank's value (None if it is not
    the rank named) and the steps it applies to (None: every step)."""
    words = os.environ.get(name, "").split(":")
    if len(words) < 2 or int(words[0]) != rank:
        return None, None
    steps = tuple(int(s) for s in words[2].split("-")) if len(words) > 2 else None
    return float(words[1]), steps


if __name__ == "__main__":
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    main()
