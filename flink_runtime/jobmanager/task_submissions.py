"""The deployments of one JobManager mailbox turn, sent to each TaskManager as one message.

A finished subtask frees its slot and the next queued subtask is deployed into it in the
same turn; the TaskManagers report their state changes in batches (task_reports.py), so
one turn deploys several subtasks, often to the same TaskManager. `TaskSubmissions` holds
the SubmitTasks of a turn per TaskManager address and, at the end of the turn, sends them
as one SubmitTasks (or a lone SubmitTask when there is one), then hands each deployment
its own answer: a TaskOperationResult, or the error its ask would have raised alone.

Per address, messages keep the order they were made in: anything else sent to a
TaskManager (a CancelTask, say) first flushes the submissions queued for it, so a task is
never cancelled there before it was submitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flink_runtime.rpc.messages import Message, RpcError, SubmitTask, SubmitTasks, TaskOperationResults
from flink_runtime.rpc.service import MessageTooLarge, RpcException

Callback = Callable[[Any, "BaseException | None"], None]
# (address, message, on_done): one ask, answered in the mailbox.
Ask = Callable[[str, Message, Callback], None]

# A turn deploying more than this to one TaskManager sends several messages: one message
# stays well below pekko.framesize and a TaskManager's turn bounded.
MAX_BATCH = 64


class TaskSubmissions:
    def __init__(self, ask: Ask, at_end_of_turn: Callable[[Callable[[], None]], None]) -> None:
        """ask: sends one message to a TaskManager and calls back with its answer or error;
        at_end_of_turn(function): runs function once the mailbox ran dry."""
        self._ask = ask
        self._at_end_of_turn = at_end_of_turn
        self._queued: dict[str, list[tuple[SubmitTask, Callback]]] = {}
        # Sent so far: messages, and the deployments they carried.
        self.messages_sent = 0
        self.tasks_sent = 0

    def submit(self, address: str, message: SubmitTask, on_done: Callback) -> None:
        """Queue a deployment; it leaves with the others of this turn to that TaskManager."""
        if not self._queued:
            self._at_end_of_turn(self.flush_all)
        queued = self._queued.setdefault(address, [])
        queued.append((message, on_done))
        if len(queued) >= MAX_BATCH:
            self.flush(address)

    def flush(self, address: str) -> None:
        """Send what is queued for one TaskManager now (before another message to it)."""
        queued = self._queued.pop(address, None)
        if queued:
            self._send(address, queued)

    def flush_all(self) -> None:
        queued, self._queued = self._queued, {}
        for address, entries in queued.items():
            self._send(address, entries)

    def _send(self, address: str, entries: list[tuple[SubmitTask, Callback]]) -> None:
        self.messages_sent += 1
        self.tasks_sent += len(entries)
        if len(entries) == 1:
            message, on_done = entries[0]
            self._ask(address, message, on_done)
            return
        batch = SubmitTasks(tasks=[message for message, _ in entries])
        self._ask(address, batch, lambda answer, error: self._answered(address, entries, answer, error))

    def _answered(
        self,
        address: str,
        entries: list[tuple[SubmitTask, Callback]],
        answer: Any,
        error: BaseException | None,
    ) -> None:
        if isinstance(error, MessageTooLarge):
            for entry in entries:  # too much for one message: each alone
                self._send(address, [entry])
            return
        if error is None and not (isinstance(answer, TaskOperationResults) and len(answer.results) == len(entries)):
            error = RpcException(
                f"SubmitTasks to {address}: unexpected answer {type(answer).__name__} to {len(entries)} tasks"
            )
        for index, (message, on_done) in enumerate(entries):
            if error is not None:
                on_done(None, error)
                continue
            result = answer.results[index]
            if isinstance(result, RpcError):
                on_done(None, RpcException(f"SubmitTask to {address} failed: {result.error}"))
            elif result.execution_id != message.descriptor.execution_id:
                on_done(None, RpcException(f"SubmitTasks to {address}: answer {index} is about another task"))
            else:
                on_done(result, None)
