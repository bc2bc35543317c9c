"""The history store: every run's labels and series values in one database, behind SQLAlchemy Core.

One embedded SQLite file by default (no server to run), any SQLAlchemy URL otherwise, e.g.
``postgresql://user@host/db`` for a team's shared store. The tables are prefixed
``commbench_`` so a shared database can hold other things, and ``commbench_info`` carries the
schema version: a store written by a newer commbench is refused, an older one is migrated
forward step by step (``MIGRATIONS``), each step in the transaction that records its version.

Writes are serialised: SQLite takes its write lock when a transaction begins (``BEGIN
IMMEDIATE``, with a 30 s busy wait), so two ``history add`` on one file queue instead of one
failing with "database is locked"; PostgreSQL creates the schema under an advisory lock. The
run id is the primary key: adding a run again is a no-op, whoever wins a race.

Failures map to exit codes once, here: a URL or a store that is wrong (unknown scheme, not a
database, someone else's tables, a newer schema) is a UsageError (2); a server that cannot be
reached, or a lock never granted, is StoreUnreachable (3).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, fields
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import exc

from commbench.core.errors import EXIT_RUN_FAILED, CommbenchError, UsageError
from commbench.history.ingest import EntityRatio, IngestedRun, Point, RunLabels

DEFAULT_URL = "sqlite:///results/history.db"
SCHEMA_VERSION = 2  # 2: the points' split identity (alltoallv routing, split_id)
SQLITE_BUSY_S = 30.0
_PG_LOCK = 0x636F6D6D  # "comm": the advisory lock id of schema creation

metadata = sa.MetaData()
info = sa.Table(
    "commbench_info", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
)
runs = sa.Table(
    "commbench_runs", metadata,
    sa.Column("run_id", sa.String(255), primary_key=True),
    sa.Column("start_time", sa.String(32), nullable=False, index=True),
    sa.Column("added_time", sa.String(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("cluster", sa.Text, nullable=False),
    sa.Column("commit", sa.String(64), nullable=False, default=""),
    sa.Column("torch", sa.String(64), nullable=False, default=""),
    sa.Column("nccl", sa.String(64), nullable=False, default=""),
    sa.Column("commbench", sa.String(64), nullable=False, default=""),
    sa.Column("world_size", sa.Integer, nullable=False, default=0),
    sa.Column("backend", sa.String(64), nullable=False, default=""),
    sa.Column("hosts", sa.Text, nullable=False, default=""),
    sa.Column("path", sa.Text, nullable=False, default=""),
)
points = sa.Table(
    "commbench_points", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(255), sa.ForeignKey("commbench_runs.run_id"), nullable=False,
              index=True),
    sa.Column("op", sa.String(64), nullable=False),
    sa.Column("variant", sa.String(128), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("backend", sa.String(32), nullable=False),
    sa.Column("dtype", sa.String(32), nullable=False),
    sa.Column("world_size", sa.Integer, nullable=False),
    sa.Column("dim", sa.String(32), nullable=False),
    sa.Column("lat_us", sa.Float, nullable=False),
    sa.Column("lat_ci_lo", sa.Float),
    sa.Column("lat_ci_hi", sa.Float),
    sa.Column("busbw_gbps", sa.Float),
    sa.Column("algbw_gbps", sa.Float),
    # An alltoallv point's split identity (ingest.Point): '' for every other op, and in the
    # points of a store migrated from schema 1, which never held alltoallv apart.
    sa.Column("routing", sa.Text, nullable=False, server_default=""),
    sa.Column("split_id", sa.String(64), nullable=False, server_default=""),
)
entities = sa.Table(
    "commbench_entities", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(255), sa.ForeignKey("commbench_runs.run_id"), nullable=False,
              index=True),
    sa.Column("level", sa.String(16), nullable=False),
    sa.Column("entity", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("hosts", sa.Text, nullable=False),
    sa.Column("busbw_ratio", sa.Float),
    sa.Column("lat_ratio", sa.Float),
    sa.Column("verdict", sa.String(32), nullable=False),
)


def _add_columns(table: sa.Table, *names: str) -> Callable[[sa.Connection], None]:
    """A migration step adding ``table``'s columns ``names`` as declared above (type and
    server default compiled for the store's own dialect: SQLite and PostgreSQL alike), so the
    rows already stored take the default."""

    def step(connection: sa.Connection) -> None:
        present = {c["name"] for c in sa.inspect(connection).get_columns(table.name)}
        preparer = connection.dialect.identifier_preparer
        for name in names:
            if name in present:
                continue
            column = table.c[name]
            kind = column.type.compile(dialect=connection.dialect)
            default = column.server_default.arg if column.server_default is not None else None
            clause = (" NOT NULL DEFAULT '" + default.replace("'", "''") + "'"
                      if isinstance(default, str) else "")
            connection.execute(sa.text(
                f"ALTER TABLE {preparer.quote(table.name)} ADD COLUMN "
                f"{preparer.quote(name)} {kind}{clause}"))

    return step


# Schema version N -> N+1, each a function of an open connection inside the transaction that
# then records N+1. Version 1 is the first schema; a change to the tables above adds a step
# here and bumps SCHEMA_VERSION (tests/unit/history/test_store.py runs a step over a real file).
MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {
    # 2: alltoallv points keep their routing and split matrix apart (ingest.Point)
    1: _add_columns(points, "routing", "split_id"),
}


class StoreUnreachable(CommbenchError):
    """The store's server cannot be reached, or its lock was never granted (exit 3)."""

    exit_code = EXIT_RUN_FAILED


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _shown(url: sa.URL) -> str:
    return url.render_as_string(hide_password=True)


