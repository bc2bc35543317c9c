"""Console output in docs/ and README.md cannot go stale: every annotated block's command is
run (measuring commands at their smallest size, in one process) and must still print the
headings and column names the block shows (scripts/docs_output.py --check). Renaming a
column of the sweep table, or a compare column, fails this test. The blocks that start ranks
many times (locate, ab, three launches or more: ``docs_output.heavy``) are checked by CI's
second job, the rest by ``make test``: every block is checked in CI."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _check(tier: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_output.py"), "--check",
                           "--tier", tier], capture_output=True, text=True, timeout=280,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-6000:]
    assert " 0 stale" in done.stderr
    checked = int(done.stderr.rsplit("docs_output: ", 1)[1].split()[0])
    assert checked >= (20 if tier == "light" else 4), done.stderr[-500:]


@pytest.mark.core
def test_the_light_blocks_still_show_what_their_commands_print():
    _check("light")


@pytest.mark.capability
def test_the_blocks_that_start_ranks_many_times_still_show_what_they_print():
    _check("heavy")
