"""What the client raises about the cluster: the JobManager refused a request
(RestClientError, JobNotFound for 404), gave no answer even after retrying
(ClusterUnreachable), or reports a savepoint as failed (SavepointFailed). Errors about
local input (an unreadable JobGraph file) are ValueError instead."""

from __future__ import annotations

import re

__all__ = ["ClusterUnreachable", "JobClientError", "JobNotFound", "RestClientError", "SavepointFailed"]


class JobClientError(Exception):
    """Base of every error the client raises about the cluster (not about local input)."""


class RestClientError(JobClientError):
    """The JobManager answered with an error status.

    `errors` holds its messages for people; `details` the server-side stack traces that
    came with them (Flink's REST API sends one as a later entry of `errors`, "<Exception
    on server side: ...>", or after a message), which only a verbose client shows.
    """

    def __init__(self, status_code: int, errors: list[str], *, method: str = "", path: str = "") -> None:
        self.status_code = status_code
        self.errors, self.details = split_server_errors(errors)
        self.errors = self.errors or [f"HTTP {status_code}"]
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

    The JobManager writes "Class: message", then the traceback (after a blank line, as
    the root exceptions of jobs do, or right after it): the part before the traceback is
    what a reader needs. A bare Python traceback has its message last, so that is taken
    instead. Java frames ("at ...", "Caused by: ...") end the message as well.
    """
    lines = stack_trace.strip().splitlines()
    if lines and lines[0].startswith(_PYTHON_TRACEBACK):
        head = [line for line in lines if line.strip()][-1:]
    else:
        head = []
        for line in lines:
            if not line.strip() or _starts_trace(line):
                break
            if not head or line.rstrip() != head[-1]:  # "Class: message" repeated by the traceback
                head.append(line.rstrip())
    head = head[:max_lines]
    if not head:
        return cause_class
    if not head[0].startswith((cause_class, cause_class.rsplit(".", 1)[-1])):
        head[0] = f"{cause_class}: {head[0]}"
    return "\n".join(head)


_PYTHON_TRACEBACK = "Traceback (most recent call last)"
_FLINK_SERVER_TRACE = "<Exception on server side:"
_FRAME = re.compile(r'^\s+(at [\w$.<>/]+\(|File "[^"]*", line \d+)|^Caused by: |^\s*\.\.\. \d+ more$')


def _starts_trace(line: str) -> bool:
    return line.startswith((_PYTHON_TRACEBACK, _FLINK_SERVER_TRACE)) or bool(_FRAME.match(line))


def split_server_errors(errors: list[str]) -> tuple[list[str], list[str]]:
    """(messages, stack traces) of a REST error's `errors`: an entry that is a stack trace
    goes to the second list whole; a message followed by one is cut where the trace
    starts (its first line names the problem)."""
    messages: list[str] = []
    details: list[str] = []
    for error in errors:
        text = str(error).strip()
        lines = text.splitlines()
        cut = next((i for i, line in enumerate(lines) if _starts_trace(line)), None)
        if cut is None:
            messages.append(text)
            continue
        head = "\n".join(lines[:cut]).strip()
        if head:
            messages.append(head)
        details.append(text)
    return messages, details
