"""A synchronous client for the JobManager's REST API.

`JobClient` submits JobGraphs, queries and cancels jobs, and follows a job's status
through the long-poll event endpoint (`GET /jobs/:id/events`), so waiting for a job
costs one request per state change rather than one per polling interval.

Failure policy: transient failures are retried by the client's HTTP layer
(client/http.py says which, and how long it waits). Retried POSTs are safe:

* Submissions are made idempotent by assigning the job id on the client (as Flink's
  client does): a retried POST whose first attempt did reach the JobManager gets
  "409 already submitted", which then means "accepted".
* Savepoint, stop and checkpoint triggers carry a `triggerId` of the client's own (as
  Flink's RestClusterClient does): a retried POST whose first attempt did reach the
  JobManager gets the same request back, never a second savepoint.

Errors surface as `RestClientError` (carrying the JobManager's messages), `JobNotFound`
(404) or `ClusterUnreachable` (no answer after the retries); a savepoint that the
JobManager reports as failed raises `SavepointFailed` (client/errors.py).
"""

from __future__ import annotations

import os
import ssl
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from flink_runtime.client.errors import (
    ClusterUnreachable,
    JobClientError,
    JobNotFound,
    RestClientError,
    SavepointFailed,
)
from flink_runtime.client.http import RetryPolicy, json_object, raise_for_status, send
from flink_runtime.client.job_graph_source import (
    JobGraphSource,
    library_file_problem,
    library_files,
    load_job_graph_document,
    set_savepoint_config,
)
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import new_job_id
from flink_runtime.security import bearer

__all__ = [
    "ClusterUnreachable",
    "EventPage",
    "JobClient",
    "JobClientError",
    "JobGraphSource",
    "JobNotFound",
    "JobStatusEvent",
    "RestClientError",
    "SavepointFailed",
    "normalize_rest_url",
]


# The REST API refuses long polls longer than this (rest.job_routes.MAX_EVENT_WAIT_SECONDS).
MAX_POLL_SECONDS = 60.0


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


def normalize_rest_url(address: str) -> str:
    """`host:port`, `http://host:port` or `https://...` -> a base URL without a trailing slash."""
    address = address.strip()
    if not address:
        raise ValueError("empty REST address: expected host:port or http://host:port")
    if "://" not in address:
        address = "http://" + address
    url = httpx.URL(address)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"invalid REST address {address!r}: expected host:port or http://host:port")
    return str(url).rstrip("/")


