"""Nothing in history needs torch: the store is read on machines that never measure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULES = ("commbench.history", "commbench.history.store", "commbench.history.series",
           "commbench.history.changepoints", "commbench.history.ingest",
           "commbench.history.openmetrics", "commbench.commands.history",
           "commbench.cli.history", "commbench.output.history_html",
           "commbench.output.history_plots")


def test_the_history_modules_load_no_torch():
    probe = ("import sys, importlib\n"
             f"for name in {MODULES!r}: importlib.import_module(name)\n"
             "from commbench.history.ingest import read_run_folder\n"
             "read_run_folder('tests/fixtures/base')\n"  # the collectives' descriptors too
             "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
