"""A small FSDP2 (``fully_shard``) training loop on a CPU mesh, for `commbench record`.

    torchrun --nproc-per-node 2 examples/fsdp_mlp.py --steps 3

Prints, on every rank, the parameter bytes each rank holds as its shard, the unsharded parameter
bytes, and the mesh's ranks, so a recording can be checked against them.
"""

import argparse
import gc
import json
import os
import traceback

import torch
import torch.distributed as dist

UNSUPPORTED = 77  # the exit status of a torch whose FSDP2 cannot train on CPU
# FSDP2 before torch 2.9 reaches for a CUDA stream on a CPU mesh: 2.4's FSDPCommContext.lazy_init
# raises "FSDP requires CUDA for streams" when CUDA is not available; later releases call the
# stream API of torch.cuda (which a CUDA build on a machine without a driver refuses, and a CPU
# build has only as a dummy) or of torch.cpu (which lacked it).
# What a CUDA stream says where there is no usable GPU: torch 2.4.1's CUDA build read "Found no
# NVIDIA driver" on the CPU VM on 2026-12-01 and "CUDA driver version is insufficient for CUDA
# runtime version" on 2026-12-02 (the VM's driver libraries changed, not FSDP2).
NO_CUDA_WORDS = ("FSDP requires CUDA for streams", "Found no NVIDIA driver",
                 "CUDA driver version is insufficient", "no CUDA-capable device",
                 "Torch not compiled with CUDA enabled", "dummy base class Stream")


def cpu_limit(error: BaseException) -> str | None:
    """The one torch limitation this example steps aside for: FSDP2's own code (a frame in
    torch's fsdp package raised it) reaching for a CUDA or torch.cpu stream API this torch
    lacks. None for anything else, which then fails the run: a recorder that breaks FSDP2
    must not read as a skip."""
    frames = traceback.extract_tb(error.__traceback__)
    if not any(f"{os.sep}fsdp{os.sep}" in frame.filename and f"{os.sep}torch{os.sep}"
               in frame.filename for frame in frames):
        return None
    text = str(error)
    if isinstance(error, (RuntimeError, AssertionError)) and any(
            words in text for words in NO_CUDA_WORDS):
        return text
    if isinstance(error, AttributeError):
        missing_on = getattr(error, "obj", None)
        if missing_on is torch.cpu or type(missing_on).__module__ == "torch.cpu":
            return text
    return None


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
        except Exception as error:
            limit = cpu_limit(error) if step == 0 else None
            if limit is None:
                raise
            # FSDP2 on CPU needs a torch that supports it (2.9 runs it): say so apart from a
            # real failure.
            print(f"FSDP2 cannot run on CPU in torch {torch.__version__}: {limit}")
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
