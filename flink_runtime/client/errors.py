"""What the client raises about the cluster: the JobManager refused a request
(RestClientError, JobNotFound for 404), gave no answer even after retrying
(ClusterUnreachable), or reports a savepoint as failed (SavepointFailed). Errors about
local input (an unreadable JobGraph file) are ValueError instead."""

from __future__ import annotations

__all__ = ["ClusterUnreachable", "JobClientError", "JobNotFound", "RestClientError", "SavepointFailed"]


class JobClientError(Exception):
    """Base of every error the client raises about the cluster (not about local input)."""


class RestClientError(JobClientError):
    """The JobManager answered with an error status; `errors` holds its messages."""

    def __init__(self, status_code: int, errors: list[str], *, method: str = "", path: str = "") -> None:
        self.status_code = status_code
        self.errors = list(errors) or [f"HTTP {status_code}"]
        self.method = method
        self.path = path
        super().__init__("; ".join(self.errors))

    def __str__(self) -> str:
        return "; ".join(self.errors)


class JobNotFound(RestClientError):
    """404: the job is unknown to the JobManager (or expired from its job store)."""


class SavepointFailed(JobClientError):
    """The JobManager reports the savepoint (or stop-with-savepoint) as failed.

    `cause_class` and `stack_trace` are the JobManager's failure-cause; the message
    holds the class and the first lines of the trace.
    """

    def __init__(self, job_id: str, request_id: str, cause_class: str, stack_trace: str) -> None:
        self.job_id = job_id
        self.request_id = request_id
        self.cause_class = cause_class
        self.stack_trace = stack_trace
        super().__init__(
            f"savepoint of job {job_id} failed (request {request_id}): {describe_cause(cause_class, stack_trace)}"
        )


class ClusterUnreachable(JobClientError, ConnectionError):
    """No answer from the REST API, even after retrying."""

    def __init__(self, rest_url: str, cause: BaseException | None = None) -> None:
        self.rest_url = rest_url
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None and str(cause) else ""
        super().__init__(
            f"cannot reach the JobManager's REST API at {rest_url}{detail}; "
            "start a cluster (e.g. `flink-runtime minicluster`) or pass its address with -m host:port"
        )


def describe_cause(cause_class: str, stack_trace: str, max_lines: int = 5) -> str:
    """`class: message` and the lines after it of a failure-cause, for an error message.

    The JobManager writes "Class: message", a blank line, then the traceback (as the
    root exceptions of jobs do): the part before the blank line is what a reader needs.
    A bare Python traceback has its message last, so that is taken instead.
    """
    lines = stack_trace.strip().splitlines()
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        head = [line for line in lines if line.strip()][-1:]
    else:
        head = []
        for line in lines:
            if not line.strip():
                break
            head.append(line.rstrip())
    head = head[:max_lines]
    if not head:
        return cause_class
    if not head[0].startswith((cause_class, cause_class.rsplit(".", 1)[-1])):
        head[0] = f"{cause_class}: {head[0]}"
    return "\n".join(head)
