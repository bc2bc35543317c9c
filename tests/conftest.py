"""Shared helpers: run the real CLI in a subprocess and read a run folder back."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def commbench(args, tmp_path, *, timeout=120, env=None, check_rc=None):
    """Run ``python -m commbench ARGS --out TMP``; returns (completed process, run folder)."""
    out = Path(tmp_path) / "results"
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        full_env.pop(name, None)
    command = [sys.executable, "-m", "commbench", *args, "--out", str(out)]
    # One launch per call: a launch that stalls is a failed test. The launcher's watchdog
    # ends a start that stalls (launch/local.py, START_GRACE_S) naming the rank and its stack.
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=full_env)
    if check_rc is not None:
        assert done.returncode == check_rc, done.stderr[-3000:]
    runs = sorted(out.iterdir()) if out.exists() else []
    return done, (runs[-1] if runs else None)


def read_rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "results.jsonl").read_text().splitlines()]


def read_meta(run_dir):
    return json.loads((Path(run_dir) / "run.json").read_text())


@pytest.fixture
def run_cli(tmp_path):
    def run(*args, **kw):
        return commbench(list(args), tmp_path, **kw)

    return run
