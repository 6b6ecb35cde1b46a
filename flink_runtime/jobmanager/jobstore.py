"""The job store: what a JobManager must remember across its own restarts.

Submitted jobs (with their job graph), their status, the JobManager's recoverable view
of a running job ("progress": completed splits, partition locations, ...), completed
checkpoints and savepoints, and the records of finished jobs (job_snapshots.py) live in a
relational database reached through SQLAlchemy. SQLite is the default
(``jobstore.url``, by default ``sqlite:///<tempdir>/flink-runtime/jobstore.db``); any
SQLAlchemy URL (``postgresql+psycopg://user:pw@host/db``, ...) works if its driver is
installed.

With standby JobManagers (high-availability.type: database) the store is fenced: a
JobManager writes through `fenced(cluster_id, token)`, and every write transaction first
reads the leader lease row (highavailability/lease_store.py) with a share lock and
refuses the write (FencingTokenMismatch) unless the row still carries that token. The
lock makes a standby's takeover wait for the write in flight, so a deposed leader can
never write RUNNING over its successor's FINISHED. A leader frozen inside such a
transaction (SIGSTOP, a long pause) would hold the lock for ever, so on PostgreSQL the
store's sessions carry `idle_in_transaction_session_timeout` (`idle_transaction_timeout`,
the renew deadline): the server ends a frozen session and its transaction with it.

Every method is one short transaction, and the store is safe to call from several
threads (the JobManager calls it through ``asyncio.to_thread``): connections come from
SQLAlchemy's pool, one per call. SQLite runs in WAL mode with a busy timeout, and write
transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue instead of
failing on a lock upgrade.

JSON columns (job graph, progress, checkpoint metadata, archived job records) are stored
as TEXT so every database can hold them; note that JSON turns tuples into lists and
non-string dict keys into strings.
"""

from __future__ import annotations

import copy
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    and_,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, SQLAlchemyError

from flink_runtime.configuration import JobStoreOptions
from flink_runtime.highavailability.lease_store import LeaseNotHeld, check_fencing
from flink_runtime.jobmanager.jobstore_engine import WRITE_OPTIONS, create_store_engine, sqlite_file
from flink_runtime.jobmanager.jobstore_schema import (
    SCHEMA_VERSION,
    TERMINAL_STATUSES,
    CheckpointRecord,
    JobRecord,
    checkpoint_id_counters_table,
    checkpoint_record,
    checkpoints_table,
    dumps,
    dumps_fast,
    job_record,
    jobs_table,
    loads,
    recovery_attempts_table,
    savepoint_requests_table,
    schema_metadata,
    schema_version_table,
)
from flink_runtime.security import mask_url_password

if TYPE_CHECKING:
    from flink_runtime.configuration import Configuration

__all__ = [
    "SCHEMA_VERSION",
    "TERMINAL_STATUSES",
    "CheckpointRecord",
    "DuplicateJob",
    "FencingTokenMismatch",
    "JobRecord",
    "JobStore",
    "JobStoreError",
    "UnknownJob",
    "default_url",
]


class JobStoreError(Exception):
    """The job store cannot be opened or a call to it failed; the message names the URL."""


class DuplicateJob(JobStoreError):
    """add_job() for a job id the store already holds."""


class UnknownJob(JobStoreError):
    """A call about a job id the store does not hold."""


class FencingTokenMismatch(JobStoreError):
    """A write by a JobManager that is not (or no longer) the leader: refused, not made."""


def default_url() -> str:
    return f"sqlite:///{Path(tempfile.gettempdir()) / 'flink-runtime' / 'jobstore.db'}"


# -- the store -----------------------------------------------------------------------------


