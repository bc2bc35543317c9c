"""Flight Recorder dumps (real ones, tests/fixtures/flight-recorder/README.md) read as a trace;
every bad input the issue lists is one line, never a traceback."""

import json
import pickle
import shutil
from pathlib import Path

import pytest

from commbench.importers import flight_recorder
from commbench.importers.common import ImportFormatError
from commbench.stragglers import analyse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flight-recorder"
SLOW = FIXTURES / "ddp-slow-rank2"


def test_a_real_dump_of_the_slowed_job_names_rank_2():
    imported = flight_recorder.read([str(SLOW)])
    trace = imported.trace
    assert sorted(trace.ranks) == [0, 1, 2, 3] and trace.world_size == 4
    assert trace.header["source"] == "flight-recorder" and trace.header["clock"] == "wall"
    # steps found from the job's rhythm: 4 equal buckets per step after set-up
    per_step = [sum(1 for c in trace.calls(0) if c.step == s) for s in (3, 4, 5)]
    assert per_step == [4, 4, 4]
    analysis = analyse(trace)
    assert {r.rank: r.verdict for r in analysis.ranks} == {0: "ok", 1: "ok", 2: "culprit",
                                                           3: "ok"}


def test_json_dumps_read_with_their_groups():
    trace = flight_recorder.read([str(FIXTURES / "json-2rank")]).trace
    ops = [(c.pg, c.op, c.in_numel) for c in trace.calls(1)]
    assert ops[:6] == [("0", "allreduce", 1000)] * 6
    assert ("0", "broadcast", 1000) in ops and ("1", "allreduce", 1000) in ops
    assert trace.groups["1"].ranks == (0, 1)  # gloo's pg_config is empty: from the dumps


def test_a_missing_rank_file_is_named_and_the_rest_read(tmp_path):
    for rank in (0, 1, 3):
        shutil.copy(SLOW / f"fr-{rank}", tmp_path / f"fr-{rank}")
    imported = flight_recorder.read([str(tmp_path)])
    assert imported.missing_files == [2]
    assert any("no dump for rank(s) 2" in note for note in imported.notes)
    assert sorted(imported.trace.ranks) == [0, 1, 3]


def test_a_torn_dump_is_left_out_with_a_warning_or_refused_alone(tmp_path):
    for rank in (0, 1, 2, 3):
        shutil.copy(SLOW / f"fr-{rank}", tmp_path / f"fr-{rank}")
    data = (tmp_path / "fr-3").read_bytes()
    (tmp_path / "fr-3").write_bytes(data[: len(data) // 2])
    imported = flight_recorder.read([str(tmp_path)])
    assert sorted(imported.trace.ranks) == [0, 1, 2] and imported.missing_files == [3]
    assert any("fr-3" in note and "left out" in note for note in imported.notes)
    with pytest.raises(ImportFormatError, match="fr-3"):
        flight_recorder.read([str(tmp_path / "fr-3")])
    torn_json = tmp_path / "torn-0.json"
    torn_json.write_text((FIXTURES / "json-2rank" / "json-0.json").read_text()[:500])
    with pytest.raises(ImportFormatError, match="torn or bad JSON"):
        flight_recorder.read([str(torn_json)])


def test_dumps_of_different_jobs_are_refused(tmp_path):
    shutil.copy(FIXTURES / "json-2rank" / "json-0.json", tmp_path / "json-0.json")
    later = json.loads((FIXTURES / "json-2rank" / "json-1.json").read_text())
    for entry in later["entries"]:
        entry["time_created_ns"] += 3600 * 10**9  # an hour later: another job
    (tmp_path / "json-1.json").write_text(json.dumps(later))
    with pytest.raises(ImportFormatError, match="different jobs"):
        flight_recorder.read([str(tmp_path)])
    # the same rank twice is refused too
    shutil.copy(FIXTURES / "json-2rank" / "json-0.json", tmp_path / "again-0.json")
    with pytest.raises(ImportFormatError, match="second dump of rank 0"):
        flight_recorder.read([str(tmp_path / "json-0.json"), str(tmp_path / "again-0.json")])


def test_a_pickle_naming_a_class_is_refused(tmp_path):
    (tmp_path / "evil-0").write_bytes(pickle.dumps({"entries": [Path("/")]}))
    with pytest.raises(ImportFormatError, match="names a class"):
        flight_recorder.read([str(tmp_path / "evil-0")])


def test_a_folder_without_dumps_is_one_line(tmp_path):
    with pytest.raises(ImportFormatError, match="no Flight Recorder dump"):
        flight_recorder.read([str(tmp_path)])
    (tmp_path / "notes-0.txt").write_text("hello")
    with pytest.raises(ImportFormatError, match="not a Flight Recorder dump"):
        flight_recorder.read([str(tmp_path)])


def test_the_set_up_does_not_draw_the_step_cuts():
    """A 4-bucket DDP job's dump as recorded on 2026-12-05 (rank 0's gaps, ms): the set-up's
    own gaps (a 273 ms first rendezvous) once drew the cuts to a 19-call period that hit them,
    and the job read as 2 steps. The set-up is step 0; the steps are the buckets' fours."""
    setup = [("w", "allgather", 1), ("w", "broadcast", 24), ("w", "broadcast", 1050624),
             ("w", "allreduce", 1050624), ("w", "broadcast", 9), ("w", "broadcast", 4)]
    keys = setup + [("w", "allreduce", 262656)] * 52
    gaps = [272.7, 11.8, 25.4, 54.0, 28.5, 10.0]
    for step in range(13):
        gaps += [1.5, 1.4, 0.9, 40.0 + 5 * (step % 4)]  # three buckets, then the forward
    times, now = [0], 0.0
    for gap in gaps[:57]:
        now += gap
        times.append(int(now * 1e6))
    numbers = flight_recorder.rhythm_steps(keys, times)
    assert numbers[:6] == [0] * 6
    assert numbers[6:] == [1 + i // 4 for i in range(52)]
