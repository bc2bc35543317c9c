"""Console output in docs/ and README.md cannot go stale: every annotated block's command is
run (measuring commands at their smallest size, in one process) and must still print the
headings and column names the block shows (scripts/docs_output.py --check). Renaming a
column of the sweep table, or a compare column, fails this test."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.core
def test_every_console_block_in_the_docs_still_shows_what_its_command_prints():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_output.py"), "--check"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-6000:]
    assert " 0 stale" in done.stderr
