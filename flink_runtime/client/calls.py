"""Every request the clients send to a JobManager's REST API, each defined once.

A `Call` is one request and how its answer reads: method, path (job ids quoted so that
none can leave its path segment), query, body, whether a retry is safe, how long the
server may hold it (a long poll), and the parser of its answer. It does no I/O:
`JobClient` sends it with an httpx.Client, `AsyncJobClient` with an httpx.AsyncClient,
both through client/http.py (the same retries, back-off and error mapping). So a path,
a field name or an error rule cannot differ between the blocking and the async side.

Operations of several requests (submit with its library uploads, waiting for a state or
a savepoint) are plans of these calls: client/plans.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from flink_runtime.client.errors import RestClientError, SavepointFailed
from flink_runtime.client.http import json_object, raise_for_status
from flink_runtime.executiongraph.states import JobStatus

__all__ = [
    "MAX_POLL_SECONDS",
    "Call",
    "EventPage",
    "JobStatusEvent",
    "cancel_job",
    "cluster_overview",
    "job_accumulators",
    "job_checkpoints",
    "job_details",
    "job_events",
    "job_exceptions",
    "job_log",
    "jobs_overview",
    "savepoint_outcome",
    "savepoint_status",
    "stop_with_savepoint",
    "submit_job",
    "submitted_job_id",
    "taskmanagers",
    "trigger_savepoint",
    "upload_library",
]

T = TypeVar("T")

# The REST API refuses long polls longer than this (rest.job_routes.MAX_EVENT_WAIT_SECONDS).
MAX_POLL_SECONDS = 60.0


@dataclass(frozen=True)
class Call(Generic[T]):
    """One REST request, and `parse` turning its (successful) answer into a `T`.

    idempotent: False for a request that must not run twice (see client/http.py).
    hold: seconds the server may keep the request before answering (a long poll):
        added to the read timeout.
    check_status: False hands an error answer to `parse` instead of raising.
    before_attempt: runs before each attempt (submit counts them).
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None
    idempotent: bool = True
    hold: float = 0.0
    check_status: bool = True
    before_attempt: Callable[[], None] | None = field(default=None, compare=False)

    def request_arguments(self, timeout: float) -> dict[str, Any]:
        """httpx's keyword arguments for this request, on a client whose timeout is `timeout`."""
        arguments: dict[str, Any] = {}
        if self.params is not None:
            arguments["params"] = dict(self.params)
        if self.json is not None:
            arguments["json"] = self.json
        if self.content is not None:
            arguments["content"] = self.content
        if self.headers:
            arguments["headers"] = dict(self.headers)
        if self.hold:
            arguments["timeout"] = httpx.Timeout(timeout, read=timeout + self.hold)
        return arguments


@dataclass(frozen=True)
class JobStatusEvent:
    """One job status transition, as published by the JobManager."""

    id: int
    job_id: str
    old_state: JobStatus
    new_state: JobStatus
    timestamp: float  # seconds since the epoch

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobStatusEvent:
        return cls(
            id=int(data["id"]),
            job_id=str(data["job-id"]),
            old_state=JobStatus(data["old-state"]),
            new_state=JobStatus(data["new-state"]),
            # The REST API speaks epoch milliseconds, as Flink does.
            timestamp=float(data["timestamp"]) / 1000.0,
        )


@dataclass(frozen=True)
class EventPage:
    """One answer of the event endpoint: the events, where to continue, the job's state now."""

    events: list[JobStatusEvent]
    next: int
    state: JobStatus


def job_path(job_id: str, *rest: str) -> str:
    # A job id typed by a user must not be able to change the path ("../overview").
    return "/".join(["/jobs", quote(str(job_id), safe=""), *(quote(str(part), safe="") for part in rest)])


def _get(path: str, **kwargs: Any) -> Call[dict[str, Any]]:
    return Call("GET", path, json_object, **kwargs)


# -- cluster -------------------------------------------------------------------------------------------


def cluster_overview() -> Call[dict[str, Any]]:
    """GET /overview - TaskManagers, slots and job counts."""
    return _get("/overview")


def taskmanagers() -> Call[list[dict[str, Any]]]:
    """GET /taskmanagers."""
    return Call("GET", "/taskmanagers", lambda answer: list(json_object(answer).get("taskmanagers", [])))


def jobs_overview() -> Call[list[dict[str, Any]]]:
    """GET /jobs/overview - one overview per job the JobManager knows."""
    return Call("GET", "/jobs/overview", lambda answer: list(json_object(answer).get("jobs", [])))


# -- one job ---------------------------------------------------------------------------------------------


def job_details(job_id: str) -> Call[dict[str, Any]]:
    """GET /jobs/:id - state, times, vertices with status and task counts, plan."""
    return _get(job_path(job_id))


def job_exceptions(job_id: str) -> Call[dict[str, Any]]:
    """GET /jobs/:id/exceptions - `root-exception` and the exception history."""
    return _get(job_path(job_id, "exceptions"))


def job_accumulators(job_id: str) -> Call[dict[str, Any]]:
    """GET /jobs/:id/accumulators - records, bytes and (sources) input splits per vertex."""
    return _get(job_path(job_id, "accumulators"))


def job_checkpoints(job_id: str) -> Call[dict[str, Any]]:
    """GET /jobs/:id/checkpoints - counts, latest completed/failed/restored, history."""
    return _get(job_path(job_id, "checkpoints"))


