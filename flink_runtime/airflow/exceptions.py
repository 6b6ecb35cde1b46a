"""What the provider raises: AirflowException subclasses carrying the JobManager's own words."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException

__all__ = [
    "FlinkRuntimeApiError",
    "FlinkRuntimeClusterUnreachable",
    "FlinkRuntimeException",
    "FlinkRuntimeInvalidInput",
    "FlinkRuntimeJobFailed",
    "FlinkRuntimeJobNotFound",
    "FlinkRuntimeSavepointFailed",
    "FlinkRuntimeTimeout",
]


class FlinkRuntimeException(AirflowException):
    """Base of everything the flink-runtime provider raises."""


class FlinkRuntimeApiError(FlinkRuntimeException):
    """The JobManager answered with an error status; ``errors`` are its messages."""

    def __init__(self, status_code: int, errors: list[str], method: str = "", path: str = "") -> None:
        self.status_code = status_code
        self.errors = list(errors)
        self.method = method
        self.path = path
        where = f"{method} {path} " if method else ""
        super().__init__(f"{where}answered {status_code}: {'; '.join(self.errors)}")


class FlinkRuntimeJobNotFound(FlinkRuntimeApiError):
    """404: the job is unknown to the JobManager, or expired from its job store."""


class FlinkRuntimeClusterUnreachable(FlinkRuntimeException):
    """No answer from the REST API, even after the hook's retries."""


class FlinkRuntimeInvalidInput(FlinkRuntimeException, ValueError):
    """The JobGraph or another argument was refused before any request was sent."""


class FlinkRuntimeSavepointFailed(FlinkRuntimeException):
    """The JobManager reports the savepoint (or stop-with-savepoint) as failed."""


class FlinkRuntimeTimeout(FlinkRuntimeException, TimeoutError):
    """A wait for a job or a savepoint ran out of time; the remote work may go on."""


class FlinkRuntimeJobFailed(FlinkRuntimeException):
    """The job ended FAILED or CANCELED (or without reaching the awaited state).

    ``root_exception`` is the JobManager's full root exception (message and
    traceback), None if the job has none; the message keeps its first paragraph.
    ``log_lines`` are the last task-log lines of the subtask that raised it, if the
    cluster keeps logs.
    """

    def __init__(
        self,
        job_id: str,
        state: str,
        message: str,
        root_exception: str | None = None,
        log_lines: list[str] | None = None,
    ) -> None:
        self.job_id = job_id
        self.state = state
        self.root_exception = root_exception
        self.log_lines = list(log_lines or [])
        super().__init__(message)
