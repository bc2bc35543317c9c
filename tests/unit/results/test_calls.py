"""The calls file (results.calls): parquet with pyarrow, jsonl without; one reader for both; a
newer major version refused in one line; --repeat's launches in one file."""

import json

import numpy as np
import pytest

from commbench.core.errors import UsageError
from commbench.results import calls

pytest.importorskip("pandas")


def batch(size=64, launch=0, late=True):
    times = np.array([[10.0, 11.0, 30.0], [12.0, 13.0, 14.0]])  # 2 ranks x 3 calls
    return calls.CallBatch(op="allreduce", pattern="", backend="gloo", dim="", inplace=False,
                           size_bytes=size, rounds=np.array([0, 0, 1]), time_us=times,
                           late_us=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 16.0]]) if late
                           else None, launch=launch)


@pytest.fixture(params=["parquet", "jsonl"])
def kind(request, monkeypatch):
    if request.param == "parquet":
        pytest.importorskip("pyarrow")
    else:  # pyarrow absent: the fallback
        monkeypatch.setattr(calls, "_pyarrow", lambda: None)
    return request.param


def test_one_record_per_call_per_rank_read_back(tmp_path, kind):
    writer = calls.CallsWriter(tmp_path)
    writer.write(batch(64))
    writer.write(batch(128, late=False))
    writer.close()
    assert calls.calls_path(tmp_path).name == f"calls.{kind}"
    frame = calls.read_calls(tmp_path)
    assert list(frame.columns) == list(calls.COLUMNS)
    assert len(frame) == 12 and writer.records == 12
    first = frame[frame.size_bytes == 64]
    assert first["rank"].tolist() == [0, 0, 0, 1, 1, 1]
    assert first["call"].tolist() == [0, 1, 2, 0, 1, 2]
    assert first["round"].tolist() == [0, 0, 1, 0, 0, 1]
    assert first["time_us"].tolist() == [10.0, 11.0, 30.0, 12.0, 13.0, 14.0]
    assert first["late_us"].tolist()[-1] == 16.0
    assert frame[frame.size_bytes == 128]["late_us"].isna().all()  # not measured: empty


def test_launches_of_repeat_add_to_one_file(tmp_path, kind):
    for launch in (0, 1):
        writer = calls.CallsWriter(tmp_path)
        writer.write(batch(launch=launch))
        writer.close()
    frame = calls.read_calls(tmp_path)
    assert sorted(set(frame["launch"])) == [0, 1] and len(frame) == 12


def test_a_newer_major_version_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(calls, "_pyarrow", lambda: None)
    writer = calls.CallsWriter(tmp_path)
    writer.write(batch())
    writer.close()
    path = tmp_path / calls.JSONL
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({"format": "commbench-calls", "version": "2.0"})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError, match="newer than this commbench reads"):
        calls.read_calls(tmp_path)


def test_a_cut_last_line_is_skipped_a_bad_middle_line_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(calls, "_pyarrow", lambda: None)
    writer = calls.CallsWriter(tmp_path)
    writer.write(batch())
    writer.close()
    path = tmp_path / calls.JSONL
    text = path.read_text()
    path.write_text(text + '{"op": "allre')
    assert len(calls.read_calls(tmp_path)) == 6
    lines = text.splitlines()
    lines[2] = "garbage"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError, match=r"calls.jsonl:3 is not JSON"):
        calls.read_calls(tmp_path)


def test_no_calls_file_says_how_to_get_one(tmp_path):
    with pytest.raises(UsageError, match="--per-call"):
        calls.read_calls(tmp_path)


def test_the_parquet_file_carries_its_version(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    writer = calls.CallsWriter(tmp_path)
    writer.write(batch())
    writer.close()
    metadata = pq.read_schema(tmp_path / calls.PARQUET).metadata
    assert metadata[b"commbench_calls_version"] == calls.CALLS_VERSION.encode()
    assert not (tmp_path / (calls.PARQUET + ".tmp")).exists()
