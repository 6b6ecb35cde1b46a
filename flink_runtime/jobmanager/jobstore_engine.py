"""Connecting the job store to its database: one SQLAlchemy engine per backend.

SQLite gets WAL, a busy timeout and BEGIN IMMEDIATE for writes (so concurrent writers
queue instead of failing on a lock upgrade); an in-memory SQLite database is one shared
connection the caller must serialize. PostgreSQL gets a connect timeout and, for standby
JobManagers, `idle_in_transaction_session_timeout`: the server ends the session of a
JobManager frozen inside a transaction, releasing the locks a takeover waits for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

_SQLITE_BUSY_TIMEOUT_S = 30.0

#: Execution options of a write transaction (SQLite: BEGIN IMMEDIATE).
WRITE_OPTIONS: dict[str, Any] = {"jobstore_write": True}


def create_store_engine(url: str, idle_transaction_timeout: float | None = None) -> tuple[Engine, bool]:
    """The engine for `url`, and whether it is an in-memory SQLite database (one shared
    connection: the caller serializes its use)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # A database that does not answer must not hold a renewal past its deadline for long.
        connect_args: dict[str, Any] = {}
        if parsed.get_backend_name() == "postgresql":
            connect_args["connect_timeout"] = 10
            if idle_transaction_timeout:
                milliseconds = max(int(idle_transaction_timeout * 1000), 1)
                connect_args["options"] = f"-c idle_in_transaction_session_timeout={milliseconds}"
        return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args), False
    database_file = sqlite_file(url)
    in_memory = database_file is None
    if database_file is None:
        engine = create_engine(parsed, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        if not (parsed.database or "").startswith("file:"):  # a URI names a folder that exists
            database_file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})
    if parsed.get_driver_name() == "pysqlite":
        _configure_pysqlite(engine, wal=not in_memory)
    return engine, in_memory


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL (a path or a `file:` URI); None for an in-memory
    database or another backend."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:") or "mode=memory" in database:
        return None
    return Path(database.removeprefix("file:").split("?", 1)[0]).expanduser()


def _configure_pysqlite(engine: Engine, wal: bool) -> None:
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for write transactions.

    pysqlite's own transaction handling is switched off (isolation_level=None) so that
    SQLAlchemy's begin() emits the BEGIN: a deferred BEGIN for reads, and BEGIN IMMEDIATE
    for writes, which waits (busy timeout) for the write lock up front instead of failing
    when a read transaction has to upgrade to a write one.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(_SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if wal:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")  # durable across process crashes in WAL mode
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("jobstore_write") else "BEGIN")
