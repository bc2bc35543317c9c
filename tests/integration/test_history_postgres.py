"""The history store on a real PostgreSQL server, started by this test on loopback.

PostgreSQL refuses to run as root, so as root the server is run by the ``postgres`` user
(initdb into a temporary folder it owns); as anyone else, by that user. The test skips, saying
why, only where there is no server to start (no binaries; as root, no runuser or no postgres
user). Where the binaries and the user are there, an initdb or pg_ctl that fails is a failed
test, with their output: a server that stopped starting must not turn the test into a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from commbench.core.errors import UsageError
from commbench.history import add_runs
from commbench.history.series import build_series, changes
from commbench.history.store import Store, StoreUnreachable
from tests.unit.history.cli_helper import run_cli
from tests.unit.history.runs import make_run, night

BINARIES = [Path(p) for p in ("/usr/lib/postgresql/15/bin", *sorted(
    Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)) if Path(p).is_dir()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@pytest.fixture(scope="module")
def postgres_url():
    binaries = next((b for b in BINARIES if (b / "pg_ctl").exists()), None)
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as postgres")
    if os.geteuid() == 0:
        try:
            import pwd

            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the server")
    base = Path(tempfile.mkdtemp(prefix="commbench-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        for path in (base, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    port = _free_port()
    init = subprocess.run(_as_server_user([str(binaries / "initdb"), "-D", str(data), "-U",
                                           "postgres", "--auth=trust", "-E", "UTF8"]),
                          capture_output=True, text=True, timeout=120)
    if init.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"initdb failed (exit {init.returncode}): {init.stderr.strip()[-300:]}")
    start = subprocess.run(_as_server_user([
        str(binaries / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t",
        "60", "start", "-o", f"-k {sockets} -p {port} -h 127.0.0.1 -F"]),
        capture_output=True, text=True, timeout=120)
    if start.returncode != 0:
        log = (base / "server.log").read_text()[-300:] if (base / "server.log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"pg_ctl could not start a server (exit {start.returncode}): "
                    f"{start.stderr.strip()[-200:]} {log}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(binaries / "pg_ctl"), "-D", str(data), "-m",
                                        "immediate", "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.core
def test_the_store_round_trips_on_postgres(postgres_url, tmp_path, capsys):
    rng = np.random.default_rng(1)
    folders = [make_run(tmp_path, f"pg-{n:02d}", night(n),
                        float(np.exp(rng.normal(0, 0.02))) * (1.3 if n >= 11 else 1.0),
                        ops=("allreduce",), sizes=(1 << 20,)) for n in range(14)]
    lines = add_runs(postgres_url, list(reversed(folders)))
    assert sum(line.startswith("added:") for line in lines) == 14
    assert add_runs(postgres_url, [folders[0]])[0].startswith("already stored: pg-00")
    with Store(postgres_url) as store:
        runs = store.runs()
        assert [r.run_id for r in runs] == [f"pg-{n:02d}" for n in range(14)]
        (series,) = build_series(runs, store.points())
    (finding,) = changes(series, 0.05)
    assert (finding.run_id, finding.verdict) == ("pg-11", "regression")
    code, out, err = run_cli(capsys, "history", "check", "--db", postgres_url)
    assert code == 1 and "pg-11" in out, err


@pytest.mark.core
def test_someone_elses_postgres_tables_are_named_not_touched(postgres_url):
    import sqlalchemy as sa

    other = postgres_url.rsplit("/", 1)[0] + "/postgres"
    admin = sa.create_engine(other.replace("postgresql://", "postgresql+psycopg://"),
                             isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text("DROP DATABASE IF EXISTS shop"))
        connection.execute(sa.text("CREATE DATABASE shop"))
    admin.dispose()
    shop_url = postgres_url.rsplit("/", 1)[0] + "/shop"
    shop = sa.create_engine(shop_url.replace("postgresql://", "postgresql+psycopg://"))
    with shop.begin() as connection:
        connection.execute(sa.text("CREATE TABLE commbench_runs (id integer)"))
    shop.dispose()
    with pytest.raises(UsageError, match="not a commbench history store"):
        Store(shop_url, create=True)


@pytest.mark.core
def test_a_stopped_server_is_unreachable_exit_3():
    port = _free_port()
    with pytest.raises(StoreUnreachable):
        Store(f"postgresql://postgres@127.0.0.1:{port}/postgres")
