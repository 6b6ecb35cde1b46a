"""The TaskExecutor's side of registration and heartbeats, against a fake JobManager:
its registration loop is supervised (restarted if it raises), a silent JobManager is
registered with again, and its heartbeat answers list what it runs, including tasks
whose final state the JobManager has not acknowledged yet."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.registration import NextAttempt, retrying
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeRegistration,
    AcknowledgeTaskExecutionStates,
    CancelTask,
    Heartbeat,
    HeartbeatResponse,
    Message,
    RefuseRegistration,
    RegisterTaskManager,
    ReleasePartitions,
    SubmitTask,
    TaskDeploymentDescriptor,
    TaskOperationResult,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from flink_runtime.rpc.service import RpcService
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests.unit.taskexecutor_fakes import FakeTask

ACCEPTED = AcknowledgeRegistration(registration_id="r", jobmanager_id="jm")
# A TaskExecutor's RPC is always CURVE; the fake JobManager holds the same secret.
SECRET = "liveness-test-secret"


class FakeJobManager(RpcEndpoint):
    """Answers registrations from a script (then accepts), sends no heartbeats of its own,
    and holds its answers to state updates until `release` is set."""

    def __init__(self, *answers: Message) -> None:
        super().__init__("fake JobManager", RpcService("127.0.0.1", 0, cluster_secret=SECRET))
        self.answers = list(answers)
        self.registrations: list[float] = []
        self.updates: list[UpdateTaskExecutionState] = []
        self.release = asyncio.Event()
        self.release.set()

    @handles(RegisterTaskManager)
    def on_register(self, message: RegisterTaskManager) -> Message:
        self.registrations.append(time.monotonic())
        return self.answers.pop(0) if self.answers else ACCEPTED

    @handles(UpdateTaskExecutionStates)
    def on_update(self, message: UpdateTaskExecutionStates) -> Any:
        self.updates.extend(message.updates)

        async def later() -> AcknowledgeTaskExecutionStates:
            await self.release.wait()
            return AcknowledgeTaskExecutionStates(answers=[Acknowledge() for _ in message.updates])

        return later()


async def start(endpoints: list[RpcEndpoint], endpoint: RpcEndpoint) -> Any:
    await endpoint.start()
    endpoints.append(endpoint)
    return endpoint


def taskexecutor(tmp_path: Path, jobmanager: FakeJobManager, **overrides: str) -> TaskExecutor:
    config = {
        "io.tmp.dirs": str(tmp_path),
        "taskmanager.numberOfTaskSlots": 1,
        "cluster.registration.error-delay": "100 ms",
        "cluster.registration.refused-registration-delay": "50 ms",
        "heartbeat.interval": "10 s",
        "heartbeat.timeout": "60 s",
        "security.cluster.secret": SECRET,
        **overrides,
    }
    return TaskExecutor(Configuration(config), jobmanager_address=jobmanager.address)


async def test_a_registration_loop_that_raises_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoints: list[RpcEndpoint], caplog: pytest.LogCaptureFixture
) -> None:
    original = retrying.next_attempt
    failures = 0

    def buggy_next_attempt(*args: Any) -> NextAttempt:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise ZeroDivisionError("bug in the back-off")
        return original(*args)

    monkeypatch.setattr(retrying, "next_attempt", buggy_next_attempt)
    jobmanager = await start(endpoints, FakeJobManager(RefuseRegistration(reason="not yet")))
    tm = await start(endpoints, taskexecutor(tmp_path, jobmanager))
    await asyncio.wait_for(tm.registered.wait(), 5.0)
    assert failures == 1
    assert tm.jobmanager_id == "jm"
    assert len(jobmanager.registrations) == 2
    # Restarted after cluster.registration.error-delay, not in a tight loop.
    assert jobmanager.registrations[1] - jobmanager.registrations[0] >= 0.09
    assert any("registration: restarting after ZeroDivisionError" in r.getMessage() for r in caplog.records)


async def test_a_jobmanager_that_stops_sending_heartbeats_is_registered_with_again(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    jobmanager = await start(endpoints, FakeJobManager())
    overrides = {"heartbeat.interval": "100 ms", "heartbeat.timeout": "300 ms"}
    tm = await start(endpoints, taskexecutor(tmp_path, jobmanager, **overrides))
    await asyncio.wait_for(tm.registered.wait(), 5.0)
    deadline = time.monotonic() + 5.0
    while len(jobmanager.registrations) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert len(jobmanager.registrations) >= 2, "the TaskManager did not notice the silent JobManager"
    gap = jobmanager.registrations[1] - jobmanager.registrations[0]
    assert 0.3 <= gap < 2.0  # heartbeat.timeout, checked every heartbeat.interval / 2


def noop_task(execution_id: str) -> TaskDeploymentDescriptor:
    return TaskDeploymentDescriptor(
        job_id="0123456789abcdef0123456789abcdef",
        job_name="test job",
        execution_id=execution_id,
        jobmanager_id="jm",
        allocation_id="alloc-1",
        slot_index=0,
        data_namespace="0123456789abcdef0123456789abcdef",
        vertex_id="v1",
        task_name="noop (1/1)",
        subtask_index=0,
        parallelism=1,
        attempt_number=0,
        invokable="noop",
    )


async def test_a_finished_task_is_reported_until_its_final_state_is_acknowledged(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    jobmanager = await start(endpoints, FakeJobManager())
    tm = await start(endpoints, taskexecutor(tmp_path, jobmanager))
    await asyncio.wait_for(tm.registered.wait(), 5.0)
    jobmanager.release.clear()  # the JobManager is slow to answer state updates

    async def heartbeat() -> list[str]:
        answer = await jobmanager.rpc.ask(tm.address, Heartbeat(jobmanager_id="jm"), 2.0)
        assert isinstance(answer, HeartbeatResponse)
        return answer.running_executions

    submitted = await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=noop_task("exec-1")), 2.0)
    assert submitted == TaskOperationResult(execution_id="exec-1", success=True)
    deadline = time.monotonic() + 5.0
    while not any(update.state == "FINISHED" for update in jobmanager.updates) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert [update.state for update in jobmanager.updates][-1] == "FINISHED"
    assert "exec-1" not in tm.tasks  # ended: gone from the task table...
    assert await heartbeat() == ["exec-1"]  # ...but reported while its FINISHED is unanswered

    jobmanager.release.set()
    deadline = time.monotonic() + 5.0
    while await heartbeat() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert await heartbeat() == []


async def test_commands_of_another_jobmanager_are_ignored(tmp_path: Path, endpoints: list[RpcEndpoint]) -> None:
    """Fencing: a deposed leader (or a JobManager this TaskManager left) may still send
    commands; one carrying another JobManager's token changes nothing here."""
    jobmanager = await start(endpoints, FakeJobManager())
    tm = await start(endpoints, taskexecutor(tmp_path, jobmanager))
    await asyncio.wait_for(tm.registered.wait(), 5.0)
    job_id = "0123456789abcdef0123456789abcdef"
    (tmp_path / job_id).mkdir()

    stale = await jobmanager.rpc.ask(tm.address, CancelTask(execution_id="e-1", jobmanager_id="old-jm"), 2.0)
    assert isinstance(stale, TaskOperationResult) and not stale.success
    assert "FencingTokenException: CancelTask from JobManager old-jm" in stale.reason
    assert "registered with jm" in stale.reason
    current = await jobmanager.rpc.ask(tm.address, CancelTask(execution_id="e-1", jobmanager_id="jm"), 2.0)
    assert current == TaskOperationResult(execution_id="e-1", success=False, reason="unknown execution")

    jobmanager.rpc.tell(tm.address, ReleasePartitions(job_id=job_id, jobmanager_id="old-jm"))
    await asyncio.sleep(0.3)
    assert (tmp_path / job_id).exists(), "a deposed JobManager deleted partitions"
    jobmanager.rpc.tell(tm.address, ReleasePartitions(job_id=job_id, jobmanager_id="jm"))
    deadline = time.monotonic() + 5.0
    while (tmp_path / job_id).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not (tmp_path / job_id).exists()


