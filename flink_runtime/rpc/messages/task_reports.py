"""What a running task reports to the JobMaster that deployed it (fenced by its
JobManager run): its state changes, its input split requests, its finished partitions.
"""

from __future__ import annotations

from typing import Any

from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit
from flink_runtime.rpc.messages.base import FencedMessage, Message


class UpdateTaskExecutionState(FencedMessage):
    job_id: str
    execution_id: str
    state: str  # an ExecutionState name
    error: str | None = None
    # With FINISHED: the handle of the task's final operator state snapshot, if it has state.
    state_handle: dict[str, Any] | None = None
    # With a final state: what the attempt read and wrote (None from senders that predate it).
    io_metrics: IOMetrics | None = None
    # With FAILED: finished partitions (ids) the task could not fetch from the TaskManager
    # that produced them; their producers run again (Flink's PartitionNotFoundException).
    missing_partitions: list[str] = []


class RequestNextInputSplit(FencedMessage):
    job_id: str
    execution_id: str
    host: str | None = None
    # The split this subtask asked for last, now completed: its output is committed
    # (chunks in the result partitions, sink staging), so it is never handed out again.
    completed_split: int | None = None


class NextInputSplit(Message):
    split: InputSplit | None = None


class ScheduleOrUpdateConsumers(FencedMessage):
    job_id: str
    # The producing attempt: only the current attempt of the partition's producer may
    # declare it finished.
    execution_id: str
    partition_id: str
    location: str  # where the committed partition can be read
    # The producing TaskManager's RPC address: where consumers on other TaskManagers fetch it.
    data_address: str = ""
