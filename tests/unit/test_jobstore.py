"""The job store keeps jobs, checkpoints and finished jobs' results across JobManager restarts."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobmanager.jobstore import (
    CheckpointRecord,
    DuplicateJob,
    JobRecord,
    JobStore,
    JobStoreError,
    UnknownJob,
    default_url,
)

GRAPH = json.dumps({"job_id": "j1", "vertices": [{"id": "v1", "parallelism": 2}]})


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'nested' / 'dir' / 'jobstore.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """Every store test runs on SQLite (the default) and on a real PostgreSQL server, through
    the same SQLAlchemy code; tests of SQLite's own file handling use sqlite_url."""
    if request.param == "sqlite":
        return sqlite_url
    return request.getfixturevalue("postgres").new_database("jobstore")


@pytest.fixture
def store(db_url: str) -> Iterator[JobStore]:
    with JobStore(db_url) as job_store:
        yield job_store


def test_creates_parent_dir_tables_and_schema_version(tmp_path: Path, sqlite_url: str) -> None:
    JobStore(sqlite_url).close()
    db_url = sqlite_url
    path = tmp_path / "nested" / "dir" / "jobstore.db"
    assert path.exists()
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {
            "jobs",
            "checkpoints",
            "savepoint_requests",
            "recovery_attempts",
            "checkpoint_id_counters",
            "schema_version",
        } <= tables
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(4,)]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Reopening does not add a second version row.
    JobStore(db_url).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(4,)]


def test_a_version_1_store_gains_the_newer_tables(tmp_path: Path, sqlite_url: str) -> None:
    db_url = sqlite_url
    store = JobStore(db_url)
    store.add_job("j1", "kept", "{}", 1.0)
    store.close()
    with sqlite3.connect(tmp_path / "nested" / "dir" / "jobstore.db") as conn:
        conn.execute("DROP TABLE savepoint_requests")
        conn.execute("DROP TABLE recovery_attempts")
        conn.execute("DROP TABLE checkpoint_id_counters")
        conn.execute("UPDATE schema_version SET version = 1")
    with JobStore(db_url) as upgraded:
        upgraded.put_savepoint_request("j1", "r1", {"status": {"id": "IN_PROGRESS"}})
        upgraded.put_savepoint_request("j1", "r1", {"status": {"id": "COMPLETED"}, "operation": {"location": "/sp"}})
        assert upgraded.savepoint_requests("j1") == {
            "r1": {"status": {"id": "COMPLETED"}, "operation": {"location": "/sp"}}
        }
        assert upgraded.job("j1") is not None
        assert upgraded.begin_recovery("j1") == 1
        assert upgraded.reserve_checkpoint_ids("j1", 1, 10) == 1
    with sqlite3.connect(tmp_path / "nested" / "dir" / "jobstore.db") as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(4,)]


def test_recovery_attempts_count_until_the_job_runs(db_url: str, store: JobStore) -> None:
    store.add_job("j1", "crashy", "{}", 1.0)
    assert [store.begin_recovery("j1") for _ in range(3)] == [1, 2, 3]
    with JobStore(db_url) as reopened:  # the count survives the JobManager
        assert reopened.begin_recovery("j1") == 4
    store.end_recovery("j1")
    assert store.begin_recovery("j1") == 1
    store.update_status("j1", "FAILED", 2.0)
    assert store.prune(max_capacity=0, finished_before=0.0) == 1  # pruned with its count


def test_newer_schema_version_is_refused(tmp_path: Path, sqlite_url: str) -> None:
    db_url = sqlite_url
    JobStore(db_url).close()
    with sqlite3.connect(tmp_path / "nested" / "dir" / "jobstore.db") as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(JobStoreError, match="schema version 99"):
        JobStore(db_url)


def test_add_job_and_read_it_back(store: JobStore) -> None:
    store.add_job("j1", "word count", GRAPH.encode(), submitted_at=100.0)
    record = store.job("j1")
    assert record == JobRecord(
        job_id="j1",
        name="word count",
        job_graph_json=GRAPH,
        status="INITIALIZING",
        submitted_at=100.0,
        updated_at=100.0,
        ended_at=None,
    )
    assert not record.is_terminal
    assert store.job("missing") is None