def fake_tasks(tm: TaskExecutor) -> list[FakeTask]:
    """Make `tm` run FakeTasks (through its create_task seam); returns them as they are made."""
    made: list[FakeTask] = []

    def create_task(descriptor: TaskDeploymentDescriptor) -> FakeTask:
        made.append(FakeTask(descriptor, report=tm.task_table.report_from_task_thread))
        return made[-1]

    tm.create_task = create_task  # type: ignore[method-assign]
    return made


async def test_tasks_come_from_create_task_and_are_cancelled_when_the_jobmanager_goes_silent(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    """`create_task` is the one place a descriptor becomes a task (a simulation swaps it);
    the JobManager connection's news reach the task table through the TaskExecutor."""
    jobmanager = await start(endpoints, FakeJobManager())
    overrides = {"heartbeat.interval": "100 ms", "heartbeat.timeout": "300 ms"}
    tm = taskexecutor(tmp_path, jobmanager, **overrides)
    made = fake_tasks(tm)
    await start(endpoints, tm)
    await asyncio.wait_for(tm.registered.wait(), 5.0)
    submitted = await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=noop_task("exec-1")), 2.0)
    assert submitted == TaskOperationResult(execution_id="exec-1", success=True)
    assert [task.execution_id for task in made] == ["exec-1"] and made[0].started
    await asyncio.to_thread(made[0].report, ExecutionState.RUNNING)
    deadline = time.monotonic() + 5.0
    while not jobmanager.updates and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert [(update.execution_id, update.state) for update in jobmanager.updates] == [("exec-1", "RUNNING")]

    deadline = time.monotonic() + 5.0  # the fake JobManager sends no heartbeats
    while not made[0].cancelled and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert made[0].cancelled, "the tasks of a lost JobManager are cancelled"


