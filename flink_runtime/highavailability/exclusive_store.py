"""One JobManager per job store without standbys (high-availability.type: NONE).

Without high availability nothing elects a leader, so a second JobManager started on the
same job store would recover the same jobs and run them beside the first, each writing
its own status over the other's (a FINISHED overwritten by RUNNING). Flink's NONE mode
trusts the operator to start one JobManager; here the JobManager holds an exclusive lock
on its store for as long as it runs, and a second one refuses to start, naming the
first. The lock must vanish with its holder, kill -9 included, or a restarted
JobManager could not start until someone cleaned up:

- SQLite file: `flock` on `<database>.jobmanager.lock` beside it. The kernel releases it
  when the holder's process ends, however it ends. The file names the holder (pid, host,
  start time) for the error of the next one.
- PostgreSQL: a session-level advisory lock on a connection of its own. The server
  releases it when that session ends: when the holder's process dies its socket closes.
  A session lost while the JobManager lives (a database restart, a network cut) loses
  the lock: `check()` notices, takes it again, and raises if another JobManager has it.
- In-memory SQLite is private to its process, and other databases have no such lock:
  nothing to hold (logged once for the latter).

With standby JobManagers (high-availability.type: database) the leader lease and its
fencing token decide who runs the jobs (leader_election.py, jobmanager/jobstore.py);
each of them holds the same lock SHARED, so the two kinds never mix on one store: a
JobManager without standbys cannot start beside an HA cluster, nor one of an HA
cluster beside a JobManager without standbys.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import socket
import time
import zlib
from pathlib import Path
from typing import IO, Any, Protocol

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

# The advisory lock's key. Advisory locks are per database and a job store is a whole
# database, so one constant serves (every JobManager version computes the same one).
# Below 2**31, so pg_locks shows it as classid 0, objid key.
_ADVISORY_LOCK_KEY = zlib.crc32(b"flink-runtime jobmanager") & 0x7FFFFFFF

_WHAT_TO_DO = (
    "two JobManagers on one job store would both run its jobs. Stop the other one first, give this one a "
    "jobstore.url of its own, or run standby JobManagers with high-availability.type: database"
)
_JOIN_THE_CLUSTER = (
    "the JobManagers of a high-availability cluster use it. Start this one with high-availability.type: "
    "database (and the same high-availability.cluster-id) to join them as a standby, or give it a jobstore.url "
    "of its own"
)
_NOT_HA_HOLDER = (
    "which runs without standbys (high-availability.type: NONE). Stop it first, or start every JobManager of "
    "this store with high-availability.type: database"
)
# What a JobManager of an HA cluster writes into the SQLite lock file it holds shared.
_HA_HOLDER = {"high-availability": True}


class JobStoreInUse(Exception):
    """Another JobManager holds the job store in a way this one cannot share."""


def _refusal(display_url: str, holder: str, shared: bool, holder_is_ha: bool) -> JobStoreInUse:
    if shared:  # this one is of an HA cluster; the holder runs alone
        return JobStoreInUse(f"job store {display_url} is in use by {holder}, {_NOT_HA_HOLDER}")
    if holder_is_ha:
        return JobStoreInUse(f"job store {display_url} is in use: {_JOIN_THE_CLUSTER}")
    return JobStoreInUse(f"job store {display_url} is in use by {holder}: {_WHAT_TO_DO}")


class StoreLock(Protocol):
    #: Whether the lock can be lost while held (a database session can end), so the
    #: JobManager must check() it now and then.
    can_be_lost: bool

    def check(self) -> None:
        """Raise JobStoreInUse if the lock was lost to another JobManager."""

    def release(self) -> None: ...


class LockableStore(Protocol):
    """The job store as this module sees it (jobmanager/jobstore.py)."""

    @property
    def engine(self) -> Engine: ...
    @property
    def url(self) -> str:
        """With its password masked."""
        ...

    @property
    def sqlite_file(self) -> Path | None: ...


def acquire(store: LockableStore, shared: bool = False) -> StoreLock:
    """Hold the store's database exclusively for this JobManager (`shared`: together with
    the other JobManagers of an HA cluster), or raise JobStoreInUse."""
    backend = store.engine.url.get_backend_name()
    if backend == "sqlite":
        if store.sqlite_file is None:
            return _NoLock()
        return _FileLock.acquire(store.sqlite_file, store.url, shared)
    if backend == "postgresql":
        return _AdvisoryLock.acquire(store.engine, store.url, shared)
    log.warning(
        "Job store %s (%s): no exclusive lock for this database; make sure no other JobManager uses it.",
        store.url,
        backend,
    )
    return _NoLock()


def _holder() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time()}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another JobManager"
    since = datetime.datetime.fromtimestamp(float(holder.get("started_at", 0)), datetime.UTC)
    return f"the JobManager with pid {holder.get('pid')} on {holder.get('host')} (since {since:%Y-%m-%d %H:%M:%S} UTC)"


class _NoLock:
    can_be_lost = False

    def check(self) -> None:
        pass

    def release(self) -> None:
        pass


class _FileLock:
    """flock on a file beside the SQLite database."""

    can_be_lost = False  # a held flock goes only with its holder

    def __init__(self, file: IO[str]) -> None:
        self._file: IO[str] | None = file

    @classmethod
    def acquire(cls, database: Path, display_url: str, shared: bool) -> _FileLock:
        path = database.with_name(database.name + ".jobmanager.lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        file = open(path, "a+")  # noqa: SIM115 - held open for the JobManager's life
        try:
            fcntl.flock(file, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            try:
                holder = json.loads(file.read() or "{}")
            except ValueError:  # being written just now
                holder = {}
            file.close()
            raise _refusal(display_url, _describe(holder), shared, holder == _HA_HOLDER) from None
        # Who holds it, for the error of the next one; the JobManagers of an HA cluster all
        # write the same words.
        file.seek(0)
        file.truncate()
        file.write(json.dumps(_HA_HOLDER if shared else _holder()))
        file.flush()
        return cls(file)

    def check(self) -> None:
        pass

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the only descriptor releases the flock
            self._file = None


class _AdvisoryLock:
    """A PostgreSQL session-level advisory lock on a connection of its own."""

    can_be_lost = True

    def __init__(self, engine: Engine, connection: Connection, display_url: str, shared: bool) -> None:
        self._engine = engine
        self._connection: Connection | None = connection
        self._display_url = display_url
        self._shared = shared

    @classmethod
    def acquire(cls, store_engine: Engine, display_url: str, shared: bool) -> _AdvisoryLock:
        # Not from the store's pool: a pooled connection outlives close(), and its session
        # would keep the lock after release().
        engine = create_engine(store_engine.url, poolclass=NullPool, connect_args={"connect_timeout": 10})
        connection = cls._take(engine, display_url, shared)
        return cls(engine, connection, display_url, shared)

    @staticmethod
    def _take(engine: Engine, display_url: str, shared: bool) -> Connection:
        # AUTOCOMMIT: the lock belongs to the session, and no transaction stays open on it
        # (the store's idle-in-transaction timeout would end the session and the lock with it).
        connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
            taken = connection.execute(text(f"SELECT {function}(:key)"), {"key": _ADVISORY_LOCK_KEY}).scalar()
            if taken:
                kind = " of an HA cluster" if shared else ""
                application = f"flink-runtime jobmanager{kind} pid {os.getpid()} on {socket.gethostname()}"
                connection.execute(text("SELECT set_config('application_name', :name, false)"), {"name": application})
                return connection
            holder = connection.execute(
                text(
                    "SELECT a.application_name, a.client_addr, a.backend_start, l.mode FROM pg_locks l "
                    "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.classid::bigint = 0 AND l.objid::bigint = :key AND l.objsubid = 1 "
                    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                ),
                {"key": _ADVISORY_LOCK_KEY},
            ).first()
        except BaseException:
            connection.close()
            raise
        connection.close()
        who = "another JobManager"
        if holder is not None and holder.application_name:  # visible to the same role (or pg_read_all_stats)
            where = holder.client_addr or "a local socket"
            since = f"{holder.backend_start:%Y-%m-%d %H:%M:%S %Z}"
            who = f"{holder.application_name} (connected from {where} since {since})"
        holder_is_ha = holder is not None and holder.mode == "ShareLock"
        raise _refusal(display_url, who, shared, holder_is_ha)

    def check(self) -> None:
        """Still holding the lock? A lost session is replaced and the lock taken again."""
        if self._connection is None:
            return
        try:
            self._connection.execute(text("SELECT 1"))
            return
        except SQLAlchemyError as exc:
            log.warning("Job store %s: the session holding the JobManager's lock ended (%s).", self._display_url, exc)
            with contextlib.suppress(SQLAlchemyError):
                self._connection.close()
            self._connection = None
        try:
            self._connection = self._take(self._engine, self._display_url, self._shared)
            log.info("Job store %s: the JobManager's lock is held again.", self._display_url)
        except SQLAlchemyError as exc:  # the database is still away: try again at the next check
            log.warning("Job store %s: cannot take the JobManager's lock again yet: %s", self._display_url, exc)

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._connection.close()  # ends the session, and the lock with it
            self._connection = None
        self._engine.dispose()
