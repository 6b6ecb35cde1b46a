"""One JobManager per job store without standbys (highavailability/exclusive_store.py), on
SQLite and a real PostgreSQL: a second holder is refused with the first one named, the
lock goes with its holder (release, or kill -9 of its process), and a PostgreSQL session
ended under a live holder is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from flink_runtime.highavailability import exclusive_store
from flink_runtime.highavailability.exclusive_store import JobStoreInUse
from flink_runtime.jobmanager.jobstore import JobStore
from tests.helpers.waiting import eventually


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobstore.db'}"
    else:
        url = request.getfixturevalue("postgres").new_database("exclusive")
    with JobStore(url) as job_store:
        yield job_store


def test_a_second_holder_is_refused_and_told_who_holds_it(store: JobStore) -> None:
    first = exclusive_store.acquire(store)
    try:
        with pytest.raises(JobStoreInUse) as refused:
            exclusive_store.acquire(store)
        message = str(refused.value)
        assert store.url in message
        assert f"pid {os.getpid()}" in message, message  # the holder, named
        assert "high-availability.type: database" in message  # and what to do instead
    finally:
        first.release()
    exclusive_store.acquire(store).release()  # released: free again


def test_the_lock_goes_with_a_killed_holder(store: JobStore, tmp_path: Path) -> None:
    """kill -9 leaves no lock behind: a restarted JobManager starts at once."""
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import pathlib, time
                from flink_runtime.highavailability import exclusive_store
                from flink_runtime.jobmanager.jobstore import JobStore
                store = JobStore({str(store.engine.url.render_as_string(hide_password=False))!r})
                lock = exclusive_store.acquire(store)  # held while referenced
                pathlib.Path({str(ready)!r}).touch()
                time.sleep(600)
            """),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        eventually(ready.exists, timeout=60, what="the holder process taking the lock")
        with pytest.raises(JobStoreInUse, match=f"pid {holder.pid}|another JobManager|flink-runtime jobmanager"):
            exclusive_store.acquire(store)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # PostgreSQL notices the closed socket of a dead client at once; allow it a moment.
    taken: list[exclusive_store.StoreLock] = []
    eventually(lambda: _try_acquire(store, taken), timeout=10, what="the killed holder's lock to go")
    taken[0].release()


def _try_acquire(store: JobStore, taken: list[exclusive_store.StoreLock]) -> bool:
    try:
        taken.append(exclusive_store.acquire(store))
    except JobStoreInUse:
        return False
    return True


def test_in_memory_sqlite_needs_no_lock() -> None:
    with JobStore("sqlite://") as store:
        exclusive_store.acquire(store)
        exclusive_store.acquire(store)  # private to this process: nothing to guard


def test_a_postgresql_session_ended_under_the_holder_is_taken_again(postgres) -> None:
    with JobStore(postgres.new_database("exclusive")) as store:
        lock = exclusive_store.acquire(store)
        admin = create_engine(postgres.url(store.engine.url.database), isolation_level="AUTOCOMMIT")
        try:
            terminate = text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE 'flink-runtime jobmanager%' AND datname = current_database()"
            )
            with admin.connect() as connection:
                assert connection.execute(terminate).scalar() is True  # the holder's session is gone
            lock.check()  # notices, and takes the lock again
            with pytest.raises(JobStoreInUse):
                exclusive_store.acquire(store)

            # Ended again, and another JobManager takes the store before the holder checks:
            with admin.connect() as connection:
                connection.execute(terminate)
            other = exclusive_store.acquire(store)
            try:
                with pytest.raises(JobStoreInUse):
                    lock.check()
            finally:
                other.release()
        finally:
            lock.release()
            admin.dispose()


def test_the_jobmanagers_of_an_ha_cluster_share_the_store_but_never_with_one_alone(store: JobStore) -> None:
    """high-availability.type: database holds the lock shared: standbys of one cluster start
    side by side; a JobManager without standbys starts beside none of them, nor they beside it."""
    leader = exclusive_store.acquire(store, shared=True)
    standby = exclusive_store.acquire(store, shared=True)
    try:
        with pytest.raises(JobStoreInUse) as alone:
            exclusive_store.acquire(store)
        assert "the JobManagers of a high-availability cluster use it" in str(alone.value)
        assert "high-availability.type: database" in str(alone.value)
    finally:
        leader.release()
        standby.release()

    single = exclusive_store.acquire(store)
    try:
        with pytest.raises(JobStoreInUse) as joining:
            exclusive_store.acquire(store, shared=True)
        message = str(joining.value)
        assert f"pid {os.getpid()}" in message and "runs without standbys" in message, message
    finally:
        single.release()