class JobClient:
    """Talks to one JobManager's REST API. Not thread-safe (one httpx.Client)."""

    def __init__(
        self,
        rest_url: str,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        token: str = "",
        verify: ssl.SSLContext | bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """
        rest_url: the REST API's base URL (`host:port` is accepted too).
        token: the REST API's bearer token (security.rest.token), if it has one.
        verify: how an https server is verified: True (the system's authorities), an
            ssl.SSLContext (flink_runtime.security.trust(path) for a CA file), or False.
        timeout: seconds for connecting and for each answer (long polls add their wait).
        retries: how often a transient failure is retried before giving up.
        backoff, max_backoff: the first and the largest pause between retries, in seconds.
        transport: an httpx transport (tests pass an httpx.MockTransport).
        """
        self.rest_url = normalize_rest_url(rest_url)
        self.timeout = timeout
        self.retry_policy = RetryPolicy(retries, backoff, max_backoff)
        self._http = httpx.Client(
            base_url=self.rest_url,
            timeout=timeout,
            transport=transport,
            verify=verify,
            headers={"Accept": "application/json", **bearer(token)},
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JobClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JobClient({self.rest_url!r})"

    # -- jobs --------------------------------------------------------------------------------------

    def submit(
        self,
        job_graph: JobGraphSource,
        *,
        job_id: str | None = None,
        savepoint_path: str | os.PathLike[str] | None = None,
        allow_non_restored_state: bool = False,
    ) -> str:
        """Submit a JobGraph and return its job id once the JobManager accepted it.

        `job_graph` is a JobGraph, a JSON-like dict, JSON bytes, or the path (str or
        PathLike) of a .json file. Unreadable or non-JSON input raises ValueError before
        any request; the JobManager validates the graph itself and answers every problem
        at once (RestClientError 400). `job_id` overrides the graph's job id.

        `savepoint_path` resumes the job from that savepoint (a path on the cluster's
        side, as the JobManager sees it); `allow_non_restored_state` lets it start
        although the savepoint holds state no vertex of this graph claims. Both go into
        the submitted graph's config (`execution.savepoint.*`), never the caller's.
        """
        document = load_job_graph_document(job_graph)
        set_savepoint_config(document, savepoint_path, allow_non_restored_state)
        # Local library files go to the JobManager's blob store first; the graph we send
        # names them by key (the document is a copy: the caller's graph is left alone).
        local_libraries = library_files(document)
        if local_libraries:
            keys = {path: self.upload_library(path) for path in set(local_libraries.values())}
            document["libraries"] = [
                keys[local_libraries[entry]] if entry in local_libraries else entry for entry in document["libraries"]
            ]
        if job_id is not None:
            document["job_id"] = job_id
        # A client-side id makes retrying the POST safe (see the module docstring).
        if not document.get("job_id"):
            document["job_id"] = new_job_id()
        body = msgspec.json.encode(document)
        attempts = 0

        def count_attempt() -> None:
            nonlocal attempts
            attempts += 1

        response = self._send(
            "POST",
            "/jobs",
            content=body,
            headers={"Content-Type": "application/json"},
            before_attempt=count_attempt,
            check_status=False,
        )
        if response.status_code == 409 and attempts > 1:
            # An earlier attempt got through but its answer was lost: that was our job.
            return str(document["job_id"])
        raise_for_status(response)
        try:
            return str(response.json()["jobid"])
        except (ValueError, KeyError, TypeError):
            # Accepted (2xx) but without the usual body: the id is ours anyway.
            return str(document["job_id"])

    def upload_library(self, path: str | os.PathLike[str]) -> str:
        """POST /blobs: store a .py/.zip/.whl/.egg file on the JobManager; returns its blob key.

        The key (`blob:<sha256>/<name>`) goes in a JobGraph's libraries; uploading the
        same bytes again answers the same key, so retrying is safe.
        """
        file = Path(path)
        problem = library_file_problem(str(path), file)
        if problem:
            raise ValueError(problem)
        data = file.read_bytes()
        answer = self._send(
            "POST",
            "/blobs",
            params={"name": file.name},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        ).json()
        return str(answer["key"])

    def status(self, job_id: str) -> JobStatus:
        return JobStatus(self.details(job_id)["state"])

    def details(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id - state, times, vertices with status and task counts, plan."""
        return self._get_json(f"/jobs/{_quote(job_id)}")

    def exceptions(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/exceptions - `root-exception` and the exception history."""
        return self._get_json(f"/jobs/{_quote(job_id)}/exceptions")

    def accumulators(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/accumulators: records, bytes and (sources) input splits per vertex."""
        return self._get_json(f"/jobs/{_quote(job_id)}/accumulators")

    def list_jobs(self) -> list[dict[str, Any]]:
        """GET /jobs/overview - one overview per job the JobManager knows."""
        return list(self._get_json("/jobs/overview").get("jobs", []))

    def overview(self) -> dict[str, Any]:
        """GET /overview - TaskManagers, slots and job counts."""
        return self._get_json("/overview")

    def taskmanagers(self) -> list[dict[str, Any]]:
        return list(self._get_json("/taskmanagers").get("taskmanagers", []))

    def job_log(
        self, job_id: str, vertex: str | None = None, subtask: int | None = None, since: str = ""
    ) -> dict[str, Any]:
        """GET /jobs/:id/log - the job's task log lines from every TaskManager, oldest first:
        `{lines, truncated, next, state, unreachable}`; pass `next` as `since` for what came after."""
        params: dict[str, Any] = {"vertex": vertex, "subtask": subtask, "since": since or None}
        return self._get_json(f"/jobs/{_quote(job_id)}/log", params={k: v for k, v in params.items() if v is not None})

    def cancel(self, job_id: str) -> None:
        """Ask the JobManager to cancel the job; returns once it started cancelling."""
        self._send("PATCH", f"/jobs/{_quote(job_id)}", params={"mode": "cancel"})

    # -- savepoints and checkpoints ----------------------------------------------------------------

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, cancel_job: bool = False) -> str:
        """POST /jobs/:id/savepoints; returns the request id to follow with `wait_for_savepoint`.

        `target_directory` None means the JobManager's state.savepoints.dir; `cancel_job`
        cancels the job once the savepoint is written.
        """
        body = {"target-directory": target_directory, "cancel-job": cancel_job}
        return self._trigger(f"/jobs/{_quote(job_id)}/savepoints", body)

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False) -> str:
        """POST /jobs/:id/stop: savepoint, then the job ends; returns the request id.

        `drain` lets the sources run to the end of their input first (Flink's
        MAX_WATERMARK) instead of suspending the job to be resumed later.
        """
        body = {"targetDirectory": target_directory, "drain": drain}
        return self._trigger(f"/jobs/{_quote(job_id)}/stop", body)

    def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        """GET /jobs/:id/savepoints/:triggerid - `{"status": {"id": ...}, "operation": {...}}`."""
        return self._get_json(f"/jobs/{_quote(job_id)}/savepoints/{_quote(request_id)}")

    def wait_for_savepoint(
        self,
        job_id: str,
        request_id: str,
        timeout: float | None = None,
        poll_interval: float = 0.2,
    ) -> str:
        """Poll the request until it completes; returns the savepoint's location.

        Raises SavepointFailed with the JobManager's failure cause, and TimeoutError
        (naming the job and the request) when `timeout` seconds pass first; the
        savepoint may still complete on the JobManager after that.
        """
        if poll_interval < 0:
            raise ValueError(f"poll_interval must be >= 0, got {poll_interval}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            location = self._savepoint_outcome(job_id, request_id, self.savepoint_status(job_id, request_id))
            if location is not None:
                return location
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(
                    f"savepoint request {request_id} of job {job_id} did not complete within {timeout:g} s; "
                    "it may still complete on the JobManager"
                )
            time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))

    def savepoint(
        self,
        job_id: str,
        target_directory: str | None = None,
        cancel_job: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Trigger a savepoint and wait for it; returns its location (see `wait_for_savepoint`)."""
        request_id = self.trigger_savepoint(job_id, target_directory, cancel_job)
        return self.wait_for_savepoint(job_id, request_id, timeout)

    def stop(
        self,
        job_id: str,
        target_directory: str | None = None,
        drain: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Stop the job with a savepoint and wait for it; returns the savepoint's location."""
        request_id = self.stop_with_savepoint(job_id, target_directory, drain)
        return self.wait_for_savepoint(job_id, request_id, timeout)

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints - counts, latest completed/failed/restored, history."""
        return self._get_json(f"/jobs/{_quote(job_id)}/checkpoints")

    def _trigger(self, path: str, body: dict[str, Any]) -> str:
        # A triggerId of our own makes the POST idempotent: a retry after a lost answer
        # gets the same request back instead of a second savepoint (or a 409).
        body = {**body, "triggerId": uuid.uuid4().hex}
        response = self._send("POST", path, json=body)
        try:
            return str(response.json()["request-id"])
        except (ValueError, KeyError, TypeError):
            raise RestClientError(
                response.status_code,
                [f"unexpected answer from POST {path}: {response.text[:200]!r}"],
                method="POST",
                path=path,
            ) from None

    @staticmethod
    def _savepoint_outcome(job_id: str, request_id: str, answer: dict[str, Any]) -> str | None:
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
            path=f"/jobs/{job_id}/savepoints/{request_id}",
        )

    # -- following a job ---------------------------------------------------------------------------

    def poll_events(self, job_id: str, since: int = 0, timeout: float = 0.0) -> EventPage:
        """One long poll: the job's events with id >= `since`, waiting up to `timeout` s for one."""
        wait = min(max(timeout, 0.0), MAX_POLL_SECONDS)
        data = self._get_json(
            f"/jobs/{_quote(job_id)}/events",
            params={"since": max(since, 0), "timeout": wait},
            # The server holds the request for `wait` seconds before it answers.
            timeout=httpx.Timeout(self.timeout, read=self.timeout + wait),
        )
        return EventPage(
            events=[JobStatusEvent.from_json(item) for item in data.get("events", [])],
            next=int(data.get("next", since)),
            state=JobStatus(data["state"]),
        )

    def events(self, job_id: str, since: int = 0, poll_timeout: float = 30.0) -> Iterator[JobStatusEvent]:
        """The job's status transitions as they happen; ends after a globally terminal one.

        Starting at `since=0` replays the job's transitions so far, so no event is
        missed between submitting and subscribing.
        """
        # A zero wait would turn the long poll into a busy loop against the JobManager.
        for page in self._pages(job_id, since, max(poll_timeout, 0.1)):
            for event in page.events:
                yield event
                if event.new_state.is_globally_terminal:
                    return

    def wait(
        self,
        job_id: str,
        timeout: float | None = None,
        on_event: Callable[[JobStatusEvent], None] | None = None,
    ) -> JobStatus:
        """Block until the job is FINISHED, FAILED or CANCELED and return that status.

        `on_event` is called with each transition. Raises TimeoutError (naming the job
        and its last known state) when `timeout` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        last_state: JobStatus | None = None
        since = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                state = last_state.value if last_state is not None else "unknown"
                raise TimeoutError(f"job {job_id} did not end within {timeout:g} s; its last state was {state}")
            page = self.poll_events(job_id, since, 30.0 if remaining is None else min(30.0, remaining))
            since = page.next
            last_state = page.state
            for event in page.events:
                if on_event is not None:
                    on_event(event)
                if event.new_state.is_globally_terminal:
                    return event.new_state
            if not page.events and page.state.is_globally_terminal:
                # The terminal event fell out of the JobManager's bounded event log.
                return page.state

    def _pages(self, job_id: str, since: int, poll_timeout: float) -> Iterator[EventPage]:
        while True:
            page = self.poll_events(job_id, since, poll_timeout)
            yield page
            if not page.events and page.state.is_globally_terminal:
                # The terminal event fell out of the bounded event log; nothing more will come.
                return
            since = page.next

    # -- HTTP --------------------------------------------------------------------------------------

    def _get_json(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return json_object(self._send("GET", path, **kwargs))

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return send(self._http, self.retry_policy, method, path, **kwargs)


def _quote(job_id: str) -> str:
    # A job id typed by a user must not be able to change the path ("../overview").
    return quote(str(job_id), safe="")
