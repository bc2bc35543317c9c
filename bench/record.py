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


def figures(pairs: int = 5) -> list[dict]:
    found = []
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
