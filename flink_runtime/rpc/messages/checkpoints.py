"""Checkpoints: the JobManager triggers them on the tasks, which acknowledge or decline."""

from __future__ import annotations

from typing import Any

from flink_runtime.rpc.messages.base import FencedMessage, Message


class TriggerCheckpoint(Message):
    job_id: str
    execution_id: str
    checkpoint_id: int
    timestamp: float
    jobmanager_id: str = ""  # the sender's fencing token, as CancelTask's


class AcknowledgeCheckpoint(FencedMessage):
    job_id: str
    execution_id: str
    checkpoint_id: int
    # The task's operator state for this checkpoint (a state backend handle), if any.
    state_handle: dict[str, Any] | None = None


class DeclineCheckpoint(FencedMessage):
    job_id: str
    execution_id: str
    checkpoint_id: int
    reason: str
