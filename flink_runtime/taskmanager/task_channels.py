"""What a task's thread asks of the JobManager and of other TaskManagers.

A task runs in its own thread; the RPC belongs to the TaskExecutor's event loop. These
callables (made in the mailbox, called in the task's thread) hand each request to that
loop and block the task until the answer comes: its next input split, the news that
one of its partitions is ready, a slice of a partition another TaskManager serves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from flink_runtime.io.partitions import partition_size_bytes
from flink_runtime.io.splits import InputSplit
from flink_runtime.rpc.messages import (
    Acknowledge,
    Message,
    NextInputSplit,
    RequestNextInputSplit,
    ScheduleOrUpdateConsumers,
    TaskDeploymentDescriptor,
)
from flink_runtime.taskmanager.mailbox import Transport


class TaskChannels:
    def __init__(
        self,
        transport: Transport,
        own_address: Callable[[], str],
        host: str,
        jobmanager_address: Callable[[], str],
        ask_timeout: float,
    ) -> None:
        """own_address, jobmanager_address: read at each call (the RPC binds its port at
        start; the JobManager may change with a new leader)."""
        self._transport = transport
        self._own_address = own_address
        self._host = host
        self._jobmanager_address = jobmanager_address
        self._ask_timeout = ask_timeout
        # (loop, its blocking ask): made once, not three times per task deployed.
        self._blocking: tuple[asyncio.AbstractEventLoop, Callable[[str, Message], Message]] | None = None

    def blocking_ask(self) -> Callable[[str, Message], Message]:
        """`ask(address, message)` for a task's thread (call this in the event loop)."""
        loop = asyncio.get_running_loop()
        if self._blocking is not None and self._blocking[0] is loop:
            return self._blocking[1]

        def ask(address: str, message: Message) -> Message:
            coroutine = self._transport.ask(address, message, self._ask_timeout)
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

        self._blocking = (loop, ask)
        return ask

    def split_requester(
        self, descriptor: TaskDeploymentDescriptor, ask: Callable[[str, Message], Message]
    ) -> Callable[[int | None], InputSplit | None]:
        """The task's RequestNextInputSplit over `ask` (blocking_ask's, looked up once per
        task by the caller)."""

        def next_split(completed_split: int | None = None) -> InputSplit | None:
            request = RequestNextInputSplit(
                job_id=descriptor.job_id,
                execution_id=descriptor.execution_id,
                jobmanager_id=descriptor.jobmanager_id,
                host=self._host,
                completed_split=completed_split,
            )
            answer = ask(self._jobmanager_address(), request)  # an RpcException if refused: the task fails
            assert isinstance(answer, NextInputSplit)
            return answer.split

        return next_split

    def partition_notifier(
        self, descriptor: TaskDeploymentDescriptor, ask: Callable[[str, Message], Message]
    ) -> Callable[[str, str], None]:
        """The task's ScheduleOrUpdateConsumers over `ask`."""

        def notify(partition_id: str, location: str) -> None:
            message = ScheduleOrUpdateConsumers(
                job_id=descriptor.job_id,
                execution_id=descriptor.execution_id,
                jobmanager_id=descriptor.jobmanager_id,
                partition_id=partition_id,
                location=location,
                data_address=self._own_address(),
                size_bytes=partition_size_bytes(location),
            )
            answer = ask(self._jobmanager_address(), message)
            if isinstance(answer, Acknowledge) and not answer.ok:
                raise RuntimeError(f"JobManager refused partition {partition_id}: {answer.reason}")

        return notify
