"""What the JobManager sends its registered TaskManagers, and how their answers come back.

A turn's deployments to one TaskManager leave together at the end of the turn
(task_submissions.py); anything else sent there first flushes them, so a task is never
cancelled on a TaskManager before it was submitted to it. Nothing is sent to an address
where no TaskManager is registered any more, and a connection an ask opened to one
removed meanwhile is closed once the ask ends: an ask leaves the mailbox before it is
sent, so one queued just before a removal opens a new connection to the removed
address, and ZeroMQ would keep redialling it for the JobManager's lifetime, descriptors
piling up as TaskManagers come and go (tests/integration/test_taskmanager_churn.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from flink_runtime.jobmanager.task_submissions import TaskSubmissions
from flink_runtime.rpc.messages import Message, ReleasePartitions, SubmitTask, TaskOperationResult
from flink_runtime.rpc.service import RpcException, RpcService

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


class MessagesHost(Protocol):
    """What the messages use of the JobManager that sends them."""

    rpc: RpcService
    jobmanager_id: str

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...
    def at_end_of_turn(self, function: Callable[[], None]) -> None: ...


class TaskManagerMessages:
    def __init__(
        self,
        host: MessagesHost,
        ask_timeout: float,
        is_registered: Callable[[str], bool],
        on_deployment_accepted: Callable[[str, str, float], None],
    ) -> None:
        """is_registered(address): whether a TaskManager is registered there now;
        on_deployment_accepted(address, execution_id, at): the TaskManager there took the
        task, so its heartbeat reports must list it from now on (reconciliation)."""
        self._host = host
        self._ask_timeout = ask_timeout
        self._is_registered = is_registered
        self._on_deployment_accepted = on_deployment_accepted
        self.submissions = TaskSubmissions(self._ask, host.at_end_of_turn)  # a turn's, per TaskManager

    def ask(self, address: str, message: Message, on_done: Callback) -> None:
        if isinstance(message, SubmitTask):
            # Leaves at the end of the turn with the turn's other deployments there.
            self.submissions.submit(address, message, self._deployment_answered(address, message, on_done))
            return
        self.submissions.flush(address)  # a task is submitted before it is cancelled
        self._ask(address, message, on_done)

    def ask_with_timeout(self, address: str, message: Message, timeout: float, on_done: Callback) -> None:
        """An ask of its own timeout, sent at once (a heartbeat)."""
        self._host.run_async(self._host.rpc.ask(address, message, timeout), self._closing(address, on_done))

    def tell(self, address: str, message: Message) -> None:
        self.submissions.flush(address)  # a task is submitted before it is cancelled
        if self._is_registered(address):
            self._host.rpc.tell(address, message)
        else:  # gone: a tell would only open a connection nobody ever closes
            log.debug("Not sending %s to %s: no TaskManager is registered there", type(message).__name__, address)

    def blocking_ask(self) -> Callable[[str, Message], Message]:
        """An ask of a registered TaskManager to call from a worker thread, waiting for the
        answer: RpcException when it is not registered (at once, not after a timeout), gone,
        or silent past pekko.ask.timeout. Made in the mailbox: it captures the loop the RPC
        (and the registry it checks) runs on."""
        loop = asyncio.get_running_loop()

        async def ask_registered(address: str, message: Message) -> Message:
            if not self._is_registered(address):
                raise RpcException(f"no TaskManager is registered at {address} (any more)")
            try:
                return await self._host.rpc.ask(address, message, self._ask_timeout)
            finally:
                self.disconnect_if_unregistered(address)

        def ask(address: str, message: Message) -> Message:
            return asyncio.run_coroutine_threadsafe(ask_registered(address, message), loop).result()

        return ask

    def release_partitions(self, addresses: Iterable[str], job_id: str, data_namespace: str = "") -> None:
        jobmanager_id = self._host.jobmanager_id
        message = ReleasePartitions(job_id=job_id, data_namespace=data_namespace, jobmanager_id=jobmanager_id)
        for address in addresses:
            self._host.rpc.tell(address, message)

    def disconnect_if_unregistered(self, address: str) -> None:
        """Close a connection an ask opened to a TaskManager removed meanwhile."""
        if not self._is_registered(address):
            self._host.rpc.disconnect(address)

    def _ask(self, address: str, message: Message, on_done: Callback) -> None:
        self.ask_with_timeout(address, message, self._ask_timeout, on_done)

    def _closing(self, address: str, on_done: Callback) -> Callback:
        def answered(answer: Any, error: BaseException | None) -> None:
            self.disconnect_if_unregistered(address)
            on_done(answer, error)

        return answered

    def _deployment_answered(self, address: str, message: SubmitTask, on_done: Callback) -> Callback:
        def answered(answer: Any, error: BaseException | None) -> None:
            if isinstance(answer, TaskOperationResult) and answer.success:
                self._on_deployment_accepted(address, message.descriptor.execution_id, time.monotonic())
            on_done(answer, error)

        return answered