async def test_a_submit_task_into_a_slot_a_live_task_of_another_allocation_holds_is_refused(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    """A SubmitTask the JobManager gave up on (its ask timed out) may still arrive after the
    JobManager freed its slot and deployed another task there: the slot takes only one."""
    jobmanager = await start(endpoints, FakeJobManager())
    tm = taskexecutor(tmp_path, jobmanager)  # one slot
    made = fake_tasks(tm)
    await start(endpoints, tm)
    await asyncio.wait_for(tm.registered.wait(), 5.0)

    async def submit(execution_id: str, **fields: Any) -> Any:
        descriptor = msgspec.structs.replace(noop_task(execution_id), **fields)
        return await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=descriptor), 2.0)

    assert (await submit("late")).success
    refused = await submit("new", allocation_id="alloc-2")
    assert isinstance(refused, TaskOperationResult) and not refused.success
    assert f"slot 0 of TaskManager {tm.resource_id} is occupied by noop (1/1) (late, allocation alloc-1)" in (
        refused.reason
    )
    assert list(tm.tasks) == ["late"]
    # Tasks sharing the slot carry its allocation id: they are accepted.
    assert (await submit("shared", vertex_id="v2")).success
    # A slot the TaskManager does not have.
    missing = await submit("nowhere", allocation_id="alloc-3", slot_index=1)
    assert not missing.success and "slot 1 does not exist" in missing.reason

    for task in made:  # the JobManager's CancelTask reaches them: the slot is free again
        await asyncio.to_thread(task.report, ExecutionState.CANCELED)
    deadline = time.monotonic() + 5.0
    while tm.tasks and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert (await submit("new", allocation_id="alloc-2")).success
