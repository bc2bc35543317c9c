"""What `commbench record` costs a training step: examples/ddp_mlp.py on 2 gloo ranks, with and
without the recorder, in alternated pairs, the median step time of each side.

Two models: the issue's 50 M-parameter MLP (few, large tensor ops: the recorder's per-op Python
call is small beside them) and a small one (many small ops per second: the worst case for a
TorchDispatchMode, which every tensor op passes through).

    python bench/record.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"50M-param MLP": ["--width", "2048", "--layers", "12", "--bucket-mb", "25"],
          "0.8M-param MLP": ["--width", "256", "--layers", "3", "--bucket-mb", "0.3"]}


def step_s(model: list[str], steps: int, recorded: bool, scratch: Path) -> float:
    facts = scratch / "facts.json"
    job = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           str(ROOT / "examples" / "ddp_mlp.py"), "--steps", str(steps), "--facts", str(facts),
           *model]
    if recorded:
        job = [sys.executable, "-m", "commbench", "record", "--force", "--out",
               str(scratch / "trace"), "--", *job]
    subprocess.run(job, check=True, capture_output=True, env={**os.environ,
                                                               "OMP_NUM_THREADS": "1"})
    return json.loads(facts.read_text())["step_s"]


LOOP = """
import os, socket, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
import commbench.record

def rank_main(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    buffers = [torch.ones(n) for n in (16 << 10, 256 << 10, 4 << 20)]  # 64 KiB, 1 MiB, 16 MiB
    for step in range(int(sys.argv[1])):
        for data in buffers:
            dist.all_reduce(data)
        commbench.record.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(rank_main, args=(port,), nprocs=2)
"""


def replay_fidelity(steps: int = 30) -> dict:
    """A hand-written loop of synchronous allreduces (no compute, no overlap: replay should
    read what the job itself saw), recorded then replayed: replayed / in situ per step."""
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "loop.py"
        script.write_text(LOOP)
        trace = Path(scratch) / "trace"
        subprocess.run([sys.executable, "-m", "commbench", "record", "--out", str(trace), "--",
                        sys.executable, str(script), str(steps)], check=True,
                       capture_output=True)
        done = subprocess.run([sys.executable, "-m", "commbench", "replay", str(trace),
                               "--steps", str(steps - 1), "--out", scratch, "--json"],
                              check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    per_step = result["per_step"]
    ratio = per_step["replayed_s"] / per_step["in_situ_s"]
    return {"figure": "replay vs in situ, sync allreduce loop 64K+1M+16M (2 gloo ranks)",
            "value": f"{ratio:.3f}x",
            "detail": (f"per step {per_step['replayed_s'] * 1e3:.2f} ms replayed vs "
                       f"{per_step['in_situ_s'] * 1e3:.2f} ms recorded, {steps - 1} steps"),
            "target": "0.8-1.25x", "met": 0.8 <= ratio <= 1.25}


def figures(pairs: int = 5) -> list[dict]:
    found = [replay_fidelity()]
    with tempfile.TemporaryDirectory() as scratch:
        for name, model in MODELS.items():
            steps = 8 if "50M" in name else 40
            plain, recorded = [], []
            for _ in range(pairs):
                plain.append(step_s(model, steps, False, Path(scratch)))
                recorded.append(step_s(model, steps, True, Path(scratch)))
            ratio = statistics.median(recorded) / statistics.median(plain)
            found.append({
                "figure": f"record overhead, {name} DDP step (2 gloo ranks)",
                "value": f"{ratio:.3f}x",
                "detail": (f"median step {statistics.median(recorded) * 1e3:.2f} ms recorded vs "
                           f"{statistics.median(plain) * 1e3:.2f} ms plain, {pairs} alternated "
                           f"pairs of {steps} steps"),
                "target": "-", "met": None})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    for figure in figures(args.pairs):
        print(f"{figure['figure']}: {figure['value']} ({figure['detail']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
