"""``commbench stragglers`` end to end on synthetic traces and real Flight Recorder dumps, in
a subprocess: the table, --json as the reference states it, the files, the exit codes, and
every bad input as one line (no traceback)."""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.unit.stragglers.synthetic import ddp_job

FR = Path(__file__).resolve().parents[2] / "fixtures" / "flight-recorder"


def run(*args):
    return subprocess.run([sys.executable, "-m", "commbench", "stragglers", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _one_line(done):
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_slowed_job_is_named_with_its_files(tmp_path):
    trace = ddp_job(tmp_path / "trace", slow={2: 0.03})
    done = run(trace, "--out", tmp_path / "out")
    assert done.returncode == 1, done.stderr
    assert "culprit: rank 2:" in done.stdout and "# rule:" in done.stdout
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {"stragglers.csv", "stragglers.json", "run.json", "lateness.png",
                     "summary.md"}
    rows = list(csv.DictReader((tmp_path / "out" / "stragglers.csv").open()))
    assert [(r["rank"], r["verdict"]) for r in rows] == [("0", "ok"), ("1", "ok"),
                                                         ("2", "culprit"), ("3", "ok")]
    again = run(trace, "--out", tmp_path / "out")  # a second run does not overwrite silently
    assert again.returncode == 2 and "--force" in _one_line(again)


def test_json_holds_the_contract(tmp_path):
    done = run(ddp_job(tmp_path, slow={1: 0.03}), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert list(doc)[:6] == ["ranks", "calls", "steps", "clock", "culprits", "missing"]
    assert doc["ranks"] == 4 and doc["steps"] == 12 and doc["clock"] == "shared"
    (culprit,) = doc["culprits"]
    assert set(culprit) == {"rank", "host", "verdict", "last_share", "lateness_p50_s",
                            "caused_s_per_step", "steps", "evidence"}
    assert culprit["rank"] == 1 and culprit["verdict"] == "culprit"


def test_a_clean_job_exits_0_and_a_hang_names_the_missing_rank(tmp_path):
    clean = run(ddp_job(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stdout
    assert "no rank made the others wait beyond the noise" in clean.stdout
    hung = run(ddp_job(tmp_path / "hung", steps=6, hang=(3, 4)), "--json")
    assert hung.returncode == 1
    assert json.loads(hung.stdout)["missing"] == [{"rank": 3, "call": 12, "op": "allreduce",
                                                   "group": "0"}]


def test_transient_steps_and_the_steps_option(tmp_path):
    trace = ddp_job(tmp_path, steps=16, slow={0: 0.03}, slow_steps=(5, 8))
    doc = json.loads(run(trace, "--json").stdout)
    assert [(c["rank"], c["verdict"], c["steps"]) for c in doc["culprits"]] == [
        (0, "transient", [5, 8])]
    assert run(trace, "--steps", "10..16").returncode == 0
    assert "K..M" in _one_line(run(trace, "--steps", "ten"))
    assert "no matched call" in _one_line(run(trace, "--steps", "40..50"))
    assert "--group 7" in _one_line(run(trace, "--group", "7"))


def test_bad_sources_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run(tmp_path / "empty")
    assert done.returncode == 2 and "no rank-<r>.jsonl" in _one_line(done)
    assert run(tmp_path / "nowhere").returncode == 2
    # a torn dump alone: unreadable, 3; beside the others: left out, said, the rest judged
    torn = tmp_path / "dumps"
    shutil.copytree(FR / "ddp-slow-rank2", torn)
    data = (torn / "fr-1").read_bytes()
    (torn / "fr-1").write_bytes(data[:100])
    alone = run(torn / "fr-1")
    assert alone.returncode == 3 and "fr-1" in _one_line(alone)
    rest = run(torn)
    assert rest.returncode == 1 and "Traceback" not in rest.stderr
    assert "left out" in rest.stderr and "no dump for rank(s) 1" in rest.stderr
    # dumps of different jobs
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(FR / "json-2rank" / "json-0.json", mixed / "a-0.json")
    other = json.loads((FR / "json-2rank" / "json-1.json").read_text())
    for entry in other["entries"]:
        entry["time_created_ns"] -= 7200 * 10**9
    (mixed / "b-1.json").write_text(json.dumps(other))
    done = run(mixed)
    assert done.returncode == 2 and "different jobs" in _one_line(done)
    # a trace folder with a rank's file missing: named, the others judged
    trace = ddp_job(tmp_path / "partial", slow={2: 0.03})
    (trace / "rank-3.jsonl").unlink()
    done = run(trace)
    assert done.returncode == 1 and "no trace file for rank(s) 3" in done.stderr
    assert "culprit: rank 2" in done.stdout