def _engine(text: str) -> sa.Engine:
    try:
        url = sa.make_url(text)
    except exc.ArgumentError:
        raise UsageError(f"bad store URL {text!r}: use sqlite:///FILE or "
                         "postgresql://USER@HOST/DB") from None
    if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")  # the driver commbench depends on
    options: dict = {}
    if url.get_backend_name() == "sqlite":
        options["connect_args"] = {"timeout": SQLITE_BUSY_S}
    else:
        options["connect_args"] = {"connect_timeout": 10} if url.get_backend_name() == \
            "postgresql" else {}
    try:
        engine = sa.create_engine(url, **options)
    except exc.NoSuchModuleError:
        raise UsageError(f"unknown store URL scheme {url.drivername!r} in {_shown(url)}: use "
                         "sqlite:///FILE or postgresql://USER@HOST/DB") from None
    except ImportError as error:
        raise UsageError(f"store URL {_shown(url)} needs the Python driver "
                         f"{error.name or error}: pip install it") from None
    if url.get_backend_name() == "sqlite":
        _serialise_sqlite_writes(engine)
    return engine


def _serialise_sqlite_writes(engine: sa.Engine) -> None:
    """Take SQLite's write lock when a transaction begins, not at its first write: a deferred
    transaction that reads and then writes can fail at once with 'database is locked' when
    another writer holds the lock, without waiting out the busy timeout."""

    @sa.event.listens_for(engine, "connect")
    def _manual_transactions(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # the driver leaves BEGIN to us

    @sa.event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class Store:
    """An open history store. ``create``: make the file and the schema when absent (``add``);
    otherwise a store must already exist (``show``, ``check``, ``report``, ``export``)."""

    def __init__(self, url: str = DEFAULT_URL, *, create: bool = False) -> None:
        self.url_text = url
        self.engine = _engine(url)
        self.url = self.engine.url
        self.shown = _shown(sa.make_url(url))  # as the user wrote it, password hidden
        if self.url.get_backend_name() == "sqlite":
            self._check_sqlite_file(create)
        self._guard(self._prepare, create)

    # ---- opening -----------------------------------------------------------------------------

    def _check_sqlite_file(self, create: bool) -> None:
        database = self.url.database
        if not database or database == ":memory:":
            return
        path = Path(database)
        if path.is_dir():
            raise UsageError(f"store {self.shown}: {path} is a folder, not a database file")
        if not path.exists():
            if not create:
                raise UsageError(f"no history store at {path}: add runs first with "
                                 "`commbench history add RUN...`")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise UsageError(f"cannot create {path.parent}: {error.strerror or error}"
                                 ) from None
        elif not os.access(path, os.R_OK):
            raise UsageError(f"cannot read the history store {path}: permission denied")

    def _guard(self, action: Callable, *args):
        """Run ``action`` mapping database errors to one line and an exit code."""
        try:
            return action(*args)
        except CommbenchError:
            raise
        except exc.OperationalError as error:
            raise self._operational(error) from None
        except exc.DatabaseError as error:  # not a database, or not one we understand
            text = _first_line(error)
            if self.url.get_backend_name() == "sqlite" and "not a database" in text:
                raise UsageError(f"{self.url.database} is not a history store (not a SQLite "
                                 "database)") from None
            raise UsageError(f"store {self.shown} cannot be read: {text}") from None
        except exc.SQLAlchemyError as error:
            raise UsageError(f"store {self.shown}: {_first_line(error)}") from None

    def _operational(self, error: exc.OperationalError) -> CommbenchError:
        text = _first_line(error)
        if self.url.get_backend_name() == "sqlite":
            if "locked" in text or "busy" in text:
                return StoreUnreachable(f"store {self.shown} stayed locked by another writer "
                                        f"for {SQLITE_BUSY_S:.0f} s")
            if "not a database" in text or "malformed" in text:
                return UsageError(f"{self.url.database} is not a history store (not a SQLite "
                                  "database)")
            return UsageError(f"cannot open the history store {self.url.database}: {text}")
        return StoreUnreachable(f"cannot reach the history store {self.shown}: {text}")

    def _prepare(self, create: bool) -> None:
        with self.engine.begin() as connection:
            if self.url.get_backend_name() == "postgresql" and create:
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"),
                                   {"id": _PG_LOCK})
            inspector = sa.inspect(connection)
            tables = set(inspector.get_table_names())
            if info.name not in tables:
                ours = sorted(t for t in tables if t.startswith("commbench_"))
                others = sorted(tables - set(ours))
                if ours or (others and self.url.get_backend_name() == "sqlite"):
                    raise UsageError(f"{self.shown} is not a commbench history store (it holds "
                                     f"tables {', '.join((ours + others)[:5])})")
                if not create:
                    raise UsageError(f"{self.shown} holds no commbench history yet: add runs "
                                     "first with `commbench history add RUN...`")
                metadata.create_all(connection)
                connection.execute(info.insert(), [
                    {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                    {"key": "created", "value": _now()}])
                return
            found = self._version(connection)
            if found > SCHEMA_VERSION:
                raise UsageError(f"{self.shown} was written by a newer commbench (history "
                                 f"schema {found}, this one reads {SCHEMA_VERSION}): upgrade "
                                 "commbench")
            for version in range(found, SCHEMA_VERSION):
                MIGRATIONS[version](connection)
                connection.execute(info.update().where(info.c.key == "schema_version")
                                   .values(value=str(version + 1)))

    def _version(self, connection: sa.Connection) -> int:
        value = connection.execute(sa.select(info.c.value).where(
            info.c.key == "schema_version")).scalar()
        try:
            return int(value)
        except (TypeError, ValueError):
            raise UsageError(f"{self.shown}: bad history schema version {value!r}") from None

    def schema_version(self) -> int:
        with self.engine.connect() as connection:
            return self._guard(self._version, connection)

    # ---- writing -----------------------------------------------------------------------------

    def add(self, run: IngestedRun) -> bool:
        """Store a run; False when its run id is already stored (a no-op: the run id is the
        key). A different run under a stored id is refused: history must not mix two runs."""
        return self._guard(self._add, run)

    def _add(self, run: IngestedRun) -> bool:
        labels = run.labels
        try:
            with self.engine.begin() as connection:
                stored = connection.execute(
                    sa.select(runs.c.start_time, runs.c.path).where(
                        runs.c.run_id == labels.run_id)).first()
                if stored is not None:
                    _same_run_or_refuse(labels, stored.start_time, stored.path)
                    return False
                connection.execute(runs.insert().values(**asdict(labels), added_time=_now()))
                if run.points:
                    connection.execute(points.insert(), [
                        {"run_id": labels.run_id, **asdict(p)} for p in run.points])
                if run.entities:
                    connection.execute(entities.insert(), [
                        {"run_id": labels.run_id, **asdict(e)} for e in run.entities])
        except exc.IntegrityError:
            # Another writer stored the same run id between our check and our insert.
            with self.engine.connect() as connection:
                stored = connection.execute(
                    sa.select(runs.c.start_time, runs.c.path).where(
                        runs.c.run_id == labels.run_id)).first()
            if stored is None:
                raise
            _same_run_or_refuse(labels, stored.start_time, stored.path)
            return False
        return True

    # ---- reading -----------------------------------------------------------------------------

    def runs(self) -> list[RunLabels]:
        """Every run, in the order they started (not the order they were added)."""
        return self._guard(self._runs)

    def _runs(self) -> list[RunLabels]:
        names = [f.name for f in fields(RunLabels)]
        query = sa.select(*(runs.c[name] for name in names)).order_by(
            runs.c.start_time, runs.c.run_id)
        with self.engine.connect() as connection:
            return [RunLabels(*row) for row in connection.execute(query)]

    def points(self, run_ids: Iterable[str] | None = None) -> list[tuple[str, Point]]:
        """(run id, point) for every stored point, or those of some runs."""
        return self._guard(self._rows, points, Point, run_ids)

    def entities(self, run_ids: Iterable[str] | None = None) -> list[tuple[str, EntityRatio]]:
        return self._guard(self._rows, entities, EntityRatio, run_ids)

    def _rows(self, table: sa.Table, kind: type, run_ids: Iterable[str] | None) -> list:
        names = [f.name for f in fields(kind)]
        query = sa.select(table.c.run_id, *(table.c[name] for name in names)).order_by(
            table.c.id)
        if run_ids is not None:
            query = query.where(table.c.run_id.in_(list(run_ids)))
        with self.engine.connect() as connection:  # positional: 100k rows load in a second
            return [(row[0], kind(*row[1:])) for row in connection.execute(query)]

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _same_run_or_refuse(labels: RunLabels, start_time: str, path: str) -> None:
    if start_time != labels.start_time:
        raise UsageError(f"a different run named {labels.run_id!r} (started {start_time}, "
                         f"from {path}) is already stored: give every run its own --name, "
                         "e.g. nightly-$(date +%F)")


def _first_line(error: Exception) -> str:
    original = getattr(error, "orig", None) or error
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__
