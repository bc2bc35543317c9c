"""examples/fsdp_mlp.py steps aside (exit 77, "FSDP2 cannot run") for one torch limitation
only: FSDP2 before 2.9 reaching for a CUDA stream on a CPU mesh. Anything else fails the run,
so a recorder that broke FSDP2 cannot read as a skip in the record tests or in make compat."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "fsdp_mlp.py"
FSDP_FILE = f"{os.sep}x{os.sep}torch{os.sep}distributed{os.sep}fsdp{os.sep}_fsdp_param_group.py"


def example():
    spec = importlib.util.spec_from_file_location("fsdp_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raised_in(filename: str, code: str, namespace: dict | None = None) -> BaseException:
    try:
        exec(compile(code, filename, "exec"), namespace or {})
    except Exception as error:
        return error
    raise AssertionError("nothing raised")


@pytest.mark.core
@pytest.mark.parametrize("filename, code, limited", [
    (FSDP_FILE, "raise RuntimeError('FSDP requires CUDA for streams')", True),  # 2.4
    (FSDP_FILE, "raise RuntimeError('Found no NVIDIA driver on your system.')", True),
    (FSDP_FILE, "raise RuntimeError('CUDA error: CUDA driver version is insufficient for CUDA "
                "runtime version')", True),  # 2.4.1's CUDA build on the VM, 2026-12-02
    (FSDP_FILE, "torch.cpu.Stream().no_such_stream_call()", True),  # torch.cpu lacked it
    (FSDP_FILE, "None.size()", False),  # FSDP2 handed something broken
    (FSDP_FILE, "raise RuntimeError('Connection closed by peer')", False),
    ("/x/commbench/record/shim.py", "raise RuntimeError('FSDP requires CUDA for streams')",
     False),  # not raised by FSDP2 itself
], ids=["2.4", "no-driver", "old-driver", "torch.cpu", "broken-input", "gloo", "outside-fsdp"])
def test_only_the_named_limitation_is_a_skip(filename, code, limited):
    error = raised_in(filename, code, {"torch": torch})
    assert (example().cpu_limit(error) is not None) == limited


BREAKING_SITECUSTOMIZE = '''
import torch.distributed as dist


def broken(*args, **kwargs):  # what a recorder that mangled the call would leave behind
    raise AttributeError("'NoneType' object has no attribute 'size'")


for name in ("all_gather_into_tensor", "all_gather_single"):
    if hasattr(dist, name):
        setattr(dist, name, broken)
'''


def test_a_broken_collective_fails_the_example_instead_of_skipping(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BREAKING_SITECUSTOMIZE)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(EXAMPLE),
         "--steps", "1", "--width", "16", "--layers", "1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0
    assert "FSDP2 cannot run" not in done.stdout, done.stdout
    assert "has no attribute 'size'" in done.stderr
