"""The TaskManager's task table: the tasks it runs, and their state updates to the JobManager.

Every state change a task reports from its thread comes into the TaskExecutor's
mailbox (`TaskStateChanged`) and leaves as an UpdateTaskExecutionState, in the order it
happened over one connection: those of one mailbox turn together, in one
UpdateTaskExecutionStates message, which the JobManager answers entry by entry. A
task that ended leaves the table at once but stays "in flight" until the JobManager
answers its final state, so heartbeat reports keep listing it meanwhile and the
JobManager never takes it for missing (heartbeat/reconciliation.py). A final state is
sent up to FINAL_STATE_ATTEMPTS times; if none is answered, the task drops out of the
reports and the JobManager fails it rather than wait for it for ever.

Cancellation is cooperative first (`task.cancel()`), then forceful: `task.interrupt()`
every task.cancellation.interval until its thread ends, and after
task.cancellation.timeout the thread is abandoned and CANCELED reported for it.

`TaskTable` owns the table and the in-flight set; it is given the mailbox it runs in,
how to ask the current JobManager, and how a task thread posts into the mailbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeTaskExecutionStates,
    Message,
    TaskDeploymentDescriptor,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from flink_runtime.rpc.service import MessageTooLarge
from flink_runtime.taskmanager.mailbox import Mailbox

log = logging.getLogger(__name__)

# How often a task's final state is sent before giving up on the JobManager answering
# (each send waits pekko.ask.timeout).
FINAL_STATE_ATTEMPTS = 5


class RunningTask(Protocol):
    """What the table needs of a task (taskmanager/task.py's Task; a simulated one in tests)."""

    descriptor: TaskDeploymentDescriptor
    execution_id: str
    job_id: str
    # Set before the final state is reported.
    io_metrics: IOMetrics | None
    missing_partitions: list[str]
    invokable: Any

    def start(self) -> None: ...

    def cancel(self) -> None: ...

    def interrupt(self) -> None: ...

    def is_alive(self) -> bool: ...


@dataclass
class TaskStateChanged:
    """Posted from a task's thread into the TaskExecutor's mailbox."""

    task: RunningTask
    state: ExecutionState
    error: str | None


# Asks the JobManager this TaskManager is registered with now (waiting pekko.ask.timeout).
AskJobManager = Callable[[Message], Awaitable[Message]]


class TaskTable:
    def __init__(
        self,
        mailbox: Mailbox,
        ask_jobmanager: AskJobManager,
        post: Callable[[TaskStateChanged], None],
        *,
        cancellation_interval: float,
        cancellation_timeout: float,
        name: str = "TaskManager",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """post: puts a TaskStateChanged into the mailbox from any thread; the mailbox
        hands it back to `state_changed`."""
        self._mailbox = mailbox
        self._ask_jobmanager = ask_jobmanager
        self._post = post
        self._cancellation_interval = cancellation_interval
        self._cancellation_timeout = cancellation_timeout
        self._name = name
        self._clock = clock
        self.tasks: dict[str, RunningTask] = {}
        # Tasks that ended and whose final state the JobManager has not answered yet: still
        # reported in heartbeats, so the JobManager never takes them for missing meanwhile.
        self.final_states_in_flight: set[str] = set()
        # Why this TaskManager cancelled a task on its own (not at the JobManager's asking):
        # sent as the error of its CANCELED, which the JobManager then takes for a failure.
        self._cancel_reasons: dict[str, str] = {}
        # Updates of this mailbox turn, sent as one message when it ends (_send_unsent).
        self._unsent: list[_Report] = []

    def __contains__(self, execution_id: str) -> bool:
        return execution_id in self.tasks

    def get(self, execution_id: str) -> RunningTask | None:
        return self.tasks.get(execution_id)

    def start(self, task: RunningTask) -> None:
        self.tasks[task.execution_id] = task
        task.start()

    def slot_occupant(self, slot_index: int, allocation_id: str) -> RunningTask | None:
        """A live task in this slot under another allocation (Flink's TaskSlotTable: a slot
        belongs to one allocation at a time; tasks sharing it carry its allocation id). A
        task stays here until its thread ends, so a cancelled one holds its slot till then."""
        for task in self.tasks.values():
            if task.descriptor.slot_index == slot_index and task.descriptor.allocation_id != allocation_id:
                return task
        return None

    def occupied_slots(self) -> list[int]:
        """Slots held by live tasks (a cancelled one holds its slot until its thread ends),
        as registrations and heartbeats report them (Flink's SlotReport)."""
        return sorted({task.descriptor.slot_index for task in self.tasks.values()})

    def running_executions(self) -> list[str]:
        """What a heartbeat answer reports: running tasks and unanswered final states."""
        return [*self.tasks, *self.final_states_in_flight]

    # -- cancellation ------------------------------------------------------------------------------

    def cancel(self, execution_id: str) -> bool:
        """Cancel a task, interrupting it until its thread ends; False if unknown."""
        task = self.tasks.get(execution_id)
        if task is None:
            return False
        task.cancel()
        deadline = self._clock() + self._cancellation_timeout
        self._mailbox.schedule_once(self._cancellation_interval, self._interrupt_until_dead, task, deadline)
        return True

    def cancel_all(self, reason: str) -> None:
        for task in self.tasks.values():
            self._cancel_on_own(task, reason)

    def _cancel_on_own(self, task: RunningTask, reason: str) -> None:
        self._cancel_reasons.setdefault(task.execution_id, reason)
        task.cancel()

    def cancel_not_deployed_by(self, jobmanager_id: str) -> None:
        """Tasks of a JobManager that is gone: the new one refuses whatever they report and
        may already run their job again from its latest checkpoint."""
        for task in self.tasks.values():
            if task.descriptor.jobmanager_id != jobmanager_id:
                log.warning(
                    "%s: cancelling %s, deployed by JobManager %s (now registered with %s)",
                    self._name,
                    task.descriptor.task_name,
                    task.descriptor.jobmanager_id,
                    jobmanager_id,
                )
                self._cancel_on_own(
                    task,
                    f"deployed by JobManager {task.descriptor.jobmanager_id}, and this TaskManager "
                    f"is now registered with {jobmanager_id}",
                )

    def _interrupt_until_dead(self, task: RunningTask, deadline: float) -> None:
        if not task.is_alive() or self.tasks.get(task.execution_id) is not task:
            return
        if self._clock() >= deadline:
            log.error(
                "%s ignored cancellation past task.cancellation.timeout; its thread is abandoned",
                task.descriptor.task_name,
            )
            self.state_changed(TaskStateChanged(task, ExecutionState.CANCELED, None))
            return
        task.interrupt()
        self._mailbox.schedule_once(self._cancellation_interval, self._interrupt_until_dead, task, deadline)

    # -- state updates -----------------------------------------------------------------------------

    def report_from_task_thread(self, task: RunningTask, state: ExecutionState, error: str | None) -> None:
        """A task's `report` callback (taskmanager/task.py), called in its thread."""
        self._post(TaskStateChanged(task, state, error))

    def state_changed(self, change: TaskStateChanged) -> None:
        """In the mailbox: a task's new state, sent to the JobManager at the end of the turn."""
        task = change.task
        if self.tasks.get(task.execution_id) is not task:
            return  # already reported terminal (abandoned after a cancellation timeout)
        final = change.state.is_terminal
        error = change.error
        if final:
            del self.tasks[task.execution_id]
            self.final_states_in_flight.add(task.execution_id)
            own_reason = self._cancel_reasons.pop(task.execution_id, None)
            if change.state is ExecutionState.CANCELED and error is None:
                error = own_reason
        update = UpdateTaskExecutionState(
            job_id=task.job_id,
            execution_id=task.execution_id,
            jobmanager_id=task.descriptor.jobmanager_id,
            state=change.state.value,
            error=error,
            state_handle=getattr(task.invokable, "final_state_handle", None)
            if change.state is ExecutionState.FINISHED
            else None,
            io_metrics=task.io_metrics if final else None,
            missing_partitions=task.missing_partitions if change.state is ExecutionState.FAILED else [],
        )
        self._unsent.append(_Report(task, update, final))
        if len(self._unsent) == 1:
            self._mailbox.at_end_of_turn(self._send_unsent)

    def _send_unsent(self) -> None:
        reports, self._unsent = self._unsent, []
        self._send(reports)

    def _send(self, reports: list[_Report]) -> None:
        """One UpdateTaskExecutionStates for what the turn produced (or what is resent).
        Batches leave in mailbox order over one connection and the JobManager applies
        each in list order, so it sees a task's updates in the order they happened."""
        for report in reports:
            report.attempts += 1
        batch = UpdateTaskExecutionStates(updates=[report.update for report in reports])
        self._mailbox.run_async(
            self._ask_jobmanager(batch), lambda answer, error: self._answered(reports, answer, error)
        )

    def _answered(self, reports: list[_Report], answer: Message | None, error: BaseException | None) -> None:
        """In the mailbox: each entry's answer, handled as a lone update's answer was. A
        final state not delivered (no answer, or the JobManager's handler raised on it) is
        sent again, up to FINAL_STATE_ATTEMPTS times; any other update is sent once."""
        if isinstance(error, MessageTooLarge) and len(reports) > 1:
            for report in reports:  # too much for one message: each alone, no attempt spent
                report.attempts -= 1
                self._send([report])
            return
        outcomes = _outcomes(len(reports), answer, error)
        resend = []
        for report, outcome in zip(reports, outcomes, strict=True):
            update = report.update
            if isinstance(outcome, str):
                if report.final and report.attempts < FINAL_STATE_ATTEMPTS:
                    resend.append(report)
                    continue
                log.warning("state update %s %s not delivered: %s", update.execution_id, update.state, outcome)
            elif not outcome.ok and not report.final:
                # The JobManager does not run this attempt (any more): nobody would use its output.
                task = report.task
                log.warning("%s: cancelling %s: %s", self._name, task.descriptor.task_name, outcome.reason)
                self._cancel_on_own(task, f"the JobManager refused its {update.state} update: {outcome.reason}")
            if report.final:
                self.final_states_in_flight.discard(update.execution_id)
        if resend:
            self._send(resend)


@dataclass
class _Report:
    """An update on its way to the JobManager."""

    task: RunningTask
    update: UpdateTaskExecutionState
    final: bool
    attempts: int = 0  # sends so far


def _outcomes(count: int, answer: Message | None, error: BaseException | None) -> list[Acknowledge | str]:
    """Each entry's Acknowledge, or why it was not delivered."""
    if error is not None:
        return [str(error)] * count
    if not isinstance(answer, AcknowledgeTaskExecutionStates) or len(answer.answers) != count:
        return [f"unexpected answer {type(answer).__name__}"] * count
    return [
        entry if isinstance(entry, Acknowledge) else f"the JobManager failed on it: {entry.error}"
        for entry in answer.answers
    ]
