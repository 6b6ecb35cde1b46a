"""A task deployed into a TaskManager's slots as it registers (issue 25 item 2).

The JobManager offers a TaskManager's slots to waiting requests inside the handler that
acknowledges its registration, so a SubmitTask leaves right behind the
AcknowledgeRegistration, on another socket: the TaskManager may read the task first. It
must then wait briefly for the acknowledgement instead of refusing the task as "not
registered" (which failed an attempt of nearly every job whose TaskManagers the active
resource manager started for it, and the job itself under restart-strategy none).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import Message, RegisterTaskManager, SubmitTask, TaskOperationResult
from tests.unit.test_taskexecutor_liveness import ACCEPTED, FakeJobManager, fake_tasks, noop_task, start, taskexecutor


class SlowAnswerJobManager(FakeJobManager):
    """Acknowledges a registration only once `acknowledge` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.acknowledge = asyncio.Event()

    @handles(RegisterTaskManager)
    def on_register(self, message: RegisterTaskManager) -> object:
        self.asked.set()

        async def later() -> Message:
            await self.acknowledge.wait()
            return ACCEPTED

        return later()


async def test_a_task_that_arrives_before_the_registration_s_answer_waits_for_it(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    jobmanager = await start(endpoints, SlowAnswerJobManager())
    tm = taskexecutor(tmp_path, jobmanager)
    fake_tasks(tm)
    await start(endpoints, tm)
    await asyncio.wait_for(jobmanager.asked.wait(), 5.0)

    submitted = asyncio.ensure_future(jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=noop_task("early")), 5.0))
    await asyncio.sleep(0.3)  # the task is at the TaskManager before the acknowledgement
    assert not submitted.done()
    jobmanager.acknowledge.set()
    answer = await asyncio.wait_for(submitted, 5.0)
    assert isinstance(answer, TaskOperationResult) and answer.success, answer
    assert list(tm.tasks) == ["early"]


@pytest.mark.parametrize("jobmanager_id", ["jm", "another-jobmanager"])
async def test_without_an_acknowledgement_the_task_is_refused_after_the_grace(
    tmp_path: Path, endpoints: list[RpcEndpoint], jobmanager_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("flink_runtime.taskmanager.taskexecutor.REGISTRATION_ANSWER_GRACE", 0.2)
    jobmanager = await start(endpoints, SlowAnswerJobManager())
    tm = taskexecutor(tmp_path, jobmanager)
    fake_tasks(tm)
    await start(endpoints, tm)
    await asyncio.wait_for(jobmanager.asked.wait(), 5.0)
    descriptor = msgspec.structs.replace(noop_task("early"), jobmanager_id=jobmanager_id)
    answer = await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=descriptor), 5.0)
    assert isinstance(answer, TaskOperationResult) and not answer.success
    assert answer.reason == f"TaskManager {tm.resource_id} is not registered with a JobManager"
    assert list(tm.tasks) == []
