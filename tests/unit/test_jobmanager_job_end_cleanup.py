"""The JobManager's JobEndCleanup component and TaskFencing, each built alone.

JobEndCleanup: fake jobs and a fake host whose off-mailbox work the test completes by
hand; the file work itself (checkpoint/retention.py's clean_up) is replaced by a recorder,
it has tests of its own (tests/integration/test_checkpoint_retention.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from flink_runtime.checkpoint.retention import RETAIN_ON_CANCELLATION, JobEnd, JobEndReport
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import JobStatus
from flink_runtime.jobmanager import checkpoint_retention
from flink_runtime.jobmanager.checkpoint_retention import JobEndCleanup
from flink_runtime.jobmanager.errors import TaskReportRefused
from flink_runtime.jobmanager.task_fencing import TaskFencing
from flink_runtime.rpc.messages import UpdateTaskExecutionState


class FakeStats:
    def __init__(self) -> None:
        self.discarded_ids: list[str] = []

    def discarded(self, locations: list[str]) -> None:
        self.discarded_ids += locations


class FakeCoordinator:
    def __init__(self, retained: list[str]) -> None:
        self.retained_checkpoints = retained
        self.retention = RETAIN_ON_CANCELLATION
        self.checkpoints_dir = "/cp"
        self.stats = FakeStats()


class FakeJob:
    def __init__(self, job_id: str, status: JobStatus, retained: list[str], config: dict[str, Any] | None = None):
        self.job_id = job_id
        self.name = job_id
        self.status = status
        self.config = Configuration(config or {})
        self.coordinator = FakeCoordinator(retained)
        self.prepared = False  # nothing staged: no terminal hooks to run
        self.started = False

    def start(self) -> None:
        self.started = True


class FakeHost:
    def __init__(self) -> None:
        self.work: list[tuple[Any, Callable[[Any, BaseException | None], None]]] = []
        self.released: list[str] = []

    def run_async(self, awaitable: Any, on_done: Any = None) -> None:
        self.work.append((awaitable, on_done))

    def release_partitions(self, job_id: str, data_namespace: str = "") -> None:
        self.released.append(job_id)

    async def finish(self, report: JobEndReport) -> None:
        """The cleanup's thread is done: its answer reaches the mailbox."""
        awaitable, on_done = self.work.pop(0)
        await awaitable
        on_done(report, None)


@pytest.fixture
def ends(monkeypatch: pytest.MonkeyPatch) -> list[JobEnd]:
    recorded: list[JobEnd] = []

    def clean_up(end: JobEnd, discard_staged: Any = None) -> JobEndReport:
        recorded.append(end)
        return JobEndReport()

    monkeypatch.setattr(checkpoint_retention, "clean_up", clean_up)
    return recorded


async def test_a_cancelled_job_keeps_its_checkpoints_and_a_job_from_one_waits_for_it(ends: list[JobEnd]) -> None:
    host = FakeHost()
    cleanup = JobEndCleanup(host)
    ended = FakeJob("j1", JobStatus.CANCELED, ["/cp/j1/chk-3"])
    stored = cleanup.job_ended(ended)
    resumed = FakeJob("j2", JobStatus.CREATED, [], {"execution.savepoint.path": "/cp/j1/chk-3/_metadata"})
    cleanup.start_when_settled(resumed)
    fresh = FakeJob("j3", JobStatus.CREATED, [])
    cleanup.start_when_settled(fresh)
    assert fresh.started and not resumed.started  # j2 reads chk-3, which is being made self-contained

    assert stored is not None
    stored(True)  # the job store took CANCELED
    await host.finish(JobEndReport(kept=["/cp/j1/chk-3"]))
    (end,) = ends
    assert (end.keep, end.discard, end.status) == (["/cp/j1/chk-3"], [], JobStatus.CANCELED)
    assert resumed.started and host.released == ["j1"]


async def test_partitions_stay_while_a_kept_checkpoint_still_refers_to_them(ends: list[JobEnd]) -> None:
    host = FakeHost()
    cleanup = JobEndCleanup(host)
    stored = cleanup.job_ended(FakeJob("j1", JobStatus.FAILED, ["/cp/j1/chk-3"]))
    assert stored is not None
    stored(True)
    await host.finish(JobEndReport(not_externalized=["/cp/j1/chk-3"]))
    assert host.released == []


def test_a_suspended_job_loses_nothing(ends: list[JobEnd]) -> None:
    host = FakeHost()
    assert JobEndCleanup(host).job_ended(FakeJob("j1", JobStatus.SUSPENDED, ["/cp/j1/chk-3"])) is None
    assert host.work == [] and ends == []  # the JobManager that recovers it needs all of it


def test_a_job_end_the_store_refused_removes_nothing(ends: list[JobEnd]) -> None:
    """A deposed leader (its status write fenced off) saw the job end: the store still
    names the job running from its latest checkpoint, which the next leader restores."""
    host = FakeHost()
    cleanup = JobEndCleanup(host)
    stored = cleanup.job_ended(FakeJob("j1", JobStatus.CANCELED, ["/cp/j1/chk-2"]))
    assert host.work == [] and ends == []  # nothing before the store answered
    resumed = FakeJob("j2", JobStatus.CREATED, [], {"execution.savepoint.path": "/cp/j1/chk-2"})
    cleanup.start_when_settled(resumed)
    assert not resumed.started and stored is not None  # chk-2 is to be kept (made self-contained)
    stored(False)
    assert host.work == [] and ends == [] and host.released == []  # checkpoints, partitions: all stay
    assert resumed.started  # nothing is being made self-contained any more


# -- TaskFencing ----------------------------------------------------------------------------------


def report(jobmanager_id: str) -> UpdateTaskExecutionState:
    return UpdateTaskExecutionState(job_id="j1", execution_id="e1", state="RUNNING", jobmanager_id=jobmanager_id)


def test_task_messages_of_another_jobmanager_run_are_refused_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fencing = TaskFencing()
    fencing.check(report("current"), "current")  # accepted: no error
    refusals = []
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            with pytest.raises(TaskReportRefused) as refused:
                fencing.check(report("earlier"), "current")
            refusals.append(refused.value.reason)
    assert (
        refusals
        == ["FencingTokenException: execution e1 was deployed by JobManager earlier, not by this JobManager (current)"]
        * 2
    )
    assert [r.getMessage() for r in caplog.records].count(
        "Refusing messages of tasks deployed by JobManager earlier (this is current); their TaskManagers cancel them."
    ) == 1


def test_a_task_message_reaches_a_live_job_of_this_run_only() -> None:
    fencing, jobs = TaskFencing(), {"j1": "the job j1"}
    assert fencing.addressed_job(report("current"), "current", jobs) == "the job j1"
    with pytest.raises(TaskReportRefused, match="^FencingTokenException: execution e1 was deployed by JobManager ear"):
        fencing.addressed_job(report("earlier"), "current", jobs)
    with pytest.raises(TaskReportRefused, match="^unknown job j1$"):
        fencing.addressed_job(report("current"), "current", {})
