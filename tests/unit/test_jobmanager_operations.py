"""The JobManager's JobOperations component (what REST calls for savepoints, stops,
checkpoints and their statistics), built alone: fake jobs, a fake archive of earlier
runs, and a mailbox that runs each call at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from flink_runtime.checkpoint.coordinator import CheckpointFailure
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobmanager.errors import (
    InvalidRequest,
    JobNotFound,
    JobNotRunning,
    OperationInProgress,
    RequestNotFound,
)
from flink_runtime.jobmanager.operation_requests import OperationRequests
from flink_runtime.jobmanager.operations import JobOperations

T = TypeVar("T")
RUNNING, FINISHED, EARLIER = "a" * 32, "b" * 32, "c" * 32


class FakeCoordinator:
    def statistics(self) -> dict[str, Any]:
        return {"counts": {"completed": 2}}

    def configuration(self) -> dict[str, Any]:
        return {"interval": 2000}


class FakeJob:
    """A JobMaster as the operations see it: triggers start a request and answer its id."""

    def __init__(self, job_id: str, status: JobStatus) -> None:
        self.job_id = job_id
        self.status = status
        self.savepoint_requests = OperationRequests("savepoint")
        self.checkpoint_requests = OperationRequests("checkpoint")
        self.coordinator = FakeCoordinator()
        self.accepting = True
        self.refusal: CheckpointFailure | None = None
        self.calls: list[tuple[Any, ...]] = []

    def trigger_savepoint(self, target_directory: str | None, cancel_job: bool, request_id: str | None) -> str:
        self.calls.append(("savepoint", target_directory, cancel_job))
        if self.refusal is not None:
            raise self.refusal
        return self.savepoint_requests.start(request_id)

    def stop_with_savepoint(self, target_directory: str | None, drain: bool, request_id: str | None) -> str:
        self.calls.append(("stop", target_directory, drain))
        return self.savepoint_requests.start(request_id)

    def trigger_checkpoint(self, request_id: str | None) -> str:
        self.calls.append(("checkpoint",))
        return self.checkpoint_requests.start(request_id)

    def accepts_checkpoints(self) -> bool:
        return self.accepting


class FakeArchive:
    """Jobs of earlier JobManager runs: EARLIER, with one completed savepoint request."""

    def is_archived(self, job_id: str) -> bool:
        return job_id == EARLIER

    def archived_savepoint_requests(self, job_id: str) -> dict[str, dict[str, Any]] | None:
        return {"r0": {"status": {"id": "COMPLETED"}}} if job_id == EARLIER else None


class ImmediateMailbox:
    def __init__(self) -> None:
        self.calls = 0

    async def call_in_mailbox(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        self.calls += 1
        return function(*args)


@pytest.fixture
def jobs() -> dict[str, FakeJob]:
    return {RUNNING: FakeJob(RUNNING, JobStatus.RUNNING), FINISHED: FakeJob(FINISHED, JobStatus.FINISHED)}


@pytest.fixture
def mailbox() -> ImmediateMailbox:
    return ImmediateMailbox()


@pytest.fixture
def operations(jobs: dict[str, FakeJob], mailbox: ImmediateMailbox) -> JobOperations:
    return JobOperations(jobs, FakeArchive(), mailbox)  # type: ignore[arg-type]


async def test_a_savepoint_runs_in_the_mailbox_and_its_status_answers(
    operations: JobOperations, jobs: dict[str, FakeJob], mailbox: ImmediateMailbox
) -> None:
    request_id = await operations.trigger_savepoint(RUNNING, "/sp", True)
    assert mailbox.calls == 1 and jobs[RUNNING].calls == [("savepoint", "/sp", True)]
    assert operations.savepoint_status(RUNNING, request_id) == {"status": {"id": "IN_PROGRESS"}}
    with pytest.raises(RequestNotFound, match=f"No savepoint request nope for job {RUNNING}"):
        operations.savepoint_status(RUNNING, "nope")


async def test_one_savepoint_or_stop_at_a_time_and_a_retry_gets_the_same_request(
    operations: JobOperations, jobs: dict[str, FakeJob]
) -> None:
    first = await operations.stop_with_savepoint(RUNNING, "/sp", False, trigger_id="t1")
    assert first == "t1"
    assert await operations.trigger_savepoint(RUNNING, None, False, trigger_id="t1") == "t1"  # a retry
    with pytest.raises(OperationInProgress, match=f"poll GET /jobs/{RUNNING}/savepoints/t1"):
        await operations.trigger_savepoint(RUNNING, None, False)
    assert len(jobs[RUNNING].calls) == 1


async def test_refusals_name_the_job_and_why(operations: JobOperations, jobs: dict[str, FakeJob]) -> None:
    with pytest.raises(JobNotFound, match="Job x not found"):
        await operations.trigger_checkpoint("x")
    with pytest.raises(JobNotRunning, match=f"Cannot stop job {FINISHED}: it is FINISHED, not RUNNING"):
        await operations.stop_with_savepoint(FINISHED, None, False)
    jobs[RUNNING].refusal = CheckpointFailure("no target directory configured")
    with pytest.raises(InvalidRequest, match="no target directory configured"):
        await operations.trigger_savepoint(RUNNING, None, False)
    jobs[RUNNING].accepting = False
    with pytest.raises(OperationInProgress, match="publishing its output and finishing"):
        await operations.trigger_checkpoint(RUNNING)


async def test_checkpoints_on_request_and_their_statistics(operations: JobOperations) -> None:
    request_id = await operations.trigger_checkpoint(RUNNING)
    assert operations.checkpoint_status(RUNNING, request_id) == {"status": {"id": "IN_PROGRESS"}}
    assert operations.checkpoint_stats(RUNNING) == {"counts": {"completed": 2}}
    assert operations.checkpoint_config(FINISHED) == {"interval": 2000}
    with pytest.raises(RequestNotFound, match="no checkpoint operation with triggerId=nope"):
        operations.checkpoint_status(RUNNING, "nope")


def test_a_job_of_an_earlier_run_answers_from_the_archive(operations: JobOperations) -> None:
    assert operations.savepoint_status(EARLIER, "r0") == {"status": {"id": "COMPLETED"}}
    with pytest.raises(RequestNotFound, match="ended before the JobManager restarted"):
        operations.checkpoint_stats(EARLIER)
    with pytest.raises(JobNotFound):
        operations.savepoint_status("unknown", "r0")
