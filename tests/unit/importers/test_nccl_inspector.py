"""NCCL Inspector logs (fixtures written from the documented v4.0 format:
tests/fixtures/nccl-inspector/make.py) read as a trace whose exec times feed the clock-free
rule; the import commands write trace folders that stragglers reads alike."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.importers import nccl_inspector
from commbench.importers.common import ImportFormatError
from commbench.stragglers import analyse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SLOW = FIXTURES / "nccl-inspector" / "slow-rank3"


def test_the_exec_times_name_the_late_rank_clock_free():
    trace, notes = nccl_inspector.read([str(SLOW)])
    assert sorted(trace.ranks) == [0, 1, 2, 3] and trace.world_size == 4
    assert trace.calls(3)[0].dur_ns is not None and trace.calls(3)[0].t_issue_ns is None
    analysis = analyse(trace)
    assert analysis.clock == "clock-free"
    assert {r.rank: r.verdict for r in analysis.ranks} == {0: "ok", 1: "ok", 2: "ok",
                                                           3: "culprit"}


def test_bad_logs_are_one_line(tmp_path):
    shutil.copytree(SLOW, tmp_path / "logs")
    log = next((tmp_path / "logs").iterdir())
    text = log.read_text()
    log.write_text(text[: len(text) - 40])  # a torn last line: left out, said
    _, notes = nccl_inspector.read([str(tmp_path / "logs")])
    assert any("cut short" in note for note in notes)
    log.write_text("{not json\n" + text)
    with pytest.raises(ImportFormatError, match=":1: not a JSON line"):
        nccl_inspector.read([str(tmp_path / "logs")])
    (tmp_path / "other.log").write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(ImportFormatError, match="without header"):
        nccl_inspector.read([str(tmp_path / "other.log")])


@pytest.mark.parametrize(("kind", "source", "culprit"), [
    ("flight-recorder", FIXTURES / "flight-recorder" / "ddp-slow-rank2", 2),
    ("nccl-inspector", SLOW, 3)])
def test_import_writes_a_trace_stragglers_reads(tmp_path, kind, source, culprit):
    out = tmp_path / "trace"
    done = subprocess.run([sys.executable, "-m", "commbench", "import", kind, str(source),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.glob("rank-*.jsonl")) == [f"rank-{r}.jsonl"
                                                                for r in range(4)]
    again = subprocess.run([sys.executable, "-m", "commbench", "import", kind, str(source),
                            "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "--force" in again.stderr
    judged = subprocess.run([sys.executable, "-m", "commbench", "stragglers", str(out),
                             "--json"], capture_output=True, text=True, timeout=120)
    assert judged.returncode == 1, judged.stderr
    assert [c["rank"] for c in json.loads(judged.stdout)["culprits"]] == [culprit]
