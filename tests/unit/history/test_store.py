"""The store on a real SQLite file: idempotent adds, time order, bad stores, migrations and two
writers at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from commbench.core.errors import EXIT_RUN_FAILED, EXIT_USAGE, UsageError
from commbench.history import add_runs, store
from commbench.history.store import Store, StoreUnreachable
from tests.unit.history.runs import make_run, night, sqlite_url

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def url(tmp_path) -> str:
    return sqlite_url(tmp_path / "results" / "history.db")


def test_adding_a_run_twice_stores_it_once(tmp_path, url):
    folder = make_run(tmp_path, "n1", night(1))
    lines = add_runs(url, [folder, folder])
    assert lines[0].startswith("added: n1") and lines[1].startswith("already stored: n1")
    with Store(url) as opened:
        assert [r.run_id for r in opened.runs()] == ["n1"]
        assert len(opened.points()) == 8


def test_runs_are_ordered_by_their_start_not_by_when_they_were_added(tmp_path, url):
    for number in (3, 1, 2):
        add_runs(url, [make_run(tmp_path, f"n{number}", night(number))])
    with Store(url) as opened:
        assert [r.run_id for r in opened.runs()] == ["n1", "n2", "n3"]


def test_a_different_run_under_a_stored_name_is_refused(tmp_path, url):
    add_runs(url, [make_run(tmp_path / "a", "nightly", night(1))])
    with pytest.raises(UsageError, match="a different run named 'nightly'"):
        add_runs(url, [make_run(tmp_path / "b", "nightly", night(2))])


def test_a_bad_folder_among_many_adds_nothing(tmp_path, url):
    (tmp_path / "plots").mkdir()
    with pytest.raises(UsageError, match="not a run folder"):
        add_runs(url, [make_run(tmp_path, "n1", night(1)), tmp_path / "plots"])
    assert not Path(url.removeprefix("sqlite:///")).exists()


def test_reading_needs_an_existing_store(tmp_path):
    with pytest.raises(UsageError, match="no history store at") as error:
        Store(sqlite_url(tmp_path / "missing.db"))
    assert error.value.exit_code == EXIT_USAGE
    assert not (tmp_path / "missing.db").exists()


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    junk = tmp_path / "history.db"
    junk.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(UsageError, match="not a history store"):
        Store(sqlite_url(junk))


def test_someone_elses_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(UsageError, match="not a commbench history store .*users"):
        Store(sqlite_url(path), create=True)
    with sqlite3.connect(path) as connection:
        tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master")]
    assert tables == ["users"]


@pytest.mark.parametrize("bad", ["mongodb://localhost/x", "nosuch:///x.db", "not a url"])
def test_an_unknown_url_scheme_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="store URL"):
        Store(bad)


def test_an_unreachable_server_is_exit_3():
    with pytest.raises(StoreUnreachable, match="cannot reach the history store") as error:
        Store("postgresql://nobody@127.0.0.1:1/history")
    assert error.value.exit_code == EXIT_RUN_FAILED
    assert "\n" not in str(error.value)


def test_a_store_from_a_newer_commbench_is_refused(tmp_path, url):
    add_runs(url, [make_run(tmp_path, "n1", night(1))])
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(store.info.update().values(value="99").where(
            store.info.c.key == "schema_version"))
    engine.dispose()
    with pytest.raises(UsageError, match="newer commbench .*schema 99"):
        Store(url)


def test_an_older_store_is_migrated_forward_and_keeps_its_runs(tmp_path, url, monkeypatch):
    add_runs(url, [make_run(tmp_path, "n1", night(1))])

    def add_note_column(connection: sa.Connection) -> None:
        connection.execute(sa.text("ALTER TABLE commbench_runs ADD COLUMN note TEXT"))

    current = store.SCHEMA_VERSION
    monkeypatch.setattr(store, "SCHEMA_VERSION", current + 1)
    monkeypatch.setattr(store, "MIGRATIONS", {**store.MIGRATIONS, current: add_note_column})
    with Store(url) as opened:
        assert opened.schema_version() == current + 1
        assert [r.run_id for r in opened.runs()] == ["n1"]
        columns = {c["name"] for c in sa.inspect(opened.engine).get_columns("commbench_runs")}
    assert "note" in columns
    monkeypatch.undo()  # this commbench again: the store is now newer than it
    with pytest.raises(UsageError, match="newer commbench"):
        Store(url)


WRITER = """
import os, sys, time
from commbench.history import add_runs
url, go, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
for folder in folders:  # one transaction per run: the two writers interleave
    add_runs(url, [folder])
"""


def test_two_adds_at_once_on_one_file_lose_nothing(tmp_path, url):
    folders = [make_run(tmp_path, f"n{i:02d}", night(i)) for i in range(16)]
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(go),
                                 *map(str, folders[half::2])], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for half in (0, 1)]
    for writer in writers:  # both imported and waiting: then both start at once
        assert writer.stdout.readline().strip() == "ready"
    go.touch()
    errors = [writer.communicate(timeout=120)[1] for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], errors
    with Store(url) as opened:
        assert [r.run_id for r in opened.runs()] == [f"n{i:02d}" for i in range(16)]
        assert len(opened.points()) == 16 * 8


def test_the_partial_flag_survives_the_round_trip(tmp_path, url):
    add_runs(url, [make_run(tmp_path, "cut", night(1), status="partial")])
    with Store(url) as opened:
        (run,) = opened.runs()
    assert run.status == "partial" and not run.usable


def test_a_history_url_is_checked_before_a_run_without_touching_anything(tmp_path):
    from commbench.history import check_store_url

    check_store_url(sqlite_url(tmp_path / "later.db"))
    assert not (tmp_path / "later.db").exists()
    with pytest.raises(UsageError, match="unknown store URL scheme"):
        check_store_url("nosuch:///x.db")
