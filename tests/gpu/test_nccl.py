"""GPU path: NCCL and gloo-on-CUDA for real. Skipped with a reason where CUDA is absent.

Run on a GPU machine with scripts/gpu-check.sh (or `pytest -m gpu tests/gpu`).
"""

import json

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import read_meta, read_rows  # noqa: E402

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
# Each run here may take its subprocess timeout (300 s): pytest's own (180 s in pyproject)
# must not end it first; a test with two runs carries twice that.
RUN_S = 300
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(GPUS == 0, reason="needs a CUDA device (none visible)"),
    pytest.mark.timeout(RUN_S),
]


def test_nccl_one_rank_every_op_checked(run_cli):
    done, run_dir = run_cli(
        "run", "--ops", "allreduce,allgather,broadcast,reduce-scatter,alltoall,reduce,gather,"
        "scatter,barrier", "--backend", "nccl", "--nproc", "1", "--sizes", "8,64K,16M",
        "--iters", "20", timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(run_dir)
    assert len(rows) == 8 * 3 + 1
    assert all(r["wrong"] == 0 and r["device"] == "cuda" and r["backend"] == "nccl" for r in rows)
    meta = read_meta(run_dir)
    assert meta["versions"]["nccl"] and meta["ranks"][0]["gpu"]
    assert meta["ranks"][0]["gpu_memory_gib"] > 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int8"])
def test_nccl_dtypes_are_exact(run_cli, dtype):
    done, run_dir = run_cli("allreduce", "--backend", "nccl", "--nproc", "1", "--dtype", dtype,
                            "--op", "max", "--sizes", "1K,1M", "--iters", "10", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["wrong"] for r in read_rows(run_dir)] == [0, 0]


@pytest.mark.timeout(2 * RUN_S)
def test_gloo_with_cuda_tensors_on_two_ranks(run_cli):
    done, run_dir = run_cli("run", "--ops", "allreduce,broadcast", "--backend", "gloo",
                            "--device", "cuda", "--nproc", "2", "--sizes", "8,1M",
                            "--iters", "10", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(run_dir)
    assert len(rows) == 4 and all(r["wrong"] == 0 and r["device"] == "cuda" for r in rows)
    assert {r["validation"] for r in rows} == {"full"}
    done, run_dir = run_cli("allreduce", "--backend", "gloo", "--device", "cuda", "--nproc",
                            "2", "--sizes", "1M", "--iters", "5", "--op", "max", "--name",
                            "shifted", timeout=300, env={"COMMBENCH_FAULT": "shift"})
    assert done.returncode == 1 and read_rows(run_dir)[0]["wrong"] > 0


@pytest.mark.timeout(2 * RUN_S)
def test_cuda_graph_mode_validates_the_replay(run_cli):
    done, run_dir = run_cli("allgather", "--backend", "nccl", "--nproc", "1", "--cuda-graph",
                            "--sizes", "8,1M,64M", "--iters", "40", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(run_dir)
    assert [r["wrong"] for r in rows] == [0, 0, 0]
    assert {r["timer"] for r in rows} == {"cuda-graph"}
    # A graph that replays nothing leaves the zeroed output: caught.
    done, run_dir = run_cli("allgather", "--backend", "nccl", "--nproc", "1", "--cuda-graph",
                            "--sizes", "1M", "--iters", "10", "--name", "empty", timeout=300,
                            env={"COMMBENCH_FAULT": "noop"})
    assert done.returncode == 1 and read_rows(run_dir)[0]["wrong"] > 0


@pytest.mark.timeout(2 * RUN_S)
def test_cuda_events_agree_with_the_host_clock_at_64m(run_cli):
    """allgather out of place copies its input on one rank: real data moves (an in-place
    allreduce over one rank may move nothing)."""

    def median(*extra):
        done, run_dir = run_cli("allgather", "--backend", "nccl", "--nproc", "1", "--sizes",
                                "64M", "--min-time", "1", "--no-check", *extra, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return read_rows(run_dir)[0]["lat_us_p50"]

    events, host = median(), median("--host-timer")
    assert abs(events - host) / host < 0.05, (events, host)


def test_sizes_beyond_free_memory_are_skipped_not_fatal(run_cli):
    free = torch.cuda.mem_get_info()[0]
    too_big = f"{int(free * 0.7) >> 30}G"  # two buffers of this cannot fit
    done, run_dir = run_cli("alltoall", "--backend", "nccl", "--nproc", "1", "--sizes",
                            f"1M,{too_big}", "--iters", "5", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "do not fit in GPU memory" in done.stderr
    assert [r["size_bytes"] for r in read_rows(run_dir)] == [1 << 20]


@pytest.mark.skipif(GPUS < 2, reason="needs 2 or more GPUs for NCCL across ranks")
def test_nccl_multi_rank(run_cli):
    done, run_dir = run_cli("run", "--ops", "allreduce,allgather,alltoall,p2p", "--pattern",
                            "all", "--backend", "nccl", "--nproc", str(min(GPUS, 4)),
                            "--sizes", "8,1M,64M", "--iters", "20", "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows and all(r["wrong"] == 0 for r in rows)


def test_doctor_tries_nccl():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "commbench", "doctor", "--nproc", "1",
                           "--backend", "nccl"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "nccl first allreduce us" in done.stdout


# ---- issue 22: the NCCL-path defects, where a device can show them ------------------------------


def test_a_gpu_is_known_by_its_uuid_or_full_pci_address():
    """Two ranks share a GPU only when these are equal (never the bus number alone)."""
    import re

    from commbench.engine import facts

    torch.cuda.set_device(0)
    found = facts.host_facts(0, ["cuda"])
    assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}", found["pci_bus_id"] or ""), found
    if hasattr(torch.cuda.get_device_properties(0), "uuid"):
        assert found["gpu_uuid"], found


def test_doctor_with_nccl_runs_one_rank_per_gpu_by_default():
    """Without --nproc: a 1-GPU host was refused for 2 ranks."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "commbench", "doctor", "--backend", "nccl",
                           "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["world_size"] == GPUS


@pytest.mark.skipif(GPUS < 3, reason="needs 3 or more GPUs: a rank idles beside a p2p pair")
def test_p2p_windows_with_an_idle_rank_do_not_hang(run_cli):
    """A group's first NCCL call must be one all its ranks make (torch's batch_isend_irecv
    rule): rank 2 idles beside the pair (0, 1)."""
    done, run_dir = run_cli("p2p", "--pattern", "unidir,bidir", "--backend", "nccl", "--nproc",
                            "3", "--sizes", "8,1M", "--iters", "10", "--timeout", "60",
                            timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["wrong"] for r in read_rows(run_dir)] == [0, 0, 0, 0]


@pytest.mark.skipif(GPUS < 3, reason="needs 3 or more GPUs: 1/n inexact (n no power of two)")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_nccl_float_averages_are_exact_at_three_ranks(run_cli, dtype):
    """ncclAvg premultiplies by 1/3 rounded in the dtype: what the check expects."""
    done, run_dir = run_cli("run", "--ops", "allreduce,reduce-scatter,reduce", "--op", "avg",
                            "--dtype", dtype, "--backend", "nccl", "--nproc", "3", "--sizes",
                            "8,1M", "--iters", "10", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_rows(run_dir)
    assert rows and all(r["wrong"] == 0 and r["validation"] == "full" for r in rows)


@pytest.mark.skipif(GPUS < 2, reason="needs 2 or more GPUs for an NCCL hang between ranks")
def test_an_nccl_hang_under_torchrun_fails_the_run_and_finishes_its_folder(tmp_path):
    """Rank 1 sleeps in its allreduce past --timeout: rank 0 waits on its GPU until NCCL's
    watchdog fires. It must fail through its own path (the communicator aborted, not the
    process) and leave a finished run.json, not one that says 'running'."""
    import os
    import subprocess
    import sys

    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK")}
    env["COMMBENCH_FAULT"] = "delay=40:1:allreduce"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           "2", "-m", "commbench", "allreduce", "--backend", "nccl", "--sizes",
                           "1M", "--iters", "5", "--timeout", "10", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode != 0
    runs = sorted(out.iterdir())
    assert runs, done.stderr[-3000:]
    meta = read_meta(runs[-1])
    assert meta["status"] in ("partial", "failed"), meta["status"]
    assert "timeout" in (meta["error"] or ""), meta["error"]
