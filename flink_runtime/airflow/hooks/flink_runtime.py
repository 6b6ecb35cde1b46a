"""FlinkRuntimeHook: every request the provider makes to a JobManager's REST API.

Operators, sensors and the trigger never speak HTTP themselves: the hook resolves the
connection (or starts the embedded cluster), retries what may succeed on a second try,
and turns error answers into exceptions that carry the JobManager's own messages.

The synchronous side is the project's ``JobClient`` (JobGraph loading, library
upload, idempotent submission, retries on connection errors, 5xx and 429 with
bounded back-off). The asynchronous side, used by the trigger, covers only the two
idempotent reads a wait needs, with the same retry rule.

Connection (type ``flink_runtime``):

* host, port: the REST API (port 8081 if empty); ``http://`` or ``https://`` in the
  host, the schema field, or extra ``"https": true`` choose the scheme.
* host ``embedded`` (or extra ``"embedded": true``): a detached MiniCluster shared by
  all tasks (see ``flink_runtime.airflow.embedded``); extra ``taskmanagers``,
  ``slots`` and ``state_dir`` size and place it, ``taskmanager_rpc_port`` fixes its
  TaskManagers' ports, ``embedded_idle_timeout`` when it stops itself.
* password: a bearer token, sent as ``Authorization: Bearer ...``.
* extra ``verify_tls`` (default true) and ``timeout`` (seconds per request).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from airflow.sdk import BaseHook

from flink_runtime.airflow.exceptions import (
    FlinkRuntimeException,
    FlinkRuntimeInvalidInput,
    FlinkRuntimeJobFailed,
    FlinkRuntimeJobNotFound,
    FlinkRuntimeTimeout,
)
from flink_runtime.airflow.hooks.connection import (
    ClusterSettings,
    check_embedded,
    cluster_settings,
    describe_overview,
    embedded_options,
)
from flink_runtime.airflow.hooks.errors import job_failed, translated
from flink_runtime.airflow.job_states import decisive_state, is_globally_terminal
from flink_runtime.airflow.progress import FAILURE_LOG_LINES, ProgressLog, describe_progress, failing_subtask
from flink_runtime.client.errors import ClusterUnreachable, RestClientError
from flink_runtime.client.http import RetryPolicy, a_send, json_object
from flink_runtime.client.job_client import MAX_POLL_SECONDS, JobClient
from flink_runtime.client.job_graph_source import load_job_graph_document, set_config_defaults
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import JobGraph

if TYPE_CHECKING:
    from flink_runtime.pipeline import Pipeline

__all__ = ["FlinkRuntimeHook"]

# The longest pause between two retries, whatever retry_delay and retry_limit say.
MAX_RETRY_BACKOFF = 30.0

# Every answer is parsed as JSON: say so, and let a proxy in front know what we are.
_HEADERS = {"Accept": "application/json", "User-Agent": "flink-runtime-airflow"}


class FlinkRuntimeHook(BaseHook):
    """Talks to one flink-runtime cluster through its REST API.

    :param flink_runtime_conn_id: the Airflow connection (type ``flink_runtime``).
    :param retry_limit: how often a request is retried after a connection error, a
        5xx or a 429 answer (not after other 4xx: those would fail the same way).
    :param retry_delay: the first pause between retries in seconds; it doubles on
        each retry, up to 30 s.
    :param timeout: seconds per request (long polls add their wait); default: the
        connection's extra ``timeout``, else 30.
    :param transport: an httpx transport for the synchronous side (tests pass an
        ``httpx.MockTransport``); ``async_transport`` likewise for the async side.
    """

    conn_name_attr = "flink_runtime_conn_id"
    default_conn_name = "flink_runtime_default"
    conn_type = "flink_runtime"
    hook_name = "Flink Runtime"

    def __init__(
        self,
        flink_runtime_conn_id: str = default_conn_name,
        retry_limit: int = 3,
        retry_delay: float = 1.0,
        timeout: float | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__()
        if retry_limit < 0:
            raise ValueError(f"retry_limit must be >= 0, got {retry_limit}")
        if retry_delay < 0:
            raise ValueError(f"retry_delay must be >= 0, got {retry_delay}")
        self.flink_runtime_conn_id = flink_runtime_conn_id
        self.retry_limit = retry_limit
        self.retry_delay = retry_delay
        self.timeout = timeout
        self._transport = transport
        self._async_transport = async_transport
        self._settings: ClusterSettings | None = None
        self._client: JobClient | None = None
        self._async_client: httpx.AsyncClient | None = None

    # -- the connection ------------------------------------------------------------------------------

    def _get_settings(self) -> ClusterSettings:
        if self._settings is None:
            self._settings = cluster_settings(self.get_connection(self.flink_runtime_conn_id), self.timeout)
        return self._settings

    async def _a_get_settings(self) -> ClusterSettings:
        if self._settings is None:
            conn = await self.aget_connection(self.flink_runtime_conn_id)
            # May start the embedded cluster: seconds of blocking the triggerer must not see.
            self._settings = await asyncio.to_thread(cluster_settings, conn, self.timeout)
        return self._settings

    @property
    def rest_url(self) -> str:
        return self._get_settings().rest_url

    def job_url(self, job_id: str) -> str:
        """The job's page on the cluster's dashboard (``<REST URL>/#/jobs/<id>``), as the
        worker reaches the cluster; the JSON is at ``<REST URL>/jobs/<id>``."""
        return f"{self.rest_url}/#/jobs/{_quote(job_id)}"

    def get_conn(self) -> JobClient:
        """The JobClient this hook sends its synchronous requests with."""
        if self._client is None:
            settings = self._get_settings()
            self._client = JobClient(
                settings.rest_url,
                timeout=settings.timeout,
                retries=self.retry_limit,
                backoff=self.retry_delay,
                max_backoff=MAX_RETRY_BACKOFF,
                token=settings.token or "",
                verify=settings.verify,
                transport=self._transport,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> FlinkRuntimeHook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        """For the UI's "Test" button: does GET /overview answer?

        An embedded connection is checked, not started: the button runs in Airflow's API
        server, which must not become the host of a cluster meant for the workers. Its
        options are validated and a running embedded cluster (on this host) is asked.
        """
        try:
            embedded = embedded_options(self.get_connection(self.flink_runtime_conn_id))
            if embedded is not None:
                return check_embedded(embedded)
            with translated():
                overview = self.get_conn().overview()
        except FlinkRuntimeException as exc:
            return False, str(exc)
        return True, f"Connected to {self.rest_url}: {describe_overview(overview)}"

    # -- jobs ----------------------------------------------------------------------------------------

    def submit_job(
        self,
        job_graph: JobGraph | Pipeline | dict[str, Any] | bytes | str,
        job_id: str | None = None,
        savepoint_path: str | None = None,
        config_defaults: Mapping[str, Any] | None = None,
    ) -> str:
        """Submit a JobGraph and return its job id once the JobManager accepted it.

        ``job_graph``: a JobGraph, a Pipeline, a JSON-like dict, JSON bytes, JSON text,
        or the path of a .json file. Local library files it lists are uploaded first.
        ``job_id`` (32 hex digits) replaces the graph's; submitting an id the
        JobManager already knows raises FlinkRuntimeApiError with status 409.
        ``savepoint_path`` resumes the job from that savepoint. ``config_defaults``:
        job configuration (Flink keys) for what the graph's own config does not set.
        """
        source: Any = job_graph
        if not isinstance(job_graph, JobGraph) and callable(getattr(job_graph, "job_graph", None)):
            source = job_graph.job_graph()  # a Pipeline
        elif isinstance(job_graph, str) and job_graph.lstrip().startswith("{"):
            source = job_graph.encode()  # JobClient reads a str as a path
        if config_defaults:
            try:
                source = load_job_graph_document(source)
                set_config_defaults(source, dict(config_defaults))
            except ValueError as exc:
                raise FlinkRuntimeInvalidInput(str(exc)) from exc
        with translated():
            return self.get_conn().submit(source, job_id=job_id, savepoint_path=savepoint_path)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """GET /jobs/:id, or None if the JobManager does not know the job."""
        try:
            with translated():
                return self.get_conn().details(job_id)
        except FlinkRuntimeJobNotFound:
            return None

    def get_job_status(self, job_id: str) -> str:
        with translated():
            return str(self.get_conn().details(job_id)["state"])

    def get_exceptions(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/exceptions: ``root-exception`` and ``exceptionHistory``."""
        with translated():
            return self.get_conn().exceptions(job_id)

    def cancel_job(self, job_id: str) -> None:
        """Ask the JobManager to cancel the job. A job that ended FINISHED or FAILED
        answers 409; a CANCELED one is acknowledged again."""
        with translated():
            self.get_conn().cancel(job_id)

    def job_failure(self, job_id: str, state: str, reason: str | None = None) -> FlinkRuntimeJobFailed:
        """The exception for a job that ended ``state``, with its root exception if it has one
        and the last log lines of the subtask that raised it.

        Both are fetched on a best-effort basis: failing to get them must not hide the
        failure they would explain.
        """
        root: str | None = None
        log_lines: list[str] = []
        try:
            exceptions = self.get_exceptions(job_id)
            root = exceptions.get("root-exception") or None
            failing = failing_subtask(exceptions, self.get_conn().details(job_id)) if root else None
            if failing is not None:
                lines = self.get_conn().job_log(job_id, vertex=failing[0], subtask=failing[1])["lines"]
                log_lines = lines[-FAILURE_LOG_LINES:]
        except (FlinkRuntimeException, RestClientError, ClusterUnreachable) as exc:
            self.log.warning("Could not fetch the root exception or task log of job %s: %s", job_id, exc)
        return job_failed(job_id, state, reason, root, log_lines)

    async def a_job_failure(self, job_id: str, state: str, reason: str | None = None) -> FlinkRuntimeJobFailed:
        """``job_failure`` for the trigger: the same answer, fetched without blocking."""
        root: str | None = None
        log_lines: list[str] = []
        try:
            exceptions = await self._a_get_json(f"/jobs/{_quote(job_id)}/exceptions")
            root = exceptions.get("root-exception") or None
            details = await self._a_get_json(f"/jobs/{_quote(job_id)}") if root else {}
            failing = failing_subtask(exceptions, details) if root else None
            if failing is not None:
                params = {"vertex": failing[0], "subtask": failing[1]}
                lines = (await self._a_get_json(f"/jobs/{_quote(job_id)}/log", params=params))["lines"]
                log_lines = lines[-FAILURE_LOG_LINES:]
        except FlinkRuntimeException as exc:
            self.log.warning("Could not fetch the root exception or task log of job %s: %s", job_id, exc)
        return job_failed(job_id, state, reason, root, log_lines)

    def job_progress(self, job_id: str) -> str:
        """One line: the job's state and each vertex's subtasks, splits and records (airflow/progress.py)."""
        with translated():
            client = self.get_conn()
            return describe_progress(job_id, client.details(job_id), client.accumulators(job_id))

    async def a_job_progress(self, job_id: str) -> str:
        details = await self._a_get_json(f"/jobs/{_quote(job_id)}")
        return describe_progress(job_id, details, await self._a_get_json(f"/jobs/{_quote(job_id)}/accumulators"))

    # -- savepoints ----------------------------------------------------------------------------------

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, cancel_job: bool = False) -> str:
        """POST /jobs/:id/savepoints; returns the request id (see ``wait_for_savepoint``).

        Not retried once the request may have reached the JobManager: a second POST
        would take a second savepoint.
        """
        with translated():
            return self.get_conn().trigger_savepoint(job_id, target_directory, cancel_job)

    def get_savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        """``{"status": {"id": IN_PROGRESS|COMPLETED}, "operation": {location | failure-cause}}``."""
        with translated():
            return self.get_conn().savepoint_status(job_id, request_id)

    def wait_for_savepoint(self, job_id: str, request_id: str, timeout: float | None = None) -> str:
        """The savepoint's location once written; FlinkRuntimeSavepointFailed with the cause."""
        with translated():
            return self.get_conn().wait_for_savepoint(job_id, request_id, timeout, poll_interval=0.5)

    def stop_job(
        self, job_id: str, target_directory: str | None = None, drain: bool = False, timeout: float | None = None
    ) -> str:
        """Stop the job with a savepoint (it ends FINISHED); returns the savepoint's location."""
        with translated():
            client = self.get_conn()
            request_id = client.stop_with_savepoint(job_id, target_directory, drain)
            return client.wait_for_savepoint(job_id, request_id, timeout, poll_interval=0.5)

    def latest_checkpoint_path(self, job_id: str) -> str | None:
        """The latest completed checkpoint of the job that still exists (GET
        /jobs/:id/checkpoints, Flink's ``latest.completed.external_path``), to resubmit a
        FAILED job from with ``savepoint_path`` (Flink's ``flink run -s <checkpoint>``).

        None when the job completed no checkpoint, or its end deleted it (a FINISHED job,
        or execution.checkpointing.externalized-checkpoint-retention did not keep it:
        the statistics then say ``discarded``). FlinkRuntimeJobNotFound for an unknown job.
        """
        with translated():
            latest = (self.get_conn().checkpoints(job_id).get("latest") or {}).get("completed")
        if not latest or latest.get("discarded") or not latest.get("external_path"):
            return None
        return str(latest["external_path"])

    # -- waiting -------------------------------------------------------------------------------------

    def wait_until_running(self, job_id: str, timeout: float, parameter: str = "wait_for_running_timeout") -> None:
        """Return once the job is RUNNING, waiting at most ``timeout`` seconds (0: no wait).

        A savepoint or a stop needs a RUNNING job, and a job just submitted is
        INITIALIZING or CREATED for as long as its TaskManagers take to deploy it (tens
        of seconds on a cluster whose Spark is still starting). Raises
        FlinkRuntimeTimeout naming the state it is still in and ``parameter`` (the
        caller's name for ``timeout``), or FlinkRuntimeJobFailed at once for a job that
        has already ended: it will never run again.
        """
        running = JobStatus.RUNNING.value
        state = self.get_job_status(job_id)
        if state != running and not is_globally_terminal(state) and timeout > 0:
            try:
                state = self.wait_for_job(job_id, [running], timeout, poll_timeout=min(timeout, 30.0))
            except FlinkRuntimeTimeout:
                state = self.get_job_status(job_id)
                if state != running:
                    raise FlinkRuntimeTimeout(
                        f"job {job_id} is still {state}, not RUNNING, after {timeout:g} s: a savepoint needs a "
                        f"running job. Raise {parameter} (now {timeout:g} s) if the cluster is slow to start jobs"
                    ) from None
        if is_globally_terminal(state):
            raise FlinkRuntimeJobFailed(
                job_id,
                state,
                f"job {job_id} has already ended {state}: there is no running job to take a savepoint of "
                "(resume a finished pipeline from an earlier savepoint with SubmitJobOperator(from_savepoint=...))",
            )
        if state != running:
            raise FlinkRuntimeTimeout(
                f"job {job_id} is {state}, not RUNNING: a savepoint needs a running job. Give {parameter} "
                "some seconds so the operator waits for it"
            )

    def wait_for_job(
        self,
        job_id: str,
        target_states: Collection[str],
        timeout: float | None = None,
        poll_timeout: float = 30.0,
        progress: ProgressLog | None = None,
    ) -> str:
        """Block until the job reaches one of ``target_states`` or ends; returns that state.

        Follows the job's events with long polls (one request per state change, or per
        ``poll_timeout`` seconds of quiet). A globally terminal state ends the wait even
        if it is not a target: the caller tells success from failure. Raises
        FlinkRuntimeTimeout after ``timeout`` seconds. With ``progress``, each state
        change and, every ``progress.interval`` seconds, the job's progress are logged.
        """
        watched = set(target_states)
        deadline = None if timeout is None else time.monotonic() + timeout
        client = self.get_conn()
        since = 0
        last_state = "unknown"
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise FlinkRuntimeTimeout(
                    f"job {job_id} did not reach {' or '.join(sorted(watched))} within {timeout:g} s; "
                    f"its last state was {last_state}"
                )
            wait = poll_timeout if remaining is None else min(poll_timeout, remaining)
            if progress is not None:
                wait = min(wait, progress.interval)
            try:
                with translated():
                    page = client.poll_events(job_id, since, wait)
            except FlinkRuntimeJobNotFound:
                # Only live jobs have events; a job moved to the archive answers GET /jobs/:id.
                state = self.get_job_status(job_id)
                return decisive_state([], state, watched) or state
            since = page.next
            last_state = page.state.value
            decided = decisive_state([event.new_state.value for event in page.events], last_state, watched)
            if decided is not None:
                return decided
            if progress is not None:
                self._report_progress(job_id, page.events, progress)

    def _report_progress(self, job_id: str, events: Sequence[Any], progress: ProgressLog) -> None:
        for event in events:
            progress.log.info("Job %s: %s -> %s", job_id, event.old_state.value, event.new_state.value)
        if progress.due(time.monotonic()):
            try:
                progress.report(self.job_progress(job_id), time.monotonic())
            except FlinkRuntimeException as exc:  # progress is news, never a reason to stop waiting
                progress.log.debug("No progress of job %s: %s", job_id, exc)

    # -- async, for the trigger ----------------------------------------------------------------------

    async def a_get_job_status(self, job_id: str) -> str:
        data = await self._a_get_json(f"/jobs/{_quote(job_id)}")
        return str(data["state"])

    async def a_poll_events(self, job_id: str, since: int, timeout: float) -> dict[str, Any]:
        """One long poll of GET /jobs/:id/events: ``{"events", "next", "state"}``.

        Waits up to ``timeout`` seconds (at most 60, the REST API's limit) for an
        event with id >= ``since``; pass the answer's ``next`` as the next ``since``.
        """
        wait = min(max(float(timeout), 0.0), MAX_POLL_SECONDS)
        return await self._a_get_json(
            f"/jobs/{_quote(job_id)}/events", params={"since": max(int(since), 0), "timeout": wait}, extra_wait=wait
        )

    async def a_cancel_job(self, job_id: str) -> None:
        """PATCH /jobs/:id?mode=cancel, as cancel_job. A job that ended FINISHED or FAILED
        answers 409 (FlinkRuntimeApiError); a CANCELED one is acknowledged again."""
        await self._a_request("PATCH", f"/jobs/{_quote(job_id)}", params={"mode": "cancel"})

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    async def __aenter__(self) -> FlinkRuntimeHook:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _a_get_json(self, path: str, params: dict[str, Any] | None = None, extra_wait: float = 0.0) -> dict:
        return await self._a_request("GET", path, params, extra_wait)

    async def _a_request(
        self, method: str, path: str, params: dict[str, Any] | None = None, extra_wait: float = 0.0
    ) -> dict:
        settings = await self._a_get_settings()
        if self._async_client is None:
            headers = dict(_HEADERS)
            if settings.token:
                headers["Authorization"] = f"Bearer {settings.token}"
            self._async_client = httpx.AsyncClient(
                base_url=settings.rest_url,
                headers=headers,
                verify=settings.verify,
                timeout=settings.timeout,
                transport=self._async_transport,
            )
        timeout = httpx.Timeout(settings.timeout, read=settings.timeout + extra_wait)
        # The same retry rule and error mapping as the sync side (JobClient): client/http.py.
        policy = RetryPolicy(self.retry_limit, self.retry_delay, MAX_RETRY_BACKOFF)
        with translated():
            response = await a_send(self._async_client, policy, method, path, params=params, timeout=timeout)
            return json_object(response)


def _quote(job_id: str) -> str:
    return quote(str(job_id), safe="")
