"""The deployments of a JobManager mailbox turn go to each TaskManager as one SubmitTasks
(protocol 6), and each is answered as if it had come alone.

TaskManager side: a real TaskExecutor on real RPC (FakeTasks through its `create_task`
seam), asked by a scripted JobManager. JobManager side: TaskSubmissions, whose sends and
turn ends the test drives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flink_runtime.jobmanager.task_submissions import MAX_BATCH, TaskSubmissions
from flink_runtime.rpc.endpoint import RpcEndpoint
from flink_runtime.rpc.messages import (
    Acknowledge,
    CancelTask,
    Message,
    RpcError,
    SubmitTask,
    SubmitTasks,
    TaskOperationResult,
    TaskOperationResults,
)
from flink_runtime.rpc.service import MessageTooLarge, RpcException
from tests.unit.taskexecutor_fakes import descriptor
from tests.unit.test_slot_report import ScriptedJobManager, task_manager_of_fake_tasks


async def test_a_task_manager_answers_each_entry_of_a_batch_as_if_it_came_alone(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    jobmanager = ScriptedJobManager("jm-1")
    await jobmanager.start()
    endpoints.append(jobmanager)
    tm, started = await task_manager_of_fake_tasks(tmp_path, jobmanager)
    endpoints.append(tm)

    batch = SubmitTasks(
        tasks=[
            SubmitTask(descriptor=descriptor("a", allocation_id="alloc-a", slot_index=0)),
            SubmitTask(descriptor=descriptor("other-leader", jobmanager_id="jm-0", allocation_id="x", slot_index=1)),
            SubmitTask(descriptor=descriptor("no-such-slot", allocation_id="alloc-c", slot_index=7)),
            SubmitTask(descriptor=descriptor("a", allocation_id="alloc-a", slot_index=0)),  # twice in one batch
            SubmitTask(descriptor=descriptor("b", allocation_id="alloc-b", slot_index=1)),
        ]
    )
    # Sent before the TaskManager's registration is acknowledged, as a JobManager offering
    # its slots in the acknowledging handler may: the batch waits for it, as a lone one does.
    answer = await jobmanager.rpc.ask(tm.address, batch, 5.0)

    assert isinstance(answer, TaskOperationResults)
    ok, other_leader, no_slot, twice, ok_b = answer.results
    assert ok == TaskOperationResult(execution_id="a", success=True)
    assert isinstance(other_leader, TaskOperationResult) and not other_leader.success
    assert "registered with JobManager jm-1, not with jm-0" in other_leader.reason
    assert isinstance(no_slot, TaskOperationResult) and not no_slot.success
    assert "slot 7 does not exist" in no_slot.reason
    assert twice == TaskOperationResult(execution_id="a", success=False, reason="execution already deployed here")
    assert ok_b == TaskOperationResult(execution_id="b", success=True)
    assert [task.execution_id for task in started] == ["a", "b"]
    assert sorted(tm.tasks) == ["a", "b"]

    # The TaskManager serves on: a lone SubmitTask into a slot a batch entry took is refused.
    lone = SubmitTask(descriptor=descriptor("c", allocation_id="alloc-c", slot_index=0))
    refused = await jobmanager.rpc.ask(tm.address, lone, 2.0)
    assert isinstance(refused, TaskOperationResult) and not refused.success
    assert "occupied by noop a" in refused.reason


class Turns:
    """TaskSubmissions' surroundings: its asks recorded, its turn ends run on demand."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Message, Any]] = []
        self.turn_ends: list[Any] = []
        self.submissions = TaskSubmissions(
            lambda address, message, on_done: self.asked.append((address, message, on_done)),
            self.turn_ends.append,
        )
        self.answers: dict[str, tuple[Any, BaseException | None]] = {}

    def submit(self, address: str, execution_id: str) -> None:
        def on_done(answer: Any, error: BaseException | None) -> None:
            self.answers[execution_id] = (answer, error)

        self.submissions.submit(address, SubmitTask(descriptor=descriptor(execution_id)), on_done)

    def end_turn(self) -> None:
        ends, self.turn_ends[:] = list(self.turn_ends), []
        for end in ends:
            end()


def ids(message: Message) -> list[str]:
    if isinstance(message, SubmitTask):
        return [message.descriptor.execution_id]
    assert isinstance(message, SubmitTasks)
    return [task.descriptor.execution_id for task in message.tasks]


