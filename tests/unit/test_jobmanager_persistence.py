"""The JobManager's JobPersistence component, built alone: a fake host (the JobManager's
side: its job registry and JobMaster factory) and fake JobMasters, on a real SQLite job
store. Its writes run on its own writer thread; each test awaits them (`settle`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.checkpoint.progress import SAVEPOINT_PATH_KEY
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.highavailability.lease_store import LeaseStore
from flink_runtime.jobgraph.jobgraph import JobGraph, JobVertex
from flink_runtime.jobmanager import job_persistence
from flink_runtime.jobmanager.job_persistence import JobPersistence
from flink_runtime.jobmanager.jobstore import FencingTokenMismatch, JobStore
from flink_runtime.rpc.messages import JobStatusChanged

JOB = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def graph(job_id: str = JOB) -> JobGraph:
    return JobGraph(name="numbers", job_id=job_id, vertices=[JobVertex(id="v1", name="source", invokable="noop")])


class FakeCoordinator:
    def __init__(self) -> None:
        self.resumed: tuple[list[int], list[str]] | None = None

    def resume_after(self, checkpoint_ids: list[int], locations: list[str]) -> None:
        self.resumed = (checkpoint_ids, locations)

    def count_ids_in(self, reserve: Any) -> None:
        self.reserve = reserve

    def ids_reserved(self, first: int | None, count: int) -> None:
        self.reserved = (first, count)


class FakeSavepointRequests:
    def __init__(self) -> None:
        self.restored: dict[str, Any] | None = None

    def restore(self, stored: dict[str, Any]) -> None:
        self.restored = stored


class FakeJob:
    """A JobMaster as the persistence sees it."""

    def __init__(self, job_graph: JobGraph) -> None:
        assert job_graph.job_id is not None
        self.job_id = job_graph.job_id
        self.job_graph = job_graph
        self.status = JobStatus.INITIALIZING
        self.data_namespace = ""
        self.coordinator = FakeCoordinator()
        self.savepoint_requests = FakeSavepointRequests()
        self.started = False
        self.given_up: str | None = None

    def start(self) -> None:
        self.started = True

    def give_up_recovery(self, reason: str) -> None:
        self.given_up = reason


class FakeHost:
    def __init__(self) -> None:
        self.jobs: dict[str, FakeJob] = {}
        self.removed: list[str] = []
        self.task_managers: dict[str, Any] = {}
        self._pending: list[asyncio.Future[Any]] = []

    def run_async(self, awaitable: Any, on_done: Any = None) -> Any:
        async def run() -> Any:
            try:
                result = await awaitable
            except Exception as exc:
                if on_done is None:
                    raise
                on_done(None, exc)
                return None
            if on_done is not None:
                on_done(result, None)
            return result

        future = asyncio.ensure_future(run())
        self._pending.append(future)
        return future

    def new_job_master(self, job_graph: JobGraph) -> FakeJob:
        return FakeJob(job_graph)

    def add_job(self, job: FakeJob) -> None:
        self.jobs[job.job_id] = job

    def remove_job(self, job_id: str) -> None:
        self.removed.append(job_id)
        self.jobs.pop(job_id, None)

    def owns(self, job: FakeJob) -> bool:
        return self.jobs.get(job.job_id) is job

    async def settle(self) -> None:
        """Wait for every write handed to the writer thread so far."""
        while self._pending:
            await self._pending.pop(0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    with JobStore(f"sqlite:///{tmp_path / 'jobstore.db'}") as job_store:
        yield job_store


@pytest.fixture(autouse=True)
def snapshots_of_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """What is archived of a job is job_snapshots.py's (tested with REST); a fake job's is this."""
    monkeypatch.setattr(
        job_persistence.job_snapshots,
        "archive_records",
        lambda job, task_manager=None: ({"jid": job.job_id, "state": "X"}, {"root-exception": None}),
    )


def changed(job: FakeJob, status: JobStatus, at: float = 1000.0) -> JobStatusChanged:
    job.status = status
    return JobStatusChanged(job_id=job.job_id, old_state="", new_state=status.value, timestamp=at)


async def test_recovery_restarts_running_jobs_from_their_latest_checkpoint(store: JobStore) -> None:
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    store.update_status(JOB, "RUNNING", 2.0)
    store.add_checkpoint(JOB, 1, "/cp/chk-1", False, 3.0, 10, None, [])
    store.add_checkpoint(JOB, 2, "/cp/sp-2", True, 4.0, 10, None, [])
    store.put_savepoint_request(JOB, "r1", {"status": {"id": "COMPLETED"}, "operation": {"location": "/cp/sp-2"}})
    store.add_job(OTHER, "done", graph(OTHER).to_json(), 1.0)
    store.update_status(OTHER, "FINISHED", time.time())  # within jobstore.expiration-time
    store.archive(OTHER, {"jid": OTHER}, {})
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host)

    persistence.recover_jobs()

    job = host.jobs[JOB]
    assert job.started and job.given_up is None
    assert job.job_graph.config[SAVEPOINT_PATH_KEY] == "/cp/sp-2"  # the latest, savepoint or not
    assert job.coordinator.resumed == ([1, 2], ["/cp/chk-1"])  # ids go on after 2; savepoints are not its own
    assert job.data_namespace.startswith(f"{JOB}/run-")  # a fresh namespace for this run's data
    assert job.savepoint_requests.restored == {"r1": store.savepoint_requests(JOB)["r1"]}
    assert OTHER not in host.jobs and persistence.is_archived(OTHER)
    assert persistence.archived_savepoint_requests(OTHER) == {}
    assert persistence.archived_savepoint_requests("unknown") is None

    # RUNNING again: the recovery is over, and counts from 0 next time.
    persistence.status_changed(job, changed(job, JobStatus.RUNNING))  # type: ignore[arg-type]
    await host.settle()
    assert store.begin_recovery(JOB) == 1
    persistence.close()


async def test_a_job_recovered_too_often_is_given_up(store: JobStore) -> None:
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    config = Configuration({"jobmanager.recovery.max-attempts": 2})
    for _ in range(2):
        store.begin_recovery(JOB)  # two JobManagers died recovering it
    host = FakeHost()
    JobPersistence(config, store, host).recover_jobs()
    job = host.jobs[JOB]
    assert not job.started
    assert job.given_up is not None and "recovered 2 times and never reached RUNNING" in job.given_up


async def test_a_finished_job_is_archived(store: JobStore) -> None:
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host)
    job = FakeJob(graph())
    host.add_job(job)
    persistence.job_submitted(job.job_graph, lambda error: None)
    persistence.status_changed(job, changed(job, JobStatus.FINISHED, at=time.time()))  # type: ignore[arg-type]
    await host.settle()
    record = store.job(JOB)
    assert record is not None and record.status == "FINISHED" and record.details == {"jid": JOB, "state": "X"}
    persistence.expire_finished_jobs()
    assert host.removed == []  # queryable for jobstore.expiration-time (an hour)
    persistence.close()


async def test_a_finished_job_expires_in_memory_and_in_the_store(store: JobStore) -> None:
    host = FakeHost()
    persistence = JobPersistence(Configuration({"jobstore.expiration-time": "0 s"}), store, host)
    job = FakeJob(graph())
    host.add_job(job)
    persistence.job_submitted(job.job_graph, lambda error: None)
    persistence.status_changed(job, changed(job, JobStatus.CANCELED, at=time.time() - 1))  # type: ignore[arg-type]
    await host.settle()
    assert store.job(JOB) is None  # archived, then pruned in the same writer thread
    persistence.expire_finished_jobs()
    assert host.removed == [JOB] and JOB not in host.jobs
    persistence.close()


async def test_a_standby_writes_nothing_until_fenced_with_its_token(store: JobStore) -> None:
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host, fencing_cluster="prod")
    job = FakeJob(graph())
    persistence.status_changed(job, changed(job, JobStatus.RUNNING))  # type: ignore[arg-type]
    await host.settle()  # refused (logged), not made
    record = store.job(JOB)
    assert record is not None and record.status != "RUNNING"
    persistence.forget()
    assert persistence.archived == {}


async def test_without_a_store_subsumed_checkpoints_are_still_deleted(tmp_path: Path) -> None:
    host = FakeHost()
    persistence = JobPersistence(Configuration(), None, host)
    old = tmp_path / "chk-1"
    old.mkdir()
    (old / "state").write_text("x")
    persistence.checkpoint_completed(JOB, 2, str(tmp_path / "chk-2"), False, 1, [str(old)])
    persistence.savepoint_request_changed(JOB, "r1", {})  # nothing to keep it in: a no-op
    await host.settle()
    assert not old.exists() and not persistence.enabled
    persistence.close()


async def test_subsumed_checkpoints_go_only_after_the_store_forgot_them(store: JobStore, tmp_path: Path) -> None:
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host)
    old = tmp_path / "chk-1"
    old.mkdir()
    persistence.checkpoint_completed(JOB, 1, str(old), False, 1, [])
    persistence.checkpoint_completed(JOB, 2, str(tmp_path / "chk-2"), False, 1, [str(old)])
    await host.settle()
    assert [c.checkpoint_id for c in store.checkpoints(JOB)] == [2] and not old.exists()
    persistence.close()


async def test_a_submitted_job_is_reported_stored_only_once_committed(store: JobStore) -> None:
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host)
    seen: list[tuple[BaseException | None, bool]] = []
    persistence.job_submitted(graph(), lambda error: seen.append((error, store.job(JOB) is not None)))
    await host.settle()
    assert seen == [(None, True)]  # answered after the commit, never before
    persistence.close()


class LeaderA:
    """jobmanager-a leading the store's "prod" lease, its persistence fenced with that lease's
    token; `depose()` lets the lease lapse to jobmanager-b without telling a."""

    def __init__(self, store: JobStore, host: FakeHost) -> None:
        self.leases = LeaseStore(store.engine, "prod", store.WRITE_OPTIONS)
        lease = self.leases.try_acquire("jobmanager-a", "a", "http://a", 10.0)
        assert lease is not None
        self.persistence = JobPersistence(Configuration(), store, host, fencing_cluster="prod")
        self.persistence.fence(lease.token)

    def depose(self) -> None:
        time.sleep(0.01)
        assert self.leases.try_acquire("jobmanager-b", "b", "http://b", 0.0) is not None  # a's lease expired: b leads


async def test_a_deposed_leaders_submission_is_reported_refused(store: JobStore) -> None:
    """A leader that lost its lease (and has not noticed yet) writes with a stale token:
    the refusal reaches the submission (answered with an error), not only the log."""
    host = FakeHost()
    leader = LeaderA(store, host)
    persistence = leader.persistence
    leader.depose()
    errors: list[BaseException | None] = []
    persistence.job_submitted(graph(), errors.append)
    await host.settle()
    assert len(errors) == 1 and isinstance(errors[0], FencingTokenMismatch), errors
    assert store.job(JOB) is None
    persistence.close()


async def test_a_recovered_job_reserves_its_checkpoint_ids_after_its_predecessors(store: JobStore) -> None:
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    store.reserve_checkpoint_ids(JOB, 1, 20)  # the JobManager before triggered some of 1..20
    host = FakeHost()
    persistence = JobPersistence(Configuration(), store, host)
    persistence.recover_jobs()
    coordinator = host.jobs[JOB].coordinator
    coordinator.reserve(3, 20)  # it knows of checkpoint 2 only
    await host.settle()
    assert coordinator.reserved == (21, 20)
    persistence.close()


async def test_a_savepoint_a_deposed_leaders_store_write_refused_is_deleted(store: JobStore, tmp_path: Path) -> None:
    """A deposed leader (not noticed yet) writes a savepoint; the store refuses to record
    it, so no leader lists it and its request answers failed there: the folder goes."""
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    host = FakeHost()
    leader = LeaderA(store, host)
    persistence = leader.persistence
    kept = tmp_path / "savepoint-012345-kept"
    kept.mkdir()
    (kept / "_metadata").write_text("{}")
    persistence.checkpoint_completed(JOB, 1, str(kept), True, 2, [])
    await host.settle()
    leader.depose()
    refused = tmp_path / "savepoint-012345-refused"
    refused.mkdir()
    (refused / "_metadata").write_text("{}")
    persistence.checkpoint_completed(JOB, 2, str(refused), True, 2, [])
    await host.settle()
    assert [c.location for c in store.checkpoints(JOB)] == [str(kept)]
    assert kept.is_dir() and not refused.exists()
    persistence.close()


async def test_an_ended_jobs_request_its_jobmanager_never_completed_answers_failed(store: JobStore) -> None:
    """The job ended CANCELED; its JobManager died before it stored the end of the stop
    it had accepted. No JobManager runs the job again: the request answers failed."""
    store.add_job(JOB, "numbers", graph().to_json(), 1.0)
    done = {"status": {"id": "COMPLETED"}, "operation": {"location": "/sp/savepoint-1"}}
    store.put_savepoint_request(JOB, "done", done)
    store.put_savepoint_request(JOB, "stop", {"status": {"id": "IN_PROGRESS"}})
    store.update_status(JOB, "CANCELED", time.time())
    store.archive(JOB, {"jid": JOB}, {})
    persistence = JobPersistence(Configuration(), store, FakeHost())
    persistence.recover_jobs()

    requests = persistence.archived_savepoint_requests(JOB)
    assert requests is not None and requests["done"] == done
    assert requests["stop"]["status"]["id"] == "COMPLETED"
    failure = requests["stop"]["operation"]["failure-cause"]
    assert "stopped before it completed" in failure["stack-trace"] and "CANCELED" in failure["stack-trace"]
    persistence.close()


class EndingJob(FakeJob):
    """A FakeJob as JobEndCleanup also sees it: its retained checkpoints on disk."""

    def __init__(self, job_graph: JobGraph, checkpoints_dir: Path, retained: list[str]) -> None:
        super().__init__(job_graph)
        self.name = job_graph.name
        self.config = Configuration()
        self.prepared = False
        self.coordinator.retained_checkpoints = retained  # type: ignore[attr-defined]
        self.coordinator.retention = "NO_EXTERNALIZED_CHECKPOINTS"  # type: ignore[attr-defined]
        self.coordinator.checkpoints_dir = str(checkpoints_dir)  # type: ignore[attr-defined]
        self.coordinator.stats = FakeStats()  # type: ignore[attr-defined]


class FakeStats:
    def discarded(self, locations: list[str]) -> None:
        pass


class CleanupHost(FakeHost):
    def __init__(self) -> None:
        super().__init__()
        self.released: list[str] = []

    def release_partitions(self, job_id: str, data_namespace: str = "") -> None:
        self.released.append(job_id)


@pytest.mark.parametrize("deposed", [True, False])
async def test_a_job_end_is_cleaned_up_only_once_the_store_took_it(
    store: JobStore, tmp_path: Path, deposed: bool
) -> None:
    """Seed 265 of the simulation: a leader deposed without knowing it finishes a job. Its
    FINISHED is refused by the fenced store, which still names the job running from chk-2:
    chk-2 (real files) must stay for the next leader's recovery. The leader's is deleted."""
    from flink_runtime.jobmanager.checkpoint_retention import JobEndCleanup

    host = CleanupHost()
    leader = LeaderA(store, host)
    persistence = leader.persistence
    checkpoint = tmp_path / "checkpoints" / JOB / "chk-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "_metadata").write_text("{}")
    job = EndingJob(graph(), tmp_path / "checkpoints", [str(checkpoint)])
    persistence.job_submitted(job.job_graph, lambda error: None)
    persistence.checkpoint_completed(JOB, 2, str(checkpoint), False, 1, [])
    await host.settle()
    if deposed:
        leader.depose()
    cleanup = JobEndCleanup(host)  # type: ignore[arg-type]
    event = changed(job, JobStatus.FINISHED, at=time.time())
    persistence.status_changed(job, event, on_stored=cleanup.job_ended(job))  # type: ignore[arg-type]
    for _ in range(3):  # the status write, then the cleanup's thread
        await host.settle()
        await asyncio.sleep(0.05)
    record = store.job(JOB)
    assert record is not None
    if deposed:
        assert record.status != "FINISHED" and [c.location for c in store.checkpoints(JOB)] == [str(checkpoint)]
        assert (checkpoint / "_metadata").exists() and host.released == []
    else:
        assert record.status == "FINISHED" and not checkpoint.exists() and host.released == [JOB]
    persistence.close()
