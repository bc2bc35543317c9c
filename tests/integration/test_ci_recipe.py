"""The CI recipe of docs/guides/ci-gate.md, run end to end from the guide's own text: its
install line installs this checkout, its measuring line (budget cut to one size and two
launches, so the test stays short) ends with the pooled table, and its compare line writes
the gated table to the step summary."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
GUIDE = ROOT / "docs" / "guides" / "ci-gate.md"


def recipe_steps() -> list[str]:
    """The ``run:`` steps of the guide's first YAML block, folded lines joined."""
    text = GUIDE.read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    steps, current, indent = [], None, 0
    for line in block.splitlines():
        found = re.match(r"(\s*)- run: ?>?\s*(.*)", line)
        depth = len(line) - len(line.lstrip())
        if found:
            current, indent = ([found.group(2)] if found.group(2) else []), depth
            steps.append(current)
        elif current is not None and line.strip() and depth > indent:
            current.append(line.strip())  # a folded line of the step
        else:
            current = None
    return [" ".join(part for part in step if part) for step in steps]


def cut_budget(line: str) -> str:
    """The measuring step as written, with a test's budget: one size, two launches."""
    line = re.sub(r"--sizes \S+", "--sizes 1M", line)
    line = re.sub(r"--repeat \d+", "--repeat 2", line)
    return re.sub(r"--min-time \S+", "--min-time 0.05", line)


def test_the_recipe_runs_as_written(tmp_path):
    install, measure, compare = recipe_steps()
    # Install: the guide's line, from a checkout of this repository at its path.
    assert install.startswith("pip install ./")
    checkout = tmp_path / install.split("./", 1)[1].split()[0]
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".git", "site", "results", "__pycache__", "*.egg-info", ".pytest_cache"))
    installed = subprocess.run(
        [sys.executable, "-m", *install.split()[:2], "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(tmp_path / "site"), *install.split()[2:]],
        cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert (tmp_path / "site" / "commbench" / "cli" / "__init__.py").exists()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GITHUB_STEP_SUMMARY":
           str(tmp_path / "step-summary.md")}

    def step(line: str, sha: str) -> subprocess.CompletedProcess:
        words = shlex.split(line.replace("${{ github.sha }}", sha).replace(
            '"$GITHUB_STEP_SUMMARY"', env["GITHUB_STEP_SUMMARY"]))
        assert words[0] == "commbench"
        return subprocess.run([sys.executable, "-m", "commbench", *words[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=240, env=env)

    # The baseline the guide says to store, made by the same step on "main".
    base = step(cut_budget(measure), "main")
    assert base.returncode == 0, base.stderr[-2000:]
    (tmp_path / "baselines").mkdir()
    shutil.move(tmp_path / "results" / "pr-main", tmp_path / "baselines" / "main")
    new = step(cut_budget(measure), "abc123")
    assert new.returncode == 0, new.stderr[-2000:]
    tail = new.stdout[new.stdout.index("# pooled over 2 launches"):]
    assert "# Out of bounds values : 0 OK" in tail and "note" in tail  # named columns
    gate = step(compare, "abc123")
    assert gate.returncode in (0, 1), gate.stderr[-2000:]  # the verdict is the machine's
    summary = (tmp_path / "step-summary.md").read_text()
    assert "## commbench compare" in summary and "gate: Holm over 1 row(s)" in summary