class JobStore:
    """Jobs, checkpoints and finished jobs' results in a SQLAlchemy database."""

    def __init__(self, url: str, *, idle_transaction_timeout: float | None = None) -> None:
        """idle_transaction_timeout: seconds after which PostgreSQL ends a session that sits
        idle inside a transaction (a frozen JobManager's), releasing its locks."""
        self._url = url
        self._display_url = mask_url_password(url)
        self._password = self._url_password(url)
        self._closed = False
        # Only an in-memory SQLite database (one shared connection) needs serializing here.
        self._lock: threading.Lock | None = None
        # (cluster id, fencing token) every write is checked against; token None: no write at all.
        self._fencing: tuple[str, int | None] | None = None
        try:
            self._engine, in_memory = create_store_engine(url, idle_transaction_timeout)
            if in_memory:
                self._lock = threading.Lock()
        except (ArgumentError, NoSuchModuleError, ImportError, ValueError, OSError) as exc:
            raise self._error(exc) from exc
        try:
            self._create_schema()
        except BaseException:
            self._engine.dispose()
            raise

    @classmethod
    def from_config(cls, config: Configuration) -> JobStore:
        return cls(config.get(JobStoreOptions.URL) or default_url())

    def fenced(self, cluster_id: str, token: int | None) -> JobStore:
        """A view of this store (same engine) whose writes are refused unless the leader
        lease of `cluster_id` carries `token`; token None refuses every write (a standby)."""
        view = copy.copy(self)
        view._fencing = (cluster_id, token)
        return view

    @property
    def engine(self) -> Engine:
        """For the leader lease (highavailability/), which lives in the same database."""
        return self._engine

    #: Execution options of a write transaction (SQLite: BEGIN IMMEDIATE).
    WRITE_OPTIONS: dict[str, Any] = WRITE_OPTIONS

    @property
    def sqlite_file(self) -> Path | None:
        """The database's file when it is SQLite on disk (its lock file lies beside it)."""
        return sqlite_file(self._url)

    @property
    def url(self) -> str:
        """The URL with its password masked (for logs)."""
        return self._display_url

    def __repr__(self) -> str:
        return f"JobStore({self._display_url!r})"

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._engine.dispose()

    # -- jobs ------------------------------------------------------------------------------

    def add_job(self, job_id: str, name: str, job_graph_json: bytes | str, submitted_at: float) -> None:
        if isinstance(job_graph_json, bytes | bytearray | memoryview):
            job_graph_json = bytes(job_graph_json).decode("utf-8")
        try:
            with self._transaction(write=True) as conn:
                conn.execute(
                    insert(jobs_table).values(
                        job_id=job_id,
                        name=name,
                        job_graph_json=job_graph_json,
                        status="INITIALIZING",
                        submitted_at=submitted_at,
                        updated_at=submitted_at,
                    )
                )
        except IntegrityError as exc:
            raise DuplicateJob(f"job {job_id} is already in the job store {self._display_url}") from exc

    def update_status(self, job_id: str, status: str, timestamp: float) -> None:
        status = str(status)  # accepts a JobStatus (StrEnum)
        ended_at = timestamp if status in TERMINAL_STATUSES else None
        self._update_job(job_id, status=status, updated_at=timestamp, ended_at=ended_at)

    def save_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        self._update_job(job_id, progress_json=dumps(progress))

    def archive(self, job_id: str, details: Any, exceptions: Any) -> None:
        """details, exceptions: JSON documents, as dicts or msgspec Structs (job_snapshots.py)."""
        # msgspec's encoder, not json.dumps: an archive holds every subtask's attempts (10,000
        # subtasks: ~100 ms of json.dumps, holding the GIL in the store's thread while the
        # JobManager's loop waits for it; ~10x less so). Same JSON values read back: these
        # documents are records of strings, ints and finite floats (json.dumps would write a
        # non-finite float as NaN, msgspec as null; an archive has none).
        self._update_job(job_id, details_json=dumps_fast(details), exceptions_json=dumps_fast(exceptions))

    def job(self, job_id: str) -> JobRecord | None:
        with self._transaction() as conn:
            row = conn.execute(select(jobs_table).where(jobs_table.c.job_id == job_id)).one_or_none()
            if row is None:
                return None
            return job_record(row, self._latest_checkpoints(conn, [job_id]).get(job_id))

    def recoverable_jobs(self) -> list[JobRecord]:
        """Jobs not globally terminal (SUSPENDED included), oldest submission first."""
        query = (
            select(jobs_table).where(jobs_table.c.status.not_in(TERMINAL_STATUSES)).order_by(jobs_table.c.submitted_at)
        )
        with self._transaction() as conn:
            rows = conn.execute(query).all()
            latest = self._latest_checkpoints(conn, [row.job_id for row in rows])
        return [job_record(row, latest.get(row.job_id)) for row in rows]

    def archived_jobs(self, limit: int = 1000) -> list[JobRecord]:
        """Globally terminal jobs, most recently ended first."""
        query = (
            select(jobs_table)
            .where(jobs_table.c.status.in_(TERMINAL_STATUSES))
            .order_by(jobs_table.c.ended_at.desc(), jobs_table.c.submitted_at.desc())
            .limit(limit)
        )
        with self._transaction() as conn:
            rows = conn.execute(query).all()
            latest = self._latest_checkpoints(conn, [row.job_id for row in rows])
        return [job_record(row, latest.get(row.job_id)) for row in rows]

    def prune(self, max_capacity: int, finished_before: float) -> int:
        """Deletes the globally terminal jobs beyond the `max_capacity` most recently ended
        ones, and those that ended before the time (jobstore.max-capacity and
        .expiration-time), with their checkpoint rows; returns how many."""
        newest_first = jobs_table.c.ended_at.desc(), jobs_table.c.submitted_at.desc()
        terminal = jobs_table.c.status.in_(TERMINAL_STATUSES)
        with self._transaction(write=True) as conn:
            beyond = conn.execute(
                select(jobs_table.c.job_id).where(terminal).order_by(*newest_first).offset(max_capacity)
            )
            old = conn.execute(select(jobs_table.c.job_id).where(terminal, jobs_table.c.ended_at < finished_before))
            job_ids = sorted(set(beyond.scalars()) | set(old.scalars()))
            if job_ids:
                conn.execute(delete(savepoint_requests_table).where(savepoint_requests_table.c.job_id.in_(job_ids)))
                conn.execute(delete(recovery_attempts_table).where(recovery_attempts_table.c.job_id.in_(job_ids)))
                conn.execute(
                    delete(checkpoint_id_counters_table).where(checkpoint_id_counters_table.c.job_id.in_(job_ids))
                )
                conn.execute(delete(checkpoints_table).where(checkpoints_table.c.job_id.in_(job_ids)))
                conn.execute(delete(jobs_table).where(jobs_table.c.job_id.in_(job_ids)))
        return len(job_ids)

    # -- recovery attempts -------------------------------------------------------------------

    def begin_recovery(self, job_id: str) -> int:
        """Count one more recovery of the job (committed before it starts); returns the count."""
        key = recovery_attempts_table.c.job_id == job_id
        with self._transaction(write=True) as conn:
            attempts = conn.execute(select(recovery_attempts_table.c.attempts).where(key)).scalar_one_or_none()
            if attempts is None:
                conn.execute(insert(recovery_attempts_table).values(job_id=job_id, attempts=1))
                return 1
            conn.execute(update(recovery_attempts_table).where(key).values(attempts=attempts + 1))
            return attempts + 1

    def end_recovery(self, job_id: str) -> None:
        """The recovered job reached RUNNING (or ended): its count starts again."""
        with self._transaction(write=True) as conn:
            conn.execute(delete(recovery_attempts_table).where(recovery_attempts_table.c.job_id == job_id))

    # -- checkpoint ids --------------------------------------------------------------------

    def reserve_checkpoint_ids(self, job_id: str, at_least: int, count: int) -> int:
        """Reserve `count` checkpoint ids of the job: from `at_least`, or from the first id no
        earlier reservation holds if that is higher; returns the first (Flink's
        CheckpointIDCounter, in blocks: committed before any of them is triggered)."""
        key = checkpoint_id_counters_table.c.job_id == job_id
        try:
            with self._transaction(write=True) as conn:
                stored = conn.execute(select(checkpoint_id_counters_table.c.next_id).where(key)).scalar_one_or_none()
                first = max(at_least, int(stored) if stored is not None else 1)
                if stored is None:
                    conn.execute(insert(checkpoint_id_counters_table).values(job_id=job_id, next_id=first + count))
                else:
                    conn.execute(update(checkpoint_id_counters_table).where(key).values(next_id=first + count))
                return first
        except IntegrityError as exc:
            raise UnknownJob(f"job {job_id} is not in the job store {self._display_url}") from exc

    # -- savepoint requests ----------------------------------------------------------------

    def put_savepoint_request(self, job_id: str, request_id: str, status: dict[str, Any]) -> None:
        """Record a savepoint/stop request's status (REST's `{status: {id}, operation}`)."""
        key = (savepoint_requests_table.c.job_id == job_id, savepoint_requests_table.c.request_id == request_id)
        with self._transaction(write=True) as conn:
            updated = conn.execute(update(savepoint_requests_table).where(*key).values(status_json=dumps(status)))
            if updated.rowcount == 0:
                conn.execute(
                    insert(savepoint_requests_table).values(
                        job_id=job_id, request_id=request_id, status_json=dumps(status)
                    )
                )

    def savepoint_requests(self, job_id: str) -> dict[str, dict[str, Any]]:
        query = select(savepoint_requests_table).where(savepoint_requests_table.c.job_id == job_id)
        with self._transaction() as conn:
            return {row.request_id: loads(row.status_json) for row in conn.execute(query)}

    # -- checkpoints -----------------------------------------------------------------------

    def add_checkpoint(
        self,
        job_id: str,
        checkpoint_id: int,
        location: str,
        is_savepoint: bool,
        completed_at: float,
        size_bytes: int,
        metadata: dict[str, Any] | None = None,
        subsumed: list[str] | None = None,
    ) -> None:
        """Record a completed checkpoint and, in the same transaction, forget the ones it
        subsumes (by location; savepoints are never forgotten).

        The caller deletes the subsumed folders only after this returns: a crash in
        between leaves a folder nobody refers to, never a row pointing at nothing."""
        try:
            with self._transaction(write=True) as conn:
                if conn.execute(select(jobs_table.c.job_id).where(jobs_table.c.job_id == job_id)).first() is None:
                    raise UnknownJob(f"job {job_id} is not in the job store {self._display_url}")
                conn.execute(
                    insert(checkpoints_table).values(
                        job_id=job_id,
                        checkpoint_id=checkpoint_id,
                        location=location,
                        is_savepoint=is_savepoint,
                        completed_at=completed_at,
                        size_bytes=size_bytes,
                        metadata_json=None if metadata is None else dumps(metadata),
                    )
                )
                if subsumed:
                    conn.execute(
                        delete(checkpoints_table).where(
                            checkpoints_table.c.job_id == job_id,
                            checkpoints_table.c.is_savepoint.is_(False),
                            checkpoints_table.c.location.in_(subsumed),
                        )
                    )
        except IntegrityError as exc:
            raise JobStoreError(
                f"checkpoint {checkpoint_id} of job {job_id} is already in the job store {self._display_url}"
            ) from exc

    def latest_checkpoint(self, job_id: str) -> CheckpointRecord | None:
        """The checkpoint or savepoint with the highest id."""
        with self._transaction() as conn:
            return self._latest_checkpoints(conn, [job_id]).get(job_id)

    def checkpoints(self, job_id: str) -> list[CheckpointRecord]:
        """All checkpoints and savepoints of the job, by ascending id."""
        query = (
            select(checkpoints_table)
            .where(checkpoints_table.c.job_id == job_id)
            .order_by(checkpoints_table.c.checkpoint_id)
        )
        with self._transaction() as conn:
            return [checkpoint_record(row) for row in conn.execute(query)]

    def remove_checkpoints(self, job_id: str, keep_latest: int) -> list[CheckpointRecord]:
        """Forgets all but the `keep_latest` newest checkpoints; savepoints are never removed.

        Returns the removed records, oldest first: the caller deletes their directories.
        """
        if keep_latest < 0:
            raise ValueError(f"keep_latest must be >= 0, not {keep_latest}")
        query = (
            select(checkpoints_table)
            .where(checkpoints_table.c.job_id == job_id, checkpoints_table.c.is_savepoint.is_(False))
            .order_by(checkpoints_table.c.checkpoint_id.desc())
            .offset(keep_latest)
        )
        with self._transaction(write=True) as conn:
            removed = [checkpoint_record(row) for row in conn.execute(query)]
            if removed:
                ids = [record.checkpoint_id for record in removed]
                conn.execute(
                    delete(checkpoints_table).where(
                        checkpoints_table.c.job_id == job_id, checkpoints_table.c.checkpoint_id.in_(ids)
                    )
                )
        removed.reverse()
        return removed

    # -- internals -------------------------------------------------------------------------

    def _update_job(self, job_id: str, **values: Any) -> None:
        with self._transaction(write=True) as conn:
            result = conn.execute(update(jobs_table).where(jobs_table.c.job_id == job_id).values(**values))
            if result.rowcount == 0:
                raise UnknownJob(f"job {job_id} is not in the job store {self._display_url}")

    @staticmethod
    def _latest_checkpoints(conn: Connection, job_ids: list[str]) -> dict[str, CheckpointRecord]:
        if not job_ids:
            return {}
        newest = (
            select(checkpoints_table.c.job_id, func.max(checkpoints_table.c.checkpoint_id).label("checkpoint_id"))
            .where(checkpoints_table.c.job_id.in_(job_ids))
            .group_by(checkpoints_table.c.job_id)
            .subquery()
        )
        query = select(checkpoints_table).join(
            newest,
            and_(
                checkpoints_table.c.job_id == newest.c.job_id,
                checkpoints_table.c.checkpoint_id == newest.c.checkpoint_id,
            ),
        )
        return {row.job_id: checkpoint_record(row) for row in conn.execute(query)}

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[Connection]:
        """One short transaction; database errors become JobStoreError (IntegrityError passes through)."""
        if self._closed:
            raise JobStoreError(f"the job store {self._display_url} is closed")
        lock = self._lock
        if lock is not None:
            lock.acquire()
        try:
            with self._engine.connect() as conn:
                if write:
                    conn.execution_options(jobstore_write=True)
                with conn.begin():
                    try:
                        if write and self._fencing:
                            check_fencing(conn, *self._fencing)
                    except LeaseNotHeld as refused:
                        raise FencingTokenMismatch(f"job store {self._display_url}: write refused: {refused}") from None
                    yield conn
        except IntegrityError:
            raise
        except SQLAlchemyError as exc:
            raise self._error(exc) from exc
        finally:
            if lock is not None:
                lock.release()

    def _create_schema(self) -> None:
        with self._transaction(write=True) as conn:
            schema_metadata.create_all(conn)
            version = conn.execute(select(func.max(schema_version_table.c.version))).scalar()
            if version is None:
                conn.execute(insert(schema_version_table).values(version=SCHEMA_VERSION))
            elif version < SCHEMA_VERSION:  # create_all() added the newer tables
                conn.execute(update(schema_version_table).values(version=SCHEMA_VERSION))
            elif version > SCHEMA_VERSION:
                raise JobStoreError(
                    f"the job store {self._display_url} has schema version {version}, newer than this "
                    f"flink-runtime understands ({SCHEMA_VERSION})"
                )

    @staticmethod
    def _url_password(url: str) -> str | None:
        try:
            password = make_url(url).password
        except Exception:
            return None
        return str(password) if password else None

    def _error(self, exc: BaseException) -> JobStoreError:
        reason = str(exc.orig) if isinstance(exc, DBAPIError) and exc.orig is not None else str(exc)
        reason = reason.strip() or type(exc).__name__
        if self._password:
            reason = reason.replace(self._password, "***")
        return JobStoreError(f"job store {self._display_url}: {reason}")
