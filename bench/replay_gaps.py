"""A replay with `--gaps recorded` held against its recording: the replayed step's wall (first
issue to last completion, each call first waiting for the compute time recorded before it)
over the in-situ step span (the same, as the recording saw it), on two real jobs of 2 gloo
ranks: examples/ddp_mlp.py (DDP, 4 buckets) and examples/hf_trainer_gpt2.py (a Hugging Face
Trainer: tiny GPT-2 from a config, gradient accumulation 2; skipped without transformers).
Without the gaps a replay is the communication alone, back to back: it reads less than the
span, and that figure is shown beside for contrast.

The same trace replayed with `--gaps compute` (the recorded gaps spent multiplying matrices,
issue 43.4): how much closer contention with compute brings the replay to in situ, stated as
both ratios side by side.

Both sides are means over the trace's steps (results.trace.step_split: not step 0's set-up,
not the tail after the last step end). Target 0.95-1.05x.

    python bench/replay_gaps.py [--steps 12]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
JOBS = {
    "DDP MLP (examples/ddp_mlp.py)": ["examples/ddp_mlp.py", "--width", "512", "--layers", "4",
                                      "--bucket-mb", "1"],
    "HF Trainer GPT-2 (examples/hf_trainer_gpt2.py)": ["examples/hf_trainer_gpt2.py"],
}
TARGET = (0.95, 1.05)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR"}


def replayed(trace: Path, scratch: Path, name: str, gaps: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "commbench", "replay", str(trace), "--gaps",
                           gaps, "--out", str(scratch), "--name", name, "--json"],
                          check=True, capture_output=True, text=True, env=ENV)
    return json.loads(done.stdout.strip().splitlines()[-1])


def job_figures(label: str, job: list[str], steps: int, scratch: Path) -> dict:
    trace = scratch / "trace"
    script, *options = job
    subprocess.run([sys.executable, "-m", "commbench", "record", "--force", "--out", str(trace),
                    "--", *TORCHRUN, str(ROOT / script), "--steps", str(steps), *options],
                   check=True, capture_output=True, env=ENV, cwd=scratch)
    with_gaps = replayed(trace, scratch, "gaps", "recorded")
    with_compute = replayed(trace, scratch, "compute", "compute")
    back_to_back = replayed(trace, scratch, "none", "none")
    span = with_gaps["per_step"]["in_situ_span_s"]
    wall = with_gaps["per_step"]["replayed_wall_s"]
    busy = with_compute["per_step"]["replayed_wall_s"]
    bare = back_to_back["per_step"]["replayed_wall_s"]
    ratio = wall / span
    closer = abs(1 - wall / span) - abs(1 - busy / span)
    return {"figure": f"replay --gaps recorded / in situ, step wall, {label} (2 gloo ranks)",
            "value": f"{ratio:.3f}x",
            "detail": (f"replayed step wall {wall * 1e3:.2f} ms with the recorded gaps vs "
                       f"in-situ span {span * 1e3:.2f} ms, {with_gaps['steps']} replayed steps "
                       f"of {steps - 1}; --gaps compute {busy * 1e3:.2f} ms ({busy / span:.3f}x"
                       f", {100 * closer:+.1f} points closer to 1 than sleeping); without gaps "
                       f"{bare * 1e3:.2f} ms ({bare / span:.3f}x); not replayed: "
                       f"{with_gaps['left_out'] or '-'}"),
            "target": f"{TARGET[0]}-{TARGET[1]}x", "met": TARGET[0] <= ratio <= TARGET[1],
            "compute_ratio": round(busy / span, 4)}


def figures(steps: int = 12) -> list[dict]:
    found = []
    for label, job in JOBS.items():
        if "hf_trainer" in job[0] and not all(importlib.util.find_spec(name) for name in
                                              ("transformers", "accelerate")):
            found.append({"figure": f"replay --gaps recorded / in situ, step wall, {label}",
                          "value": "-", "detail": "skipped: transformers and accelerate are "
                          "not installed", "target": "-", "met": None})
            continue
        with tempfile.TemporaryDirectory() as scratch:
            found.append(job_figures(label, job, steps, Path(scratch)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps per job")
    args = parser.parse_args()
    for figure in figures(args.steps):
        print(f"{figure['figure']}: {figure['value']} ({figure['detail']}; target "
              f"{figure['target']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