def test_a_turns_deployments_leave_as_one_message_per_task_manager() -> None:
    turns = Turns()
    for address, execution_id in [("tm-a", "1"), ("tm-b", "2"), ("tm-a", "3"), ("tm-a", "4")]:
        turns.submit(address, execution_id)
    assert turns.asked == []  # nothing leaves before the turn ends
    turns.end_turn()
    sent = {address: message for address, message, _ in turns.asked}
    assert isinstance(sent["tm-a"], SubmitTasks) and ids(sent["tm-a"]) == ["1", "3", "4"]
    assert isinstance(sent["tm-b"], SubmitTask) and ids(sent["tm-b"]) == ["2"]  # one alone: as before
    assert (turns.submissions.messages_sent, turns.submissions.tasks_sent) == (2, 4)

    # Each deployment gets its own answer: a refusal fails only its own task.
    (_, _, on_batch_answer) = next(entry for entry in turns.asked if entry[0] == "tm-a")
    on_batch_answer(
        TaskOperationResults(
            results=[
                TaskOperationResult(execution_id="1", success=True),
                TaskOperationResult(execution_id="3", success=False, reason="slot 0 is occupied"),
                RpcError(error="ValueError: boom"),
            ]
        ),
        None,
    )
    assert turns.answers["1"] == (TaskOperationResult(execution_id="1", success=True), None)
    assert turns.answers["3"] == (
        TaskOperationResult(execution_id="3", success=False, reason="slot 0 is occupied"),
        None,
    )
    answer, error = turns.answers["4"]
    assert answer is None and isinstance(error, RpcException) and "ValueError: boom" in str(error)


def test_another_message_to_a_task_manager_first_sends_its_queued_deployments() -> None:
    turns = Turns()
    turns.submit("tm-a", "1")
    turns.submit("tm-a", "2")
    turns.submissions.flush("tm-a")  # what ResourceManager.ask/tell_task_manager do first
    assert [ids(message) for _, message, _ in turns.asked] == [["1", "2"]]
    turns.end_turn()
    assert len(turns.asked) == 1  # nothing left to send at the turn's end


def test_a_large_turn_is_split_into_bounded_batches() -> None:
    turns = Turns()
    for number in range(MAX_BATCH + 1):
        turns.submit("tm-a", str(number))
    turns.end_turn()
    assert [len(ids(message)) for _, message, _ in turns.asked] == [MAX_BATCH, 1]


@pytest.mark.parametrize(
    ("answer", "error", "why"),
    [
        (None, RpcException("AskTimeoutError: no answer"), "no answer"),
        (Acknowledge(), None, "unexpected answer Acknowledge to 2 tasks"),
        (TaskOperationResults(results=[TaskOperationResult(execution_id="1", success=True)]), None, "unexpected"),
        (
            TaskOperationResults(
                results=[
                    TaskOperationResult(execution_id="1", success=True),
                    TaskOperationResult(execution_id="elsewhere", success=True),
                ]
            ),
            None,
            "about another task",
        ),
    ],
    ids=["ask-failed", "wrong-answer", "too-few-answers", "answer-of-another-task"],
)
def test_a_batch_not_answered_entry_by_entry_fails_its_deployments(
    answer: Message | None, error: BaseException | None, why: str
) -> None:
    turns = Turns()
    turns.submit("tm-a", "1")
    turns.submit("tm-a", "2")
    turns.end_turn()
    (_, _, on_answer) = turns.asked[0]
    on_answer(answer, error)
    second_answer, second_error = turns.answers["2"]
    assert second_answer is None and why in str(second_error)


def test_a_batch_too_large_for_one_message_is_sent_entry_by_entry() -> None:
    turns = Turns()
    turns.submit("tm-a", "1")
    turns.submit("tm-a", "2")
    turns.end_turn()
    (_, _, on_answer) = turns.asked[0]
    on_answer(None, MessageTooLarge("SubmitTasks is 9 MB, above pekko.framesize"))
    assert [ids(message) for _, message, _ in turns.asked[1:]] == [["1"], ["2"]]
    assert all(isinstance(message, SubmitTask) for _, message, _ in turns.asked[1:])
    assert turns.answers == {}  # still waiting for their own answers


def test_a_cancel_never_overtakes_its_submission_through_the_resource_manager() -> None:
    from tests.unit.jobmaster_fakes import resource_manager_on_a_fake_host

    manager, host = resource_manager_on_a_fake_host(lambda *args: None)
    sent: list[Message] = []
    messages = manager.messages
    messages._ask = lambda address, message, on_done: sent.append(message)  # type: ignore[method-assign]
    messages.submissions._ask = messages._ask
    messages._is_registered = lambda address: True
    manager.rpc.tell = lambda address, message: sent.append(message)  # type: ignore[attr-defined]
    messages.ask("tm-a", SubmitTask(descriptor=descriptor("1")), lambda answer, error: None)
    messages.tell("tm-a", CancelTask(execution_id="1", jobmanager_id="jm"))
    assert [type(message).__name__ for message in sent] == ["SubmitTask", "CancelTask"]
