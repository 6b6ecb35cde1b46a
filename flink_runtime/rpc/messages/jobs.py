"""Jobs, as a client submits and cancels them, and the JobStatusChanged log."""

from __future__ import annotations

from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.rpc.messages.base import Message


class SubmitJob(Message):
    job_graph: JobGraph


class Success(Message):
    """The job was accepted and its sources run."""

    job_id: str


class JobSubmissionFailure(Message):
    job_id: str
    reason: str
    # "invalid" (the graph is wrong), "duplicate" (job id in use), "failed" (ended early)
    kind: str = "failed"


class CancelJob(Message):
    job_id: str


class CancellationSuccess(Message):
    job_id: str


class CancellationFailure(Message):
    job_id: str
    reason: str


class JobStatusChanged(Message):
    job_id: str
    old_state: str
    new_state: str
    timestamp: float  # seconds since the epoch
