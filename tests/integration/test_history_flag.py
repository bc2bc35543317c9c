"""``--history URL`` on a measuring command: a real 2-rank run ends, and the store holds it
(rows as series, the run's status), read back through ``history show --json``; a bad URL is
refused before any rank starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import commbench, read_meta


@pytest.mark.core
def test_a_measuring_run_adds_itself_to_the_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    done, run = commbench(["allreduce", "--sizes", "1K,64K", "--iters", "4", "--nproc", "2",
                           "--quiet", "--name", "nightly-1", "--history", url], tmp_path,
                          check_rc=0)
    assert "nightly-1" in done.stdout + done.stderr
    shown = subprocess.run([sys.executable, "-m", "commbench", "history", "show", "--db", url,
                            "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    shown = json.loads(shown.stdout)
    # the run, with the status its run.json ended on: a complete sweep of 2 ranks
    assert [(r["run"], r["status"], r["kind"], r["world_size"]) for r in shown["runs"]] == [
        ("nightly-1", "complete", "sweep", 2)], shown["runs"]
    assert read_meta(run)["status"] == "complete"
    series = _series(shown)
    assert {s.get("size_bytes") for s in series} >= {1024, 65536}
    for one in series:  # every series holds the run once, complete, with a value
        assert [(p["run"], p["status"]) for p in one["points"]] == [("nightly-1", "complete")]
        assert one["points"][0]["value"] > 0, one

def test_a_bad_history_url_is_refused_before_the_run(tmp_path):
    done, run = commbench(["allreduce", "--sizes", "1K", "--iters", "2", "--nproc", "2",
                           "--history", "nosuchscheme://x"], tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "starting" not in done.stdout + done.stderr  # no rank was started
    assert run is None  # no run folder either


def _series(document) -> list[dict]:
    if isinstance(document, dict):
        found = document.get("series")
        if isinstance(found, list):
            return found
        return [v for value in document.values() for v in _series(value)]
    if isinstance(document, list):
        return [item for item in document if isinstance(item, dict)]
    return []
