"""A small DDP training loop, for `commbench record` (run it under torchrun).

    torchrun --nproc-per-node 2 examples/ddp_mlp.py --steps 5
    commbench record --out results/trace-ddp -- torchrun --nproc-per-node 2 examples/ddp_mlp.py

Prints, on rank 0, the gradient bytes and DDP's own bucket sizes (so a recording can be
checked against them) and the mean step time.
"""

import argparse
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
    args = parser.parse_args()

    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to(device),
                                    bucket_cap_mb=args.bucket_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(args.batch, args.width, device=device)
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        optimizer.zero_grad()
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
                json.dump(facts, out)
    # The model holds the group: drop it (and its cycles) first, or gloo's threads may still
    # be running at interpreter exit and abort it (torch 2.13: "terminate called without an
    # active exception" in about 1 run in 6 of this loop, recorded or not).
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    main()
