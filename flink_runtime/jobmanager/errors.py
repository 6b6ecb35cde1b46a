"""Why the JobManager refuses a request. Each kind says what went wrong in the
JobManager's terms (as Flink's FlinkJobNotFoundException, JobCancellationException...);
rest/errors.py is the one place that decides which HTTP status answers each."""

from __future__ import annotations


class JobRequestError(Exception):
    """A request about a job or the cluster (submit, cancel, savepoint, statistics) was refused."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobNotFound(JobRequestError):
    """No job (running or archived) has this id."""


class VertexNotFound(JobRequestError):
    """The job has no vertex (or subtask) with this id."""


class TaskManagerNotFound(JobRequestError):
    """No registered TaskManager has this id."""


class RequestNotFound(JobRequestError):
    """The job has no savepoint or stop request with this id."""


class JobNotRunning(JobRequestError):
    """The operation needs a RUNNING job."""


class JobAlreadyEnded(JobNotRunning):
    """The job reached a terminal state; it cannot be cancelled any more."""


class OperationInProgress(JobRequestError):
    """One savepoint or stop at a time per job."""


class InvalidRequest(JobRequestError):
    """The request itself cannot be carried out (e.g. a savepoint target that cannot be written)."""


class DuplicateJob(JobRequestError):
    """A job with this id was submitted already."""


class NotAccepted(JobRequestError):
    """The JobManager did not take the request in time (busy, or a standby): retry."""


class TaskReportRefused(Exception):
    """A task's message (state update, split request, finished partition, checkpoint
    answer) is refused: deployed by another JobManager run, about an unknown job, or
    from an attempt that no longer runs. The message says which; the task's
    TaskManager gets it in its Acknowledge / RpcError."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
