"""Why the JobManager refuses a request about a job. Each kind says what went wrong in
the JobManager's terms; rest/ decides which HTTP status answers it."""

from __future__ import annotations


class JobRequestError(Exception):
    """A request about a job (savepoint, stop, checkpoint statistics) was refused."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobNotFound(JobRequestError):
    """No job (running or archived) has this id."""


class RequestNotFound(JobRequestError):
    """The job has no savepoint or stop request with this id."""


class JobNotRunning(JobRequestError):
    """The operation needs a RUNNING job."""


class OperationInProgress(JobRequestError):
    """One savepoint or stop at a time per job."""


class InvalidRequest(JobRequestError):
    """The request itself cannot be carried out (e.g. a savepoint target that cannot be written)."""