def test_add_job_twice_raises_duplicate(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    with pytest.raises(DuplicateJob, match="j1"):
        store.add_job("j1", "b", GRAPH, 2.0)
    assert store.job("j1").name == "a"


def test_update_status_records_end_time_only_when_terminal(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    store.update_status("j1", JobStatus.RUNNING, 2.0)
    record = store.job("j1")
    assert (record.status, record.updated_at, record.ended_at) == ("RUNNING", 2.0, None)
    store.update_status("j1", "CANCELED", 3.0)
    record = store.job("j1")
    assert (record.status, record.updated_at, record.ended_at) == ("CANCELED", 3.0, 3.0)
    assert record.is_terminal


def test_calls_about_unknown_jobs_raise(store: JobStore) -> None:
    with pytest.raises(UnknownJob):
        store.update_status("nope", "RUNNING", 1.0)
    with pytest.raises(UnknownJob):
        store.save_progress("nope", {})
    with pytest.raises(UnknownJob):
        store.archive("nope", {}, {})
    with pytest.raises(UnknownJob):
        store.add_checkpoint("nope", 1, "/cp/1", False, 1.0, 10)


def test_progress_round_trips_nested_json_and_is_overwritten(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    progress = {
        "completed_splits": {"source": [0, 1, 2], "other": []},
        "partitions": {"p1": {"host": "tm-1", "port": 6121, "subpartitions": [[0, 10], [1, 20]]}},
        "attempt": 3,
        "ratio": 0.5,
        "done": False,
        "note": None,
        "unicode": "ünïcødé ✓",
    }
    store.save_progress("j1", progress)
    assert store.job("j1").progress == progress
    store.save_progress("j1", {"completed_splits": {"source": [0]}})
    assert store.job("j1").progress == {"completed_splits": {"source": [0]}}


def test_an_archive_reads_back_the_values_json_dumps_would_have_stored(store: JobStore) -> None:
    # Archives are encoded with msgspec (dumps_fast), everything else with json.dumps: the
    # same values come back, non-ASCII text and a lone surrogate (json.dumps's fallback) too.
    details = {
        "job_id": "j1",
        "subtasks": {"v1": [{"subtask": 0, "state_timestamps": {"RUNNING": 1.5e9 + 0.125}, "host": None}]},
        "name": "résumé ✓",
        "tiny": 1e-07,
    }
    exceptions = {"entries": [{"stacktrace": "bad byte \udcff in output"}], "truncated": False}
    store.add_job("j1", "job", GRAPH, 1.0)
    store.update_status("j1", "FINISHED", 2.0)
    store.archive("j1", details, exceptions)
    [record] = store.archived_jobs()
    assert record.details == json.loads(json.dumps(details)) == details
    assert record.exceptions == exceptions


def test_checkpoints_and_latest_includes_savepoints(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    assert store.latest_checkpoint("j1") is None
    assert store.checkpoints("j1") == []
    store.add_checkpoint("j1", 1, "/cp/chk-1", False, 10.0, 100, {"operators": {"v1": [1, 2]}})
    store.add_checkpoint("j1", 3, "/sp/savepoint-3", True, 30.0, 300)
    store.add_checkpoint("j1", 2, "/cp/chk-2", False, 20.0, 200)
    latest = store.latest_checkpoint("j1")
    assert latest == CheckpointRecord("j1", 3, "/sp/savepoint-3", True, 30.0, 300, {})
    assert [c.checkpoint_id for c in store.checkpoints("j1")] == [1, 2, 3]
    assert store.checkpoints("j1")[0].metadata == {"operators": {"v1": [1, 2]}}
    assert store.job("j1").latest_checkpoint == latest
    with pytest.raises(JobStoreError, match="checkpoint 2 of job j1"):
        store.add_checkpoint("j1", 2, "/cp/again", False, 21.0, 1)


def test_remove_checkpoints_keeps_latest_n_and_all_savepoints(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    store.add_job("j2", "b", GRAPH, 1.0)
    for checkpoint_id in range(1, 8):
        savepoint = checkpoint_id in (2, 5)
        store.add_checkpoint("j1", checkpoint_id, f"/cp/{checkpoint_id}", savepoint, float(checkpoint_id), 1)
    store.add_checkpoint("j2", 1, "/cp/other", False, 1.0, 1)

    removed = store.remove_checkpoints("j1", keep_latest=2)
    assert [c.checkpoint_id for c in removed] == [1, 3, 4]
    assert all(not c.is_savepoint for c in removed)
    assert [c.checkpoint_id for c in store.checkpoints("j1")] == [2, 5, 6, 7]
    assert store.remove_checkpoints("j1", keep_latest=2) == []
    assert [c.checkpoint_id for c in store.remove_checkpoints("j1", keep_latest=0)] == [6, 7]
    assert [c.checkpoint_id for c in store.checkpoints("j1")] == [2, 5]
    assert len(store.checkpoints("j2")) == 1
    with pytest.raises(ValueError):
        store.remove_checkpoints("j1", keep_latest=-1)


def test_adding_a_checkpoint_forgets_the_ones_it_subsumes_in_one_transaction(store: JobStore) -> None:
    store.add_job("j1", "a", GRAPH, 1.0)
    store.add_checkpoint("j1", 1, "/cp/1", False, 1.0, 1)
    store.add_checkpoint("j1", 2, "/sp/2", True, 2.0, 1)
    store.add_checkpoint("j1", 3, "/cp/3", False, 3.0, 1, None, ["/cp/1", "/sp/2"])
    # The subsumed checkpoint is gone, the savepoint never is.
    assert [(c.checkpoint_id, c.location) for c in store.checkpoints("j1")] == [(2, "/sp/2"), (3, "/cp/3")]
    # A failed insert (a duplicate id) forgets nothing: the old row stays with its folder.
    with pytest.raises(JobStoreError, match="already in the job store"):
        store.add_checkpoint("j1", 3, "/cp/3b", False, 4.0, 1, None, ["/cp/3"])
    assert [c.checkpoint_id for c in store.checkpoints("j1")] == [2, 3]


def test_recoverable_and_archived_jobs_are_separate(store: JobStore) -> None:
    statuses = {
        "running": "RUNNING",
        "restarting": "RESTARTING",
        "suspended": "SUSPENDED",
        "created": "CREATED",
        "finished": "FINISHED",
        "failed": "FAILED",
        "canceled": "CANCELED",
    }
    for i, (job_id, status) in enumerate(statuses.items()):
        store.add_job(job_id, job_id, GRAPH, float(i))
        store.update_status(job_id, status, 100.0 + i)
    store.save_progress("running", {"completed_splits": [1]})
    store.add_checkpoint("running", 4, "/cp/4", False, 5.0, 1)
    store.archive("finished", {"jid": "finished", "state": "FINISHED"}, {"root-exception": None})

    recoverable = store.recoverable_jobs()
    assert [r.job_id for r in recoverable] == ["running", "restarting", "suspended", "created"]
    running = recoverable[0]
    assert running.job_graph_json == GRAPH
    assert running.progress == {"completed_splits": [1]}
    assert running.latest_checkpoint is not None and running.latest_checkpoint.checkpoint_id == 4
    assert recoverable[1].latest_checkpoint is None

    archived = store.archived_jobs()
    assert [r.job_id for r in archived] == ["canceled", "failed", "finished"]  # newest end first
    finished = archived[-1]
    assert finished.details == {"jid": "finished", "state": "FINISHED"}
    assert finished.exceptions == {"root-exception": None}
    assert archived[0].details is None
    assert [r.job_id for r in store.archived_jobs(limit=1)] == ["canceled"]


def test_prune_deletes_old_terminal_jobs_and_their_checkpoints(store: JobStore) -> None:
    for job_id, status, ended in [("old", "FINISHED", 10.0), ("new", "FAILED", 50.0), ("live", "RUNNING", 5.0)]:
        store.add_job(job_id, job_id, GRAPH, 1.0)
        store.add_checkpoint(job_id, 1, f"/cp/{job_id}", False, 2.0, 1)
        store.put_savepoint_request(job_id, "r", {"status": {"id": "IN_PROGRESS"}})
        store.update_status(job_id, status, ended)
    assert store.prune(max_capacity=100, finished_before=20.0) == 1
    assert store.job("old") is None
    assert store.checkpoints("old") == [] and store.savepoint_requests("old") == {}
    assert store.savepoint_requests("new") == {"r": {"status": {"id": "IN_PROGRESS"}}}
    assert store.job("new") is not None and store.job("live") is not None
    assert len(store.checkpoints("live")) == 1
    assert store.prune(max_capacity=100, finished_before=20.0) == 0
    # The id is free again.
    store.add_job("old", "again", GRAPH, 60.0)


def test_prune_keeps_the_most_recently_ended_jobs_up_to_capacity(store: JobStore) -> None:
    for index in range(12):
        store.add_job(f"done-{index}", "done", GRAPH, 1.0)
        store.update_status(f"done-{index}", "FINISHED", 100.0 + index)
    store.add_job("live", "live", GRAPH, 1.0)
    store.update_status("live", "RUNNING", 2.0)
    assert store.prune(max_capacity=5, finished_before=0.0) == 7
    assert sorted(r.job_id for r in store.archived_jobs()) == sorted(f"done-{i}" for i in range(7, 12))
    assert [r.job_id for r in store.recoverable_jobs()] == ["live"]  # running jobs never count


def test_reopened_store_sees_everything(db_url: str) -> None:
    """The JobManager-restart case: a new store on the same file recovers the jobs."""
    first = JobStore(db_url)
    first.add_job("run", "running job", GRAPH, 1.0)
    first.update_status("run", "RUNNING", 2.0)
    first.save_progress("run", {"completed_splits": {"src": [0, 1]}})
    first.add_checkpoint("run", 7, "/cp/chk-7", False, 3.0, 42, {"k": "v"})
    first.add_job("done", "finished job", GRAPH, 1.0)
    first.update_status("done", "FINISHED", 4.0)
    first.archive("done", {"state": "FINISHED"}, {"all-exceptions": []})
    first.close()
    with pytest.raises(JobStoreError, match="closed"):
        first.job("run")

    with JobStore(db_url) as second:
        (recovered,) = second.recoverable_jobs()
        assert recovered.job_id == "run"
        assert recovered.status == "RUNNING"
        assert recovered.progress == {"completed_splits": {"src": [0, 1]}}
        assert recovered.latest_checkpoint == CheckpointRecord("run", 7, "/cp/chk-7", False, 3.0, 42, {"k": "v"})
        (archived,) = second.archived_jobs()
        assert archived.details == {"state": "FINISHED"}
        assert archived.exceptions == {"all-exceptions": []}
        assert archived.ended_at == 4.0


def test_concurrent_writers_from_threads(db_url: str, store: JobStore) -> None:
    other = JobStore(db_url)  # a second engine on the same file: contention across connection pools
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(worker: int) -> None:
        target = store if worker % 2 else other
        try:
            barrier.wait()
            for i in range(10):
                job_id = f"w{worker}-{i}"
                target.add_job(job_id, job_id, GRAPH, float(i))
                target.update_status(job_id, "RUNNING", float(i))
                target.save_progress(job_id, {"split": i})
                target.add_checkpoint(job_id, 1, f"/cp/{job_id}", False, float(i), i)
                assert target.recoverable_jobs()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    other.close()
    assert errors == []
    jobs = store.recoverable_jobs()
    assert len(jobs) == 80
    assert all(job.progress and job.latest_checkpoint is not None for job in jobs)


def test_in_memory_sqlite_is_shared_across_threads() -> None:
    with JobStore("sqlite://") as store:
        thread = threading.Thread(target=store.add_job, args=("j1", "a", GRAPH, 1.0))
        thread.start()
        thread.join()
        assert store.job("j1") is not None


def test_from_config_reads_jobstore_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'configured.db'}"
    with JobStore.from_config(Configuration({"jobstore.url": url})) as store:
        assert store.url == url
    assert (tmp_path / "configured.db").exists()
    assert default_url() == f"sqlite:///{Path(tempfile.gettempdir()) / 'flink-runtime' / 'jobstore.db'}"


def test_bad_urls_raise_job_store_error_with_masked_password(tmp_path: Path) -> None:
    with pytest.raises(JobStoreError, match="not a url"):
        JobStore("not a url")
    with pytest.raises(JobStoreError) as info:
        JobStore("nosuchdialect://admin:s3cret@db.example:5432/flink")
    message = str(info.value)
    assert "s3cret" not in message
    assert "admin:***@db.example:5432/flink" in message
    # An unreachable database: the SQLite file's directory is a regular file.
    (tmp_path / "blocker").write_text("")
    with pytest.raises(JobStoreError, match="blocker"):
        JobStore(f"sqlite:///{tmp_path / 'blocker' / 'sub' / 'x.db'}")
    # The database "file" is a directory: SQLite cannot open it.
    with pytest.raises(JobStoreError, match="unable to open database file"):
        JobStore(f"sqlite:///{tmp_path}")


def test_checkpoint_ids_are_reserved_in_blocks_that_never_overlap(db_url: str, store: JobStore) -> None:
    store.add_job("j1", "counted", "{}", 1.0)
    assert store.reserve_checkpoint_ids("j1", 1, 10) == 1  # ids 1..10
    assert store.reserve_checkpoint_ids("j1", 11, 10) == 11  # the next block, contiguous
    with JobStore(db_url) as next_jobmanager:  # knows only its stored checkpoints (none): asks from 1
        assert next_jobmanager.reserve_checkpoint_ids("j1", 1, 10) == 21
    assert store.reserve_checkpoint_ids("j1", 100, 10) == 100  # a chk-99 folder it found: after it
    store.update_status("j1", "FAILED", 2.0)
    assert store.prune(max_capacity=0, finished_before=0.0) == 1  # pruned with its counter