def job_log(
    job_id: str, vertex: str | None = None, subtask: int | None = None, since: str = ""
) -> Call[dict[str, Any]]:
    """GET /jobs/:id/log - `{lines, truncated, next, state, unreachable}`, oldest line first."""
    params: dict[str, Any] = {"vertex": vertex, "subtask": subtask, "since": since or None}
    return _get(job_path(job_id, "log"), params={k: v for k, v in params.items() if v is not None})


def cancel_job(job_id: str) -> Call[None]:
    """PATCH /jobs/:id?mode=cancel. A job that ended FINISHED or FAILED answers 409; a
    CANCELED one is acknowledged again (as Flink does), so a retry is safe."""
    return Call("PATCH", job_path(job_id), lambda answer: None, params={"mode": "cancel"})


def job_events(job_id: str, since: int = 0, timeout: float = 0.0) -> Call[EventPage]:
    """GET /jobs/:id/events - one long poll: the events with id >= `since`, waiting up to
    `timeout` seconds (at most MAX_POLL_SECONDS) for one. Only live jobs have events: an
    archived one answers 404 here and its state at GET /jobs/:id."""
    wait = min(max(timeout, 0.0), MAX_POLL_SECONDS)
    since = max(int(since), 0)

    def parse(answer: httpx.Response) -> EventPage:
        data = json_object(answer)
        return EventPage(
            events=[JobStatusEvent.from_json(item) for item in data.get("events", [])],
            next=int(data.get("next", since)),
            state=JobStatus(data["state"]),
        )

    return Call("GET", job_path(job_id, "events"), parse, params={"since": since, "timeout": wait}, hold=wait)


# -- submitting --------------------------------------------------------------------------------------------


def upload_library(name: str, data: bytes) -> Call[str]:
    """POST /blobs - store a library file; answers its blob key. The same bytes answer the
    same key, so a retry is safe."""
    return Call(
        "POST",
        "/blobs",
        lambda answer: str(json_object(answer)["key"]),
        params={"name": name},
        content=data,
        headers={"Content-Type": "application/octet-stream"},
    )


def submit_job(body: bytes, before_attempt: Callable[[], None] | None = None) -> Call[httpx.Response]:
    """POST /jobs with the JobGraph's JSON. Its answer is judged by `submitted_job_id`,
    which needs to know how many attempts were made (hence `before_attempt`)."""
    return Call(
        "POST",
        "/jobs",
        lambda answer: answer,
        content=body,
        headers={"Content-Type": "application/json"},
        check_status=False,
        before_attempt=before_attempt,
    )


def submitted_job_id(answer: httpx.Response, job_id: str, attempts: int) -> str:
    """The accepted job's id, from the answer of `submit_job` for a graph with id `job_id`."""
    if answer.status_code == 409 and attempts > 1:
        # An earlier attempt got through but its answer was lost: that was our job.
        return job_id
    raise_for_status(answer)
    try:
        return str(answer.json()["jobid"])
    except (ValueError, KeyError, TypeError):
        # Accepted (2xx) but without the usual body: the id is ours anyway.
        return job_id


# -- savepoints -----------------------------------------------------------------------------------------------


def trigger_savepoint(job_id: str, target_directory: str | None = None, cancel_job: bool = False) -> Call[str]:
    """POST /jobs/:id/savepoints; answers the request id. `target_directory` None means the
    JobManager's state.savepoints.dir; `cancel_job` cancels the job once it is written."""
    return _trigger(job_path(job_id, "savepoints"), {"target-directory": target_directory, "cancel-job": cancel_job})


def stop_with_savepoint(job_id: str, target_directory: str | None = None, drain: bool = False) -> Call[str]:
    """POST /jobs/:id/stop: savepoint, then the job ends; answers the request id. `drain`
    lets the sources run to the end of their input first (Flink's MAX_WATERMARK)."""
    return _trigger(job_path(job_id, "stop"), {"targetDirectory": target_directory, "drain": drain})


def _trigger(path: str, body: dict[str, Any]) -> Call[str]:
    def parse(answer: httpx.Response) -> str:
        try:
            return str(answer.json()["request-id"])
        except (ValueError, KeyError, TypeError):
            raise RestClientError(
                answer.status_code,
                [f"unexpected answer from POST {path}: {answer.text[:200]!r}"],
                method="POST",
                path=path,
            ) from None

    # A triggerId of our own makes the POST idempotent: a retry after a lost answer gets
    # the same request back instead of a second savepoint (or a 409).
    return Call("POST", path, parse, json={**body, "triggerId": uuid.uuid4().hex})


def savepoint_status(job_id: str, request_id: str) -> Call[dict[str, Any]]:
    """GET /jobs/:id/savepoints/:triggerid - `{"status": {"id": ...}, "operation": {...}}`."""
    return _get(job_path(job_id, "savepoints", request_id))


def savepoint_outcome(job_id: str, request_id: str, answer: Mapping[str, Any]) -> str | None:
    """The location of a completed savepoint, None while in progress; SavepointFailed on failure."""
    status = answer.get("status")
    state = status.get("id") if isinstance(status, dict) else None
    if state == "IN_PROGRESS":
        return None
    operation = answer.get("operation")
    if state == "COMPLETED" and isinstance(operation, dict):
        cause = operation.get("failure-cause")
        if isinstance(cause, dict):
            raise SavepointFailed(
                job_id, request_id, str(cause.get("class") or "unknown"), str(cause.get("stack-trace") or "")
            )
        if operation.get("location"):
            return str(operation["location"])
    raise RestClientError(
        200,
        [f"unexpected savepoint status for request {request_id} of job {job_id}: {str(answer)[:200]}"],
        method="GET",
        path=job_path(job_id, "savepoints", request_id),
    )
