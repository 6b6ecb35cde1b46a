"""FlinkRuntimeHook: every request the provider makes to a JobManager's REST API.

Operators, sensors and the trigger never speak HTTP themselves: the hook resolves the
connection (or starts the embedded cluster), retries what may succeed on a second try,
and turns error answers into exceptions that carry the JobManager's own messages.

It talks through the project's clients: ``JobClient`` for the blocking methods that
operators and sensors call on a worker, ``AsyncJobClient`` for the ``a_``-prefixed ones
the trigger awaits on the triggerer's event loop (Airflow's convention, as the
Databricks provider's hook). Both are built from one set of settings (retries, back-off,
token, TLS, timeout) and send the same call definitions (flink_runtime.client.calls);
what takes several requests - waiting for a state, a failed job's root exception and
log lines, its progress - is written once as a plan (hooks/plans.py) that either client
runs. So each ``x``/``a_x`` pair is one definition sent two ways. The async side covers
what a trigger needs: the job's state and details, its exceptions, progress and failure
report, waiting for a state, and cancelling (on_kill).

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
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx
from airflow.sdk import BaseHook

from flink_runtime.airflow.exceptions import (
    FlinkRuntimeException,
    FlinkRuntimeInvalidInput,
    FlinkRuntimeJobFailed,
    FlinkRuntimeTimeout,
)
from flink_runtime.airflow.hooks import plans
from flink_runtime.airflow.hooks.connection import (
    ClusterSettings,
    check_embedded,
    cluster_settings,
    describe_overview,
    embedded_options,
)
from flink_runtime.airflow.hooks.errors import translated
from flink_runtime.airflow.job_states import is_globally_terminal
from flink_runtime.airflow.progress import ProgressLog
from flink_runtime.client import calls
from flink_runtime.client import plans as client_plans
from flink_runtime.client.async_job_client import AsyncJobClient
from flink_runtime.client.calls import Call, EventPage
from flink_runtime.client.job_client import JobClient
from flink_runtime.client.job_graph_source import load_job_graph_document, set_config_defaults
from flink_runtime.client.plans import Plan
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import JobGraph

if TYPE_CHECKING:
    from flink_runtime.pipeline import Pipeline

__all__ = ["FlinkRuntimeHook"]

T = TypeVar("T")

# The longest pause between two retries, whatever retry_delay and retry_limit say.
MAX_RETRY_BACKOFF = 30.0
# Let a proxy in front (and the JobManager's access log) know what is asking.
USER_AGENT = "flink-runtime-airflow"
# How often a savepoint request is asked about: a task's log stays readable, and a few
# hundred milliseconds are nothing next to writing the savepoint.
_SAVEPOINT_POLL_SECONDS = 0.5


class FlinkRuntimeHook(BaseHook):
    """Talks to one flink-runtime cluster through its REST API.

    Each ``a_x`` method is ``x`` for an event loop: the same requests, answer and errors.

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
        self._async_client: AsyncJobClient | None = None

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

    def _client_arguments(self, settings: ClusterSettings) -> dict[str, Any]:
        """What both clients are built with: the one place retries, token and TLS are set."""
        return {
            "timeout": settings.timeout,
            "retries": self.retry_limit,
            "backoff": self.retry_delay,
            "max_backoff": MAX_RETRY_BACKOFF,
            "token": settings.token or "",
            "verify": settings.verify,
            "user_agent": USER_AGENT,
        }

    def get_conn(self) -> JobClient:
        """The JobClient this hook sends its blocking requests with."""
        if self._client is None:
            settings = self._get_settings()
            self._client = JobClient(settings.rest_url, **self._client_arguments(settings), transport=self._transport)
        return self._client

    async def a_get_conn(self) -> AsyncJobClient:
        """The AsyncJobClient this hook sends its ``a_`` requests with."""
        if self._async_client is None:
            settings = await self._a_get_settings()
            self._async_client = AsyncJobClient(
                settings.rest_url, **self._client_arguments(settings), transport=self._async_transport
            )
        return self._async_client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> FlinkRuntimeHook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    async def __aenter__(self) -> FlinkRuntimeHook:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _run(self, work: Call[T] | Plan[T]) -> T:
        """One call or plan through the JobClient, its errors as the provider's exceptions."""
        with translated():
            client = self.get_conn()
            return client.call(work) if isinstance(work, Call) else client.run(work)

    async def _a_run(self, work: Call[T] | Plan[T]) -> T:
        """``_run`` through the AsyncJobClient."""
        with translated():
            client = await self.a_get_conn()
            return await (client.call(work) if isinstance(work, Call) else client.run(work))

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
            overview = self._run(calls.cluster_overview())
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
        return self._run(plans.job_or_none(job_id))

    async def a_get_job(self, job_id: str) -> dict[str, Any] | None:
        return await self._a_run(plans.job_or_none(job_id))

    def get_job_status(self, job_id: str) -> str:
        """The job's state; FlinkRuntimeJobNotFound for a job the JobManager does not know."""
        return self._run(plans.job_state(job_id))

    async def a_get_job_status(self, job_id: str) -> str:
        return await self._a_run(plans.job_state(job_id))

    def get_exceptions(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/exceptions: ``root-exception`` and ``exceptionHistory``."""
        return self._run(calls.job_exceptions(job_id))

    async def a_get_exceptions(self, job_id: str) -> dict[str, Any]:
        return await self._a_run(calls.job_exceptions(job_id))

    def cancel_job(self, job_id: str) -> None:
        """Ask the JobManager to cancel the job. A job that ended FINISHED or FAILED
        answers 409 (FlinkRuntimeApiError); a CANCELED one is acknowledged again."""
        self._run(calls.cancel_job(job_id))

    async def a_cancel_job(self, job_id: str) -> None:
        await self._a_run(calls.cancel_job(job_id))

    def job_failure(self, job_id: str, state: str, reason: str | None = None) -> FlinkRuntimeJobFailed:
        """The exception for a job that ended ``state``, with its root exception if it has one
        and the last log lines of the subtask that raised it (fetched on a best-effort basis)."""
        return self._run(plans.job_failure(job_id, state, reason, self.log))

    async def a_job_failure(self, job_id: str, state: str, reason: str | None = None) -> FlinkRuntimeJobFailed:
        return await self._a_run(plans.job_failure(job_id, state, reason, self.log))

    def job_progress(self, job_id: str) -> str:
        """One line: the job's state and each vertex's subtasks, splits and records (airflow/progress.py)."""
        return self._run(plans.job_progress(job_id))

    async def a_job_progress(self, job_id: str) -> str:
        return await self._a_run(plans.job_progress(job_id))

    # -- savepoints ----------------------------------------------------------------------------------

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, cancel_job: bool = False) -> str:
        """POST /jobs/:id/savepoints; returns the request id (see ``wait_for_savepoint``).

        Not retried once the request may have reached the JobManager: a second POST
        would take a second savepoint.
        """
        return self._run(calls.trigger_savepoint(job_id, target_directory, cancel_job))

    def get_savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        """``{"status": {"id": IN_PROGRESS|COMPLETED}, "operation": {location | failure-cause}}``."""
        return self._run(calls.savepoint_status(job_id, request_id))

    def wait_for_savepoint(self, job_id: str, request_id: str, timeout: float | None = None) -> str:
        """The savepoint's location once written; FlinkRuntimeSavepointFailed with the cause."""
        return self._run(client_plans.wait_for_savepoint(job_id, request_id, timeout, _SAVEPOINT_POLL_SECONDS))

    def stop_job(
        self, job_id: str, target_directory: str | None = None, drain: bool = False, timeout: float | None = None
    ) -> str:
        """Stop the job with a savepoint (it ends FINISHED); returns the savepoint's location."""
        return self._run(client_plans.stop(job_id, target_directory, drain, timeout, _SAVEPOINT_POLL_SECONDS))

    def latest_checkpoint_path(self, job_id: str) -> str | None:
        """The latest completed checkpoint of the job that still exists (GET
        /jobs/:id/checkpoints, Flink's ``latest.completed.external_path``), to resubmit a
        FAILED job from with ``savepoint_path`` (Flink's ``flink run -s <checkpoint>``).

        None when the job completed no checkpoint, or its end deleted it (a FINISHED job,
        or execution.checkpointing.externalized-checkpoint-retention did not keep it:
        the statistics then say ``discarded``). FlinkRuntimeJobNotFound for an unknown job.
        """
        latest = (self._run(calls.job_checkpoints(job_id)).get("latest") or {}).get("completed")
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
        return self._run(plans.wait_for_job(job_id, target_states, timeout, poll_timeout, progress))

    async def a_wait_for_job(
        self,
        job_id: str,
        target_states: Collection[str],
        timeout: float | None = None,
        poll_timeout: float = 30.0,
        progress: ProgressLog | None = None,
    ) -> str:
        """``wait_for_job`` without blocking: what the trigger waits with."""
        return await self._a_run(plans.wait_for_job(job_id, target_states, timeout, poll_timeout, progress))

    def poll_events(self, job_id: str, since: int, timeout: float) -> EventPage:
        """One long poll of GET /jobs/:id/events: the events with id >= ``since``, waiting up to
        ``timeout`` seconds (at most 60, the REST API's limit) for one; continue from its ``next``."""
        return self._run(calls.job_events(job_id, since, timeout))

    async def a_poll_events(self, job_id: str, since: int, timeout: float) -> EventPage:
        return await self._a_run(calls.job_events(job_id, since, timeout))


def _quote(job_id: str) -> str:
    return quote(str(job_id), safe="")
