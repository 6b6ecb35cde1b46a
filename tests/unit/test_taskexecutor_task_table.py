"""TaskTable (taskmanager/task_table.py) alone: fake tasks, a fake mailbox and clock, and
a fake JobManager that answers (or not) the state updates."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeTaskExecutionStates,
    Message,
    RpcError,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from flink_runtime.rpc.service import AskTimeoutError
from flink_runtime.taskmanager.task_table import FINAL_STATE_ATTEMPTS, TaskStateChanged, TaskTable
from tests.unit.taskexecutor_fakes import FakeClock, FakeMailbox, FakeTask, descriptor


@dataclass
class JobManager:
    """Answers each update with `answer`; `silent` makes every ask time out."""

    updates: list[UpdateTaskExecutionState] = field(default_factory=list)
    answer: Message = field(default_factory=Acknowledge)
    silent: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)
    # Answers to the next entries, in order, before `answer` again.
    answers: list[Acknowledge | RpcError] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)  # entries per message

    async def ask(self, message: Message) -> Message:
        assert isinstance(message, UpdateTaskExecutionStates)
        self.batches.append(len(message.updates))
        self.updates.extend(message.updates)
        if self.silent:
            raise AskTimeoutError("no answer")
        await self.release.wait()
        answers = [self.answers.pop(0) if self.answers else self.answer for _ in message.updates]
        return AcknowledgeTaskExecutionStates(answers=answers)


@dataclass
class Harness:
    table: TaskTable
    mailbox: FakeMailbox
    clock: FakeClock
    jobmanager: JobManager
    posted: list[TaskStateChanged]

    def task(self, execution_id: str, jobmanager_id: str = "jm-1") -> FakeTask:
        task = FakeTask(descriptor(execution_id, jobmanager_id), report=self.table.report_from_task_thread)
        self.table.start(task)
        return task

    def deliver(self) -> None:
        """The mailbox hands what task threads posted back to the table."""
        posted, self.posted[:] = list(self.posted), []
        for change in posted:
            self.table.state_changed(change)
        self.mailbox.end_turn()


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    mailbox, clock, jobmanager, posted = FakeMailbox(), FakeClock(), JobManager(), []
    jobmanager.release.set()
    table = TaskTable(
        mailbox,
        jobmanager.ask,
        posted.append,
        cancellation_interval=0.5,
        cancellation_timeout=3.0,
        name="tm-1",
        clock=clock,
    )
    yield Harness(table, mailbox, clock, jobmanager, posted)
    await mailbox.close()


async def test_updates_leave_in_order_and_a_final_state_is_reported_until_answered(harness: Harness) -> None:
    task = harness.task("e-1")
    assert task.started and "e-1" in harness.table
    task.report(ExecutionState.INITIALIZING)
    task.report(ExecutionState.RUNNING)
    harness.deliver()
    await harness.mailbox.settle()
    assert [update.state for update in harness.jobmanager.updates] == ["INITIALIZING", "RUNNING"]

    harness.jobmanager.release.clear()  # the JobManager is slow to answer
    task.io_metrics = IOMetrics(records_in=3)
    task.invokable = type("Invokable", (), {"final_state_handle": "state-handle"})()
    task.report(ExecutionState.FINISHED)
    harness.deliver()
    await asyncio.sleep(0.01)
    final = harness.jobmanager.updates[-1]
    assert (final.state, final.jobmanager_id, final.state_handle) == ("FINISHED", "jm-1", "state-handle")
    assert final.io_metrics == IOMetrics(records_in=3)
    assert "e-1" not in harness.table.tasks, "ended: gone from the table..."
    assert harness.table.running_executions() == ["e-1"], "...but reported while its FINISHED is unanswered"
    harness.jobmanager.release.set()
    await harness.mailbox.settle()
    assert harness.table.running_executions() == []


async def test_a_final_state_nobody_answers_is_sent_a_bounded_number_of_times(harness: Harness) -> None:
    task = harness.task("e-1")
    harness.jobmanager.silent = True
    task.missing_partitions = ["p-1"]
    task.report(ExecutionState.FAILED, "boom")
    harness.deliver()
    await harness.mailbox.settle()
    assert len(harness.jobmanager.updates) == FINAL_STATE_ATTEMPTS
    assert {(u.state, u.error, tuple(u.missing_partitions)) for u in harness.jobmanager.updates} == {
        ("FAILED", "boom", ("p-1",))
    }
    assert harness.table.running_executions() == [], "given up: the JobManager reconciles it as lost"


async def test_a_task_the_jobmanager_no_longer_runs_is_cancelled(harness: Harness) -> None:
    task = harness.task("e-1")
    harness.jobmanager.answer = Acknowledge(ok=False, reason="unknown attempt")
    task.report(ExecutionState.RUNNING)
    harness.deliver()
    await harness.mailbox.settle()
    assert task.cancelled == 1


async def test_a_task_that_ignores_cancellation_is_interrupted_then_abandoned_as_canceled(harness: Harness) -> None:
    task = harness.task("e-1")
    assert not harness.table.cancel("unknown")
    assert harness.table.cancel("e-1")
    assert task.cancelled == 1 and task.interrupted == 0
    for _ in range(5):  # every cancellation interval until the timeout
        assert harness.mailbox.fire_timers() == [0.5]
        harness.clock.now += 0.5
    assert task.interrupted == 5
    harness.clock.now += 0.5
    harness.mailbox.fire_timers()
    await harness.mailbox.settle()
    assert task.interrupted == 5 and harness.mailbox.timers == []
    assert [update.state for update in harness.jobmanager.updates] == ["CANCELED"]
    assert harness.table.running_executions() == []
    task.report(ExecutionState.CANCELED)  # the abandoned thread ends after all: not reported twice
    harness.deliver()
    await harness.mailbox.settle()
    assert len(harness.jobmanager.updates) == 1


async def test_a_cancelled_task_whose_thread_ended_is_not_interrupted(harness: Harness) -> None:
    task = harness.task("e-1")
    harness.table.cancel("e-1")
    task.alive = False
    harness.mailbox.fire_timers()
    assert task.interrupted == 0 and harness.mailbox.timers == []


async def test_registering_with_a_new_jobmanager_cancels_the_tasks_of_the_old_one(harness: Harness) -> None:
    old, current = harness.task("e-1", "jm-1"), harness.task("e-2", "jm-2")
    harness.table.cancel_not_deployed_by("jm-2")
    assert (old.cancelled, current.cancelled) == (1, 0)
    harness.table.cancel_all("TaskManager tm-1 lost JobManager jm-2")
    assert (old.cancelled, current.cancelled) == (2, 1)


async def test_a_task_thread_reports_through_the_mailbox_not_into_the_table(harness: Harness) -> None:
    task = harness.task("e-1")
    thread = threading.Thread(target=task.report, args=(ExecutionState.RUNNING,))
    thread.start()
    thread.join()
    assert harness.jobmanager.updates == [] and len(harness.posted) == 1
    assert harness.posted[0] == TaskStateChanged(task, ExecutionState.RUNNING, None)


async def test_a_task_cancelled_on_the_taskmanagers_own_says_why_in_its_canceled(harness: Harness) -> None:
    """The JobManager fails an attempt cancelled without its asking; the reason goes with it."""
    own, asked = harness.task("e-1"), harness.task("e-2")
    harness.table.cancel_all("TaskManager tm-1 lost JobManager jm-1")
    harness.table.cancel("e-2")  # the JobManager's CancelTask came too: still the first reason
    own.report(ExecutionState.CANCELED)
    asked.report(ExecutionState.CANCELED)
    harness.deliver()
    await harness.mailbox.settle()
    assert [(u.execution_id, u.state, u.error) for u in harness.jobmanager.updates] == [
        ("e-1", "CANCELED", "TaskManager tm-1 lost JobManager jm-1"),
        ("e-2", "CANCELED", "TaskManager tm-1 lost JobManager jm-1"),
    ]


async def test_a_task_the_jobmanager_cancelled_reports_canceled_without_a_reason(harness: Harness) -> None:
    task = harness.task("e-1")
    harness.table.cancel("e-1")
    task.report(ExecutionState.CANCELED)
    harness.deliver()
    await harness.mailbox.settle()
    assert [(u.state, u.error) for u in harness.jobmanager.updates] == [("CANCELED", None)]


async def test_occupied_slots_list_the_slots_of_live_tasks_until_they_end(harness: Harness) -> None:
    """What registrations and heartbeats report (Flink's SlotReport): a cancelled task
    holds its slot until its thread ends; tasks sharing a slot count it once."""
    assert harness.table.occupied_slots() == []
    for execution_id, slot_index in (("e-1", 2), ("e-2", 0), ("e-3", 2)):
        task = FakeTask(descriptor(execution_id, slot_index=slot_index), report=harness.table.report_from_task_thread)
        harness.table.start(task)
    assert harness.table.occupied_slots() == [0, 2]
    harness.table.cancel("e-2")
    assert harness.table.occupied_slots() == [0, 2]  # cancelled, still winding down
    harness.table.get("e-2").report(ExecutionState.CANCELED)  # type: ignore[union-attr]
    harness.deliver()
    assert harness.table.occupied_slots() == [2]


async def test_the_updates_of_one_mailbox_turn_leave_as_one_message_in_their_order(harness: Harness) -> None:
    first, second = harness.task("e-1"), harness.task("e-2")
    first.report(ExecutionState.INITIALIZING)
    second.report(ExecutionState.INITIALIZING)
    first.report(ExecutionState.RUNNING)
    first.report(ExecutionState.FINISHED)
    second.report(ExecutionState.RUNNING)
    for change in list(harness.posted):  # handled in one turn: nothing leaves before it ends
        harness.table.state_changed(change)
    harness.posted.clear()
    await harness.mailbox.settle()
    assert harness.jobmanager.updates == []
    harness.mailbox.end_turn()
    await harness.mailbox.settle()
    assert harness.jobmanager.batches == [5]
    assert [(u.execution_id, u.state) for u in harness.jobmanager.updates] == [
        ("e-1", "INITIALIZING"),
        ("e-2", "INITIALIZING"),
        ("e-1", "RUNNING"),
        ("e-1", "FINISHED"),
        ("e-2", "RUNNING"),
    ]
    assert harness.table.running_executions() == ["e-2"]


async def test_an_entry_the_jobmanager_failed_on_is_resent_alone_when_final(harness: Harness) -> None:
    """An entry answered with an RpcError (the JobManager's handler raised on it) is handled
    as a lone update whose ask failed: a final state is sent again, any other is not."""
    first, second = harness.task("e-1"), harness.task("e-2")
    harness.jobmanager.answers = [RpcError(error="boom"), RpcError(error="boom"), Acknowledge()]
    first.report(ExecutionState.FAILED, "broken")
    second.report(ExecutionState.RUNNING)
    harness.deliver()
    await harness.mailbox.settle()
    assert harness.jobmanager.batches == [2, 1]
    assert [(u.execution_id, u.state) for u in harness.jobmanager.updates] == [
        ("e-1", "FAILED"),
        ("e-2", "RUNNING"),
        ("e-1", "FAILED"),
    ]
    assert harness.table.running_executions() == ["e-2"], "e-1's FAILED was answered the second time"
    assert (first.cancelled, second.cancelled) == (0, 0)


async def test_a_refused_entry_cancels_its_own_task_only(harness: Harness) -> None:
    first, second = harness.task("e-1"), harness.task("e-2")
    harness.jobmanager.answers = [Acknowledge(ok=False, reason="unknown attempt"), Acknowledge()]
    first.report(ExecutionState.RUNNING)
    second.report(ExecutionState.RUNNING)
    harness.deliver()
    await harness.mailbox.settle()
    assert harness.jobmanager.batches == [2]
    assert (first.cancelled, second.cancelled) == (1, 0)
