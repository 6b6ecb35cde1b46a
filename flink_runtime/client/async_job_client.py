"""AsyncJobClient: JobClient's twin for an event loop (the Airflow triggerer's, or any asyncio program).

The same constructor, the same methods with the same answers and errors, awaited: both
send the calls of client/calls.py and run the plans of client/plans.py, through the
one retrying HTTP layer (client/http.py). Only the sending differs: httpx.AsyncClient,
asyncio.sleep between retries and polls, so nothing here blocks the loop except reading
a JobGraph or library file from local disk when submitting.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Callable, Collection
from types import TracebackType
from typing import Any, TypeVar

import httpx

from flink_runtime.client import calls, plans
from flink_runtime.client.calls import Call, EventPage, JobStatusEvent
from flink_runtime.client.http import a_send
from flink_runtime.client.job_client import client_options
from flink_runtime.client.job_graph_source import JobGraphSource
from flink_runtime.executiongraph.states import JobStatus

__all__ = ["AsyncJobClient"]

T = TypeVar("T")


class AsyncJobClient:
    """Talks to one JobManager's REST API from an event loop (one httpx.AsyncClient).

    Use it as ``async with AsyncJobClient(url) as client:`` or call ``aclose()``: the
    connection pool belongs to the loop it was used on.
    """

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
        transport: httpx.AsyncBaseTransport | None = None,
        user_agent: str | None = None,
    ) -> None:
        """Arguments as JobClient's (`client_options`); `transport`: an httpx async transport."""
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
        self._http = httpx.AsyncClient(**options.httpx_arguments(), transport=transport)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncJobClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncJobClient({self.rest_url!r})"

    # -- sending -----------------------------------------------------------------------------------

    async def call(self, call: Call[T]) -> T:
        """Send one request (client/calls.py), retried as client/http.py says; its parsed answer."""
        response = await a_send(
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

    async def run(self, plan: plans.Plan[T]) -> T:
        """Run an operation of several requests (client/plans.py) to its result."""
        return await plans.a_drive(plan, self.call, asyncio.sleep)

    # -- jobs --------------------------------------------------------------------------------------

    async def submit(
        self,
        job_graph: JobGraphSource,
        *,
        job_id: str | None = None,
        savepoint_path: str | os.PathLike[str] | None = None,
        allow_non_restored_state: bool = False,
    ) -> str:
        """JobClient.submit: upload local libraries, submit, return the job id once accepted."""
        return await self.run(plans.submit(job_graph, job_id, savepoint_path, allow_non_restored_state))

    async def upload_library(self, path: str | os.PathLike[str]) -> str:
        """POST /blobs: store a library file on the JobManager; returns its blob key."""
        return await self.run(plans.upload_library(path))

    async def status(self, job_id: str) -> JobStatus:
        return JobStatus((await self.details(job_id))["state"])

    async def details(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id - state, times, vertices with status and task counts, plan."""
        return await self.call(calls.job_details(job_id))

    async def exceptions(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/exceptions - `root-exception` and the exception history."""
        return await self.call(calls.job_exceptions(job_id))

    async def accumulators(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/accumulators: records, bytes and (sources) input splits per vertex."""
        return await self.call(calls.job_accumulators(job_id))

    async def list_jobs(self) -> list[dict[str, Any]]:
        """GET /jobs/overview - one overview per job the JobManager knows."""
        return await self.call(calls.jobs_overview())

    async def overview(self) -> dict[str, Any]:
        """GET /overview - TaskManagers, slots and job counts."""
        return await self.call(calls.cluster_overview())

    async def taskmanagers(self) -> list[dict[str, Any]]:
        return await self.call(calls.taskmanagers())

    async def job_log(
        self, job_id: str, vertex: str | None = None, subtask: int | None = None, since: str = ""
    ) -> dict[str, Any]:
        """GET /jobs/:id/log - the job's task log lines, oldest first (see JobClient.job_log)."""
        return await self.call(calls.job_log(job_id, vertex, subtask, since))

    async def cancel(self, job_id: str) -> None:
        """Ask the JobManager to cancel the job; returns once it started cancelling."""
        await self.call(calls.cancel_job(job_id))

    # -- savepoints and checkpoints ----------------------------------------------------------------

    async def trigger_savepoint(
        self, job_id: str, target_directory: str | None = None, cancel_job: bool = False
    ) -> str:
        """POST /jobs/:id/savepoints; returns the request id to follow with `wait_for_savepoint`."""
        return await self.call(calls.trigger_savepoint(job_id, target_directory, cancel_job))

    async def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False) -> str:
        """POST /jobs/:id/stop: savepoint, then the job ends; returns the request id."""
        return await self.call(calls.stop_with_savepoint(job_id, target_directory, drain))

    async def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        """GET /jobs/:id/savepoints/:triggerid - `{"status": {"id": ...}, "operation": {...}}`."""
        return await self.call(calls.savepoint_status(job_id, request_id))

    async def wait_for_savepoint(
        self, job_id: str, request_id: str, timeout: float | None = None, poll_interval: float = 0.2
    ) -> str:
        """Poll the request until it completes; returns the savepoint's location (SavepointFailed,
        TimeoutError as JobClient.wait_for_savepoint)."""
        return await self.run(plans.wait_for_savepoint(job_id, request_id, timeout, poll_interval))

    async def savepoint(
        self, job_id: str, target_directory: str | None = None, cancel_job: bool = False, timeout: float | None = None
    ) -> str:
        """Trigger a savepoint and wait for it; returns its location."""
        return await self.run(plans.savepoint(job_id, target_directory, cancel_job, timeout))

    async def stop(
        self, job_id: str, target_directory: str | None = None, drain: bool = False, timeout: float | None = None
    ) -> str:
        """Stop the job with a savepoint and wait for it; returns the savepoint's location."""
        return await self.run(plans.stop(job_id, target_directory, drain, timeout))

    async def checkpoints(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints - counts, latest completed/failed/restored, history."""
        return await self.call(calls.job_checkpoints(job_id))

    # -- following a job ---------------------------------------------------------------------------

    async def poll_events(self, job_id: str, since: int = 0, timeout: float = 0.0) -> EventPage:
        """One long poll: the job's events with id >= `since`, waiting up to `timeout` s for one."""
        return await self.call(calls.job_events(job_id, since, timeout))

    async def events(self, job_id: str, since: int = 0, poll_timeout: float = 30.0) -> AsyncIterator[JobStatusEvent]:
        """The job's status transitions as they happen; ends after a globally terminal one."""
        poll_timeout = max(poll_timeout, 0.1)  # a zero wait would make the long poll a busy loop
        while True:
            page = await self.poll_events(job_id, since, poll_timeout)
            for event in page.events:
                yield event
                if event.new_state.is_globally_terminal:
                    return
            if not page.events and page.state.is_globally_terminal:
                return  # the terminal event fell out of the bounded event log
            since = page.next

    async def wait(
        self, job_id: str, timeout: float | None = None, on_event: Callable[[JobStatusEvent], None] | None = None
    ) -> JobStatus:
        """Until the job is FINISHED, FAILED or CANCELED; returns that status (see JobClient.wait)."""
        return await self.wait_for_state(job_id, (), timeout, on_event=on_event)

    async def wait_for_state(
        self,
        job_id: str,
        targets: Collection[str] = (),
        timeout: float | None = None,
        poll_timeout: float = 30.0,
        on_event: Callable[[JobStatusEvent], None] | None = None,
    ) -> JobStatus:
        """Until the job reaches one of `targets` or ends; returns that state (client/plans.py)."""
        return await self.run(plans.wait_for_state(job_id, targets, timeout, poll_timeout, on_event))
