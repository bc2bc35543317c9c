"""A small FSDP2 (``fully_shard``) training loop on a CPU mesh, for `commbench record`.

    torchrun --nproc-per-node 2 examples/fsdp_mlp.py --steps 3

Prints, on every rank, the parameter bytes each rank holds as its shard, the unsharded parameter
bytes, and the mesh's ranks, so a recording can be checked against them.
"""

import argparse
import gc
import json
import os

import torch
import torch.distributed as dist

UNSUPPORTED = 77  # the exit status of a torch whose FSDP2 cannot train on CPU


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1,
                        help="a (replicas, shards) mesh: shard over the inner dimension")
    parser.add_argument("--facts", help="write the parameter bytes and mesh here (JSON)")
    args = parser.parse_args()

    from torch.distributed.device_mesh import init_device_mesh
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6 kept it private
        from torch.distributed._composable.fsdp import fully_shard

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (args.replicas, world // args.replicas),
                            mesh_dim_names=("replicate", "shard"))["shard"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width)
                                  for _ in range(args.layers)])
    unsharded = sum(p.numel() * p.element_size() for p in model.parameters())
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(8, args.width)
    for step in range(args.steps):
        optimizer.zero_grad()
        try:
            model(inputs).square().mean().backward()
        except (RuntimeError, AttributeError) as error:
            if step:
                raise
            # FSDP2 on CPU needs a torch that supports it (2.9 runs it; 2.4-2.6 CUDA builds
            # reach for a CUDA driver or stream API): say so apart from a real failure.
            print(f"FSDP2 cannot run on CPU in torch {torch.__version__}: {error}")
            raise SystemExit(UNSUPPORTED) from None
        optimizer.step()
    facts = {
        "unsharded_bytes": unsharded,
        "shard_bytes": sum(p.to_local().numel() * p.element_size() for p in model.parameters()),
        "layers": args.layers,
        "mesh_ranks": mesh.mesh.flatten().tolist(),
    }
    print(json.dumps({"rank": dist.get_rank(), **facts}))
    if args.facts:
        with open(f"{args.facts}.{dist.get_rank()}", "w") as out:
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
