"""A synchronous client for the JobManager's REST API; AsyncJobClient
(client/async_job_client.py) is its twin on an event loop, with the same methods.

`JobClient` submits JobGraphs, queries and cancels jobs, and follows a job's status
through the long-poll event endpoint (`GET /jobs/:id/events`), so waiting for a job
costs one request per state change rather than one per polling interval.

Failure policy: transient failures are retried by the client's HTTP layer
(client/http.py says which, and how long it waits). Retried POSTs are safe:

* Submissions are made idempotent by assigning the job id on the client (as Flink's
  client does): a retried POST whose first attempt did reach the JobManager gets
  "409 already submitted", which then means "accepted".
* Savepoint and stop triggers carry a `triggerId` of the client's own (as Flink's
  RestClusterClient does): a retried POST whose first attempt did reach the JobManager
  gets the same request back, never a second savepoint.
* Library uploads are content-addressed: the same bytes answer the same blob key.

Both send the same calls (client/calls.py: path, body, parsing) and run the same
plans (client/plans.py: submit, waits), so the two cannot answer differently.

Errors surface as `RestClientError` (carrying the JobManager's messages), `JobNotFound`
(404) or `ClusterUnreachable` (no answer after the retries); a savepoint that the
JobManager reports as failed raises `SavepointFailed` (client/errors.py).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Collection, Iterator
from types import TracebackType
from typing import Any, TypeVar

import httpx

from flink_runtime.client import calls, plans
from flink_runtime.client.calls import MAX_POLL_SECONDS, Call, EventPage, JobStatusEvent
from flink_runtime.client.errors import (
    ClusterUnreachable,
    JobClientError,
    JobNotFound,
    RestClientError,
    SavepointFailed,
)
from flink_runtime.client.http import ClientOptions, RetryPolicy, send
from flink_runtime.client.job_graph_source import JobGraphSource
from flink_runtime.executiongraph.states import JobStatus

__all__ = [
    "MAX_POLL_SECONDS",
    "ClusterUnreachable",
    "EventPage",
    "JobClient",
    "JobClientError",
    "JobGraphSource",
    "JobNotFound",
    "JobStatusEvent",
    "RestClientError",
    "SavepointFailed",
    "client_options",
    "normalize_rest_url",
]

T = TypeVar("T")


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


def client_options(
    rest_url: str,
    *,
    timeout: float = 30.0,
    retries: int = 5,
    backoff: float = 0.1,
    max_backoff: float = 2.0,
    token: str = "",
    verify: ssl.SSLContext | bool = True,
    user_agent: str | None = None,
) -> ClientOptions:
    """The settings of JobClient's and AsyncJobClient's constructors (same arguments):

    rest_url: the REST API's base URL (`host:port` is accepted too).
    token: the REST API's bearer token (security.rest.token), if it has one.
    verify: how an https server is verified: True (the system's authorities), an
        ssl.SSLContext (flink_runtime.security.trust(path) for a CA file), or False.
    timeout: seconds for connecting and for each answer (long polls add their wait).
    retries: how often a transient failure is retried before giving up.
    backoff, max_backoff: the first and the largest pause between retries, in seconds.
    user_agent: the User-Agent header (httpx's own if None).
    """
    return ClientOptions(
        normalize_rest_url(rest_url), timeout, RetryPolicy(retries, backoff, max_backoff), token, verify, user_agent
    )


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
        user_agent: str | None = None,
    ) -> None:
        """Arguments as `client_options` says; `transport`: an httpx transport (tests pass
        an httpx.MockTransport)."""
        options = client_options(
            rest_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            token=token,
            verify=verify,
            user_agent=user_agent,
        )
        self.rest_url = options.rest_url
        self.timeout = options.timeout
        self.retry_policy = options.retry_policy
        self._http = httpx.Client(**options.httpx_arguments(), transport=transport)

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

    # -- sending -----------------------------------------------------------------------------------

    def call(self, call: Call[T]) -> T:
        """Send one request (client/calls.py), retried as client/http.py says; its parsed answer."""
        response = send(
            self._http,
            self.retry_policy,
            call.method,
            call.path,
            idempotent=call.idempotent,
            before_attempt=call.before_attempt,
            check_status=call.check_status,
            **call.request_arguments(self.timeout),
        )
        return call.parse(response)

    def run(self, plan: plans.Plan[T]) -> T:
        """Run an operation of several requests (client/plans.py) to its result."""
        return plans.drive(plan, self.call)

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
        at once (RestClientError 400). `job_id` overrides the graph's job id. Local
        library files the graph lists are uploaded first (`upload_library`).

        `savepoint_path` resumes the job from that savepoint (a path on the cluster's
        side, as the JobManager sees it); `allow_non_restored_state` lets it start
        although the savepoint holds state no vertex of this graph claims. Both go into
        the submitted graph's config (`execution.savepoint.*`), never the caller's.
        """
        return self.run(plans.submit(job_graph, job_id, savepoint_path, allow_non_restored_state))

    def upload_library(self, path: str | os.PathLike[str]) -> str:
        """POST /blobs: store a .py/.zip/.whl/.egg file on the JobManager; returns its blob key.

        The key (`blob:<sha256>/<name>`) goes in a JobGraph's libraries; uploading the
        same bytes again answers the same key, so retrying is safe.
        """
        return self.run(plans.upload_library(path))

    def status(self, job_id: str) -> JobStatus:
        return JobStatus(self.details(job_id)["state"])

    def details(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id - state, times, vertices with status and task counts, plan."""
        return self.call(calls.job_details(job_id))

    def exceptions(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/exceptions - `root-exception` and the exception history."""
        return self.call(calls.job_exceptions(job_id))

    def accumulators(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/accumulators: records, bytes and (sources) input splits per vertex."""
        return self.call(calls.job_accumulators(job_id))

    def list_jobs(self) -> list[dict[str, Any]]:
        """GET /jobs/overview - one overview per job the JobManager knows."""
        return self.call(calls.jobs_overview())

    def overview(self) -> dict[str, Any]:
        """GET /overview - TaskManagers, slots and job counts."""
        return self.call(calls.cluster_overview())

    def taskmanagers(self) -> list[dict[str, Any]]:
        return self.call(calls.taskmanagers())

    def job_log(
        self, job_id: str, vertex: str | None = None, subtask: int | None = None, since: str = ""
    ) -> dict[str, Any]:
        """GET /jobs/:id/log - the job's task log lines from every TaskManager, oldest first:
        `{lines, truncated, next, state, unreachable}`; pass `next` as `since` for what came after."""
        return self.call(calls.job_log(job_id, vertex, subtask, since))

    def cancel(self, job_id: str) -> None:
        """Ask the JobManager to cancel the job; returns once it started cancelling."""
        self.call(calls.cancel_job(job_id))

    # -- savepoints and checkpoints ----------------------------------------------------------------

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, cancel_job: bool = False) -> str:
        """POST /jobs/:id/savepoints; returns the request id to follow with `wait_for_savepoint`.

        `target_directory` None means the JobManager's state.savepoints.dir; `cancel_job`
        cancels the job once the savepoint is written.
        """
        return self.call(calls.trigger_savepoint(job_id, target_directory, cancel_job))

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False) -> str:
        """POST /jobs/:id/stop: savepoint, then the job ends; returns the request id.

        `drain` lets the sources run to the end of their input first (Flink's
        MAX_WATERMARK) instead of suspending the job to be resumed later.
        """
        return self.call(calls.stop_with_savepoint(job_id, target_directory, drain))

    def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        """GET /jobs/:id/savepoints/:triggerid - `{"status": {"id": ...}, "operation": {...}}`."""
        return self.call(calls.savepoint_status(job_id, request_id))

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
        return self.run(plans.wait_for_savepoint(job_id, request_id, timeout, poll_interval))

    def savepoint(
        self,
        job_id: str,
        target_directory: str | None = None,
        cancel_job: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Trigger a savepoint and wait for it; returns its location (see `wait_for_savepoint`)."""
        return self.run(plans.savepoint(job_id, target_directory, cancel_job, timeout))

    def stop(
        self,
        job_id: str,
        target_directory: str | None = None,
        drain: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Stop the job with a savepoint and wait for it; returns the savepoint's location."""
        return self.run(plans.stop(job_id, target_directory, drain, timeout))

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints - counts, latest completed/failed/restored, history."""
        return self.call(calls.job_checkpoints(job_id))

    # -- following a job ---------------------------------------------------------------------------

    def poll_events(self, job_id: str, since: int = 0, timeout: float = 0.0) -> EventPage:
        """One long poll: the job's events with id >= `since`, waiting up to `timeout` s for one."""
        return self.call(calls.job_events(job_id, since, timeout))

    def events(self, job_id: str, since: int = 0, poll_timeout: float = 30.0) -> Iterator[JobStatusEvent]:
        """The job's status transitions as they happen; ends after a globally terminal one.

        Starting at `since=0` replays the job's transitions so far, so no event is
        missed between submitting and subscribing.
        """
        # A zero wait would turn the long poll into a busy loop against the JobManager.
        poll_timeout = max(poll_timeout, 0.1)
        while True:
            page = self.poll_events(job_id, since, poll_timeout)
            for event in page.events:
                yield event
                if event.new_state.is_globally_terminal:
                    return
            if not page.events and page.state.is_globally_terminal:
                # The terminal event fell out of the bounded event log; nothing more will come.
                return
            since = page.next

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
        return self.wait_for_state(job_id, (), timeout, on_event=on_event)

    def wait_for_state(
        self,
        job_id: str,
        targets: Collection[str] = (),
        timeout: float | None = None,
        poll_timeout: float = 30.0,
        on_event: Callable[[JobStatusEvent], None] | None = None,
    ) -> JobStatus:
        """Block until the job reaches one of `targets` or ends; returns that state
        (client/plans.py `wait_for_state`). `on_event` is called with each transition."""
        return self.run(plans.wait_for_state(job_id, targets, timeout, poll_timeout, on_event))
