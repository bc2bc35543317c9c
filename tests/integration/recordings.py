"""Real jobs recorded once per test session (`commbench record`), shared by the record tests
(which read the traces) and the replay tests (which run them again): DDP through torchrun,
FSDP2 on a 2x2 CPU mesh, a script that spawns its own three ranks."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node"]
DDP_ARGS = ["--steps", "4", "--width", "256", "--layers", "3", "--bucket-mb", "0.3"]

SPAWNING = """
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
import commbench.record

def rank_main(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=3)
    pair = dist.new_group([1, 2])
    data = torch.ones(1000)
    for step in range(3):
        dist.all_reduce(data)
        if rank in (1, 2):
            dist.broadcast(data, src=2, group=pair)
        if rank == 0:
            dist.send(data[:10], dst=2)
        elif rank == 2:
            dist.recv(data[:10], src=0)
        commbench.record.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(rank_main, args=(port,), nprocs=3)
"""


@dataclass
class Recording:
    done: subprocess.CompletedProcess
    folder: Path
    facts: Path  # the example's own account of what it did (JSON; FSDP: one file per rank)


def record(tmp_path, command, *, env=None, timeout=180, name="trace", options=()):
    """``commbench record --out TMP/NAME [OPTIONS] -- COMMAND``; returns (completed process,
    folder)."""
    folder = Path(tmp_path) / name
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    for variable in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        full_env.pop(variable, None)
    done = subprocess.run([sys.executable, "-m", "commbench", "record", "--out", str(folder),
                           *options, "--", *command], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=tmp_path)
    return done, folder


def record_ddp(tmp_path, env=None, name="trace") -> Recording:
    facts = Path(tmp_path) / f"{name}-facts.json"
    done, folder = record(tmp_path, [*TORCHRUN, "2", str(EXAMPLES / "ddp_mlp.py"), *DDP_ARGS,
                                     "--facts", str(facts)], env=env, name=name)
    return Recording(done, folder, facts)


def record_fsdp(tmp_path) -> Recording:
    facts = Path(tmp_path) / "fsdp-facts"
    done, folder = record(tmp_path, [*TORCHRUN, "4", str(EXAMPLES / "fsdp_mlp.py"), "--steps",
                                     "3", "--replicas", "2", "--facts", str(facts)])
    return Recording(done, folder, facts)


def record_trainer(tmp_path, steps: int = 3) -> Recording:
    """A Hugging Face Trainer job (examples/hf_trainer_gpt2.py: a tiny GPT-2 from a config,
    DDP on gloo, gradient accumulation 2), ``steps`` optimizer steps."""
    facts = Path(tmp_path) / "trainer-facts.json"
    done, folder = record(tmp_path, [*TORCHRUN, "2", str(EXAMPLES / "hf_trainer_gpt2.py"),
                                     "--steps", str(steps), "--out", str(tmp_path / "hf-out"),
                                     "--facts", str(facts)], name="trainer", timeout=300)
    return Recording(done, folder, facts)


def record_spawning(tmp_path) -> Recording:
    script = Path(tmp_path) / "spawning.py"
    script.write_text(SPAWNING)
    done, folder = record(tmp_path, [sys.executable, str(script)])
    return Recording(done, folder, Path(tmp_path) / "none")


def fsdp_limit(recording: Recording) -> str | None:
    """examples/fsdp_mlp.py's word that this torch's FSDP2 cannot train on CPU (2.4-2.6)."""
    if recording.done.returncode == 0:
        return None
    limit = [line for line in recording.done.stdout.splitlines() if "FSDP2 cannot run" in line]
    return limit[0][:200] if limit else None


def facts(path: Path) -> dict:
    return json.loads(Path(path).read_text())
