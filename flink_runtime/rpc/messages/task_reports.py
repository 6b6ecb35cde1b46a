"""What a running task reports to the JobMaster that deployed it (fenced by its
JobManager run): its state changes, its input split requests, its finished partitions.
"""

from __future__ import annotations

from typing import Any

from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit
from flink_runtime.rpc.messages.base import Acknowledge, FencedMessage, Message, RpcError


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


class UpdateTaskExecutionStates(Message):
    """TM -> JM: the state updates a TaskExecutor's mailbox produced in one turn, in the
    order they happened, as one message (one send and one answer instead of one each).

    Each entry is Flink's UpdateTaskExecutionState and is taken as if it came alone: fenced
    on its own (`jobmanager_id`), applied in list order (a task's INITIALIZING, RUNNING and
    FINISHED keep theirs), answered on its own. Entries may concern several jobs.
    """

    updates: list[UpdateTaskExecutionState]


class AcknowledgeTaskExecutionStates(Message):
    """JM -> TM: the answer to each entry of an UpdateTaskExecutionStates, in its order:
    what the entry would have been answered alone (Acknowledge), or the RpcError of a
    handler that raised on it (the TaskManager resends a final state then, as after a
    failed ask)."""

    answers: list[Acknowledge | RpcError] = []


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
    # The bytes of its committed files (-1: not known): what the scheduler decides a
    # consumer's parallelism from (scheduler/adaptive_parallelism.py).
    size_bytes: int = -1
