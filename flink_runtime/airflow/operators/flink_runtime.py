"""SubmitJobOperator: submit a JobGraph and wait for the job; the operators that take a
savepoint of, stop or cancel a running job (operators/job_control.py) import from here too.

They are thin: the hook does the talking to the cluster, the trigger does the
waiting in deferrable mode; an operator adds what is Airflow's - templating, XCom,
deferral, and what a retried task must not do twice.

Retries never submit a job twice while one is still running. SubmitJobOperator uses
Airflow 3.3's ResumableJobMixin: the job id is kept in the task instance's
``task_state_store`` across tries, and a retry re-attaches to a job still running,
returns at once for one that FINISHED, and submits afresh after FAILED/CANCELED.
Job ids are deterministic as well (uuid5 of dag, task, run, map index and try), which
closes the gap the mixin leaves between submitting and storing the id: a retry finds
a running job of an earlier try by its id even if the id never got stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import ResumableJobMixin, conf
from airflow.sdk.exceptions import TaskDeferralTimeout

from flink_runtime.airflow import lineage
from flink_runtime.airflow.exceptions import (
    FlinkRuntimeApiError,
    FlinkRuntimeException,
    FlinkRuntimeJobNotFound,
    FlinkRuntimeTimeout,
)
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.job_ids import deterministic_job_id, job_id_from
from flink_runtime.airflow.job_states import is_globally_terminal
from flink_runtime.airflow.links import JOB_ID_XCOM_KEY
from flink_runtime.airflow.operators.base import FlinkRuntimeBaseOperator, raise_job_failure
from flink_runtime.airflow.operators.job_control import CancelJobOperator, StopJobOperator, TriggerSavepointOperator
from flink_runtime.airflow.progress import ProgressLog
from flink_runtime.airflow.repair import RESUMABLE_JOB_CONFIG, RESUMED_JOB_CONFIG, failed_job_to_resume
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import JobGraph, new_job_id

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from flink_runtime.pipeline import Pipeline

    JobGraphSource = JobGraph | Pipeline | dict[str, Any] | bytes | str

__all__ = [
    "CancelJobOperator",
    "StopJobOperator",
    "SubmitJobOperator",
    "TriggerSavepointOperator",
    "deterministic_job_id",
    "job_id_from",
    "raise_job_failure",
]

FINISHED = JobStatus.FINISHED.value


def _job_id_of_try(ti: Any, try_number: int) -> str:
    return deterministic_job_id(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, try_number)


class SubmitJobOperator(ResumableJobMixin, FlinkRuntimeBaseOperator):
    """Submit a JobGraph to a flink-runtime cluster and, by default, wait for the job to end.

    Pushes XCom ``job_id`` and ``job_url`` as soon as the job is accepted (the
    "Flink Runtime Job" link works while it runs) and returns ``{"job_id", "state",
    "job_url", "outputs": [{"path", "format", "uri", "records", "bytes"}]}``: one
    output per sink, records and bytes once the job FINISHED (None when not awaited).
    Operators and sensors taking a ``job_id`` accept that dict (``job_id_from``).

    Lineage: the job's sources and sinks (from the JobGraph) are reported to
    OpenLineage (``get_openlineage_facets_on_*``, see ``flink_runtime.airflow.lineage``),
    with each output's rows and bytes on completion. Data-aware scheduling: every
    ``AssetAlias`` among ``outlets`` receives one Asset event per sink once the job
    FINISHED (``file:///...``, ``s3://...``; extra: job id, records, bytes, format), and
    an ``Asset`` outlet that is one of the sinks gets that extra.

    :param job_graph: a JobGraph, a ``flink_runtime.pipeline.Pipeline``, a JSON-like
        dict, JSON text, the path of a .json file (relative to the DAG folder or
        ``template_searchpath``, or absolute; its content is rendered with Jinja), or a
        callable taking the Airflow context and returning one of those.
    :param flink_runtime_conn_id: the connection to the cluster.
    :param from_savepoint: resume the job from this savepoint (a path as the
        JobManager sees it), e.g. the XCom of a StopJobOperator.
    :param wait_for_completion: wait until the job ends; the task fails unless it
        FINISHED, with the job's root exception. False: succeed once submitted.
    :param deferrable: wait in the triggerer (JobStatusTrigger) instead of a worker slot.
    :param poll_timeout: seconds one long poll of the job's events may wait.
    :param timeout: seconds to wait for the job; after them it is cancelled and the
        task fails. None waits as long as the job runs.
    :param durable: keep the job id in the task state store for retries (the
        ResumableJobMixin's switch; deterministic ids apply either way).
    :param resume_failed: repair, not rerun: the job keeps its checkpoints when it fails
        (and takes one every 10 s unless its config says otherwise), and a retry after a
        FAILED job resumes it from its latest checkpoint instead of starting over
        (``flink_runtime.airflow.repair``).
    """

    template_fields: Sequence[str] = ("job_graph", "from_savepoint")
    template_ext: Sequence[str] = (".json",)
    template_fields_renderers = {"job_graph": "json"}
    external_id_key = "flink_runtime_job_id"

    def __init__(
        self,
        *,
        job_graph: JobGraphSource | Callable[[Context], JobGraphSource],
        flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name,
        from_savepoint: str | None = None,
        wait_for_completion: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_timeout: float = 30,
        timeout: float | None = None,
        resume_failed: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(flink_runtime_conn_id=flink_runtime_conn_id, **kwargs)
        self.resume_failed = resume_failed
        self.job_graph = job_graph
        self.from_savepoint = from_savepoint
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_timeout = poll_timeout
        self.timeout = timeout
        self._job_id: str | None = None
        self._graph: Any = None  # the JobGraph submitted (lineage.job_graph_of), once known
        self._result: dict[str, Any] | None = None

    def resolve_template_files(self) -> None:
        # Jinja's loader finds only paths relative to its search path: read an
        # absolute one here, so that Airflow renders its content like any other.
        graph = self.job_graph
        if isinstance(graph, str) and graph.endswith(tuple(self.template_ext)) and Path(graph).is_absolute():
            # Left as it is if unreadable: the worker may see a file the DAG processor does not.
            with contextlib.suppress(OSError):
                self.job_graph = Path(graph).read_text()
        super().resolve_template_files()

    def execute(self, context: Context) -> dict[str, Any]:
        return self.execute_resumable(context)

    # -- ResumableJobMixin ---------------------------------------------------------------------------

    def submit_job(self, context: Context) -> str:
        ti = context["ti"]
        job_id = self._running_job_of_an_earlier_try(ti)
        if job_id is None:
            job_id = self._submit(context, _job_id_of_try(ti, ti.try_number))
        self._attach(context, job_id)
        return job_id

    def get_job_status(self, external_id: Any, context: Context) -> str:
        try:
            return self.hook.get_job_status(str(external_id))
        except FlinkRuntimeJobNotFound:
            return "UNKNOWN"  # expired from the job store: nothing to re-attach to

    def is_job_active(self, status: str) -> bool:
        # A job being cancelled will not finish: better a fresh one than waiting for that.
        return status not in ("UNKNOWN", JobStatus.CANCELLING.value) and not is_globally_terminal(status)

    def is_job_succeeded(self, status: str) -> bool:
        return status == FINISHED

    def poll_until_complete(self, external_id: Any, context: Context) -> dict[str, Any]:
        job_id = str(external_id)
        self._attach(context, job_id)
        if not self.wait_for_completion:
            return self._succeeded(context, job_id)
        if self.deferrable:
            state = self.hook.get_job_status(job_id)
            if not is_globally_terminal(state):
                self.defer(
                    trigger=JobStatusTrigger(
                        job_id, self.flink_runtime_conn_id, poll_timeout=self.poll_timeout, cancel_on_kill=True
                    ),
                    method_name="execute_complete",
                    kwargs=self._graph_for_resumption(),
                    timeout=timedelta(seconds=self.timeout) if self.timeout is not None else None,
                )
        else:
            try:
                state = self.hook.wait_for_job(
                    job_id, [FINISHED], self.timeout, self.poll_timeout, progress=ProgressLog(self.log)
                )
            except FlinkRuntimeTimeout:
                self._cancel(job_id, f"it did not finish within the operator's timeout of {self.timeout:g} s")
                raise
        return self._finish(context, job_id, state)

    def get_job_result(self, external_id: Any, context: Context) -> dict[str, Any]:
        job_id = str(external_id)
        self._attach(context, job_id)
        return self._succeeded(context, job_id, FINISHED)

    # -- deferral ------------------------------------------------------------------------------------

    def execute_complete(
        self, context: Context, event: dict[str, Any], job_graph: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        job_id = str(event["job_id"])
        self._job_id = job_id
        if job_graph is not None and self._graph is None:
            self._graph = JobGraph.from_dict(job_graph)
        if event["state"] is None:
            raise FlinkRuntimeException(event["message"])
        reason = None if event["status"] == "success" else event["message"]
        return self._finish(context, job_id, str(event["state"]), reason)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout:
            # The trigger knows no deadline; the timeout is ours, so is cancelling the job.
            job_id = context["ti"].xcom_pull(task_ids=self.task_id, key=JOB_ID_XCOM_KEY)
            if job_id:
                self._cancel(str(job_id), f"it did not finish within the operator's timeout of {self.timeout:g} s")
            raise

    def on_kill(self) -> None:
        if self._job_id is not None:
            self._cancel(self._job_id, "the task was killed")

    # -- internals -----------------------------------------------------------------------------------

    def _running_job_of_an_earlier_try(self, ti: Any) -> str | None:
        """The newest job this task instance submitted, if it still runs.

        Covers a worker lost between submitting and storing the id. Only a running
        job counts: a FINISHED one found this way may be what a cleared task is asked
        to redo, and the task state store (cleared on success) knows the other case.
        """
        for try_number in range(int(ti.try_number), 0, -1):
            job_id = _job_id_of_try(ti, try_number)
            job = self.hook.get_job(job_id)
            if job is None:
                continue
            if self.is_job_active(str(job.get("state"))):
                self.log.info("Re-attaching to job %s (%s), submitted by try %d", job_id, job.get("state"), try_number)
                return job_id
            return None
        return None

    def build_job_graph(self, context: Context) -> JobGraphSource:
        """What to submit: ``job_graph``, or what it returns when it is a callable.

        Called on the task being executed (its template fields rendered), once per
        try: ``@task.flink_runtime`` overrides it to call the decorated function.
        """
        graph = self.job_graph
        return graph(context) if callable(graph) else graph

    @property
    def builds_graph_at_runtime(self) -> bool:
        """Whether the graph is known only once ``build_job_graph`` ran with a context."""
        return callable(self.job_graph)

    def _graph_for_resumption(self) -> dict[str, Any] | None:
        """The next_kwargs of a deferral: a graph built at runtime, as JSON, so that the
        resumed task learns the job's outputs without building it a second time."""
        if not self.builds_graph_at_runtime or self._graph is None:
            return None
        try:
            return {"job_graph": lineage.job_graph_of(self._graph).to_dict()}
        except Exception as exc:  # lineage only: never a reason not to wait for the job
            self.log.warning("Cannot keep the job graph across the deferral (%s)", exc)
            return None

    def _submit(self, context: Context, job_id: str) -> str:
        graph = self.build_job_graph(context)
        self._graph = graph
        savepoint = self.from_savepoint or None
        config = RESUMABLE_JOB_CONFIG if self.resume_failed else None
        if self.resume_failed:
            ti = context["ti"]
            failed = failed_job_to_resume(self.hook, partial(_job_id_of_try, ti), int(ti.try_number), self.log)
            if failed is not None:
                savepoint = failed.checkpoint_path
                config = RESUMED_JOB_CONFIG
                self.log.info(
                    "Resuming job %s (try %d, FAILED) from its checkpoint %s instead of starting over; it got "
                    "as far as: %s",
                    failed.job_id,
                    failed.try_number,
                    failed.checkpoint_path,
                    failed.progress,
                )

        def submit(job_id: str) -> str:
            return self.hook.submit_job(graph, job_id=job_id, savepoint_path=savepoint, config_defaults=config)

        try:
            job_id = submit(job_id)
        except FlinkRuntimeApiError as exc:
            if exc.status_code != 409:
                raise
            # This very try ran before (its worker was lost): its job is ours.
            state = self.get_job_status(job_id, context)
            if self.is_job_active(state) or state == FINISHED:
                self.log.info("Job %s of this try already exists (%s); attaching to it", job_id, state)
                return job_id
            job_id = submit(new_job_id())
        self.log.info("Submitted job %s to %s", job_id, self.hook.rest_url)
        return job_id

    def _attach(self, context: Context, job_id: str) -> None:
        if self._job_id == job_id:
            return
        self._job_id = job_id
        context["ti"].xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        self._publish_link(context, job_id)
        self.log.info("Job %s: %s", job_id, self.hook.job_url(job_id))

    def _finish(self, context: Context, job_id: str, state: str, reason: str | None = None) -> dict[str, Any]:
        if state == FINISHED:
            self.log.info("Job %s FINISHED", job_id)
            return self._succeeded(context, job_id, FINISHED)
        raise_job_failure(self, self.hook, job_id, state, reason)

    def _succeeded(self, context: Context, job_id: str, state: str | None = None) -> dict[str, Any]:
        # A successful task has nothing left to resume: with the id gone, clearing the
        # task runs the job again instead of returning the old result.
        store = context.get("task_state_store")
        if store is not None and self.durable:
            store.delete(self.external_id_key)
        # The mixin asks for the result after polling, which already built it: once per job,
        # so asset events are not added twice.
        if self._result is None or self._result["job_id"] != job_id:
            try:
                details = self.hook.get_job(job_id) or {}
            except FlinkRuntimeException as exc:  # the job did its work: counts are news, not a reason to fail
                self.log.warning("Could not read what job %s wrote: %s", job_id, exc)
                details = {}
            state = str(details.get("state") or state or "UNKNOWN")
            self._result = lineage.job_result(job_id, state, self.hook.job_url(job_id), self._sinks(context), details)
            lineage.log_outputs(self._result, self.log)
            lineage.record_asset_events(self.outlets, context.get("outlet_events"), self._result, self.log)
        return self._result

    def _sinks(self, context: Context | None) -> list[lineage.DataLocation]:
        graph = self._job_graph(context)
        return lineage.sinks_of(graph) if graph is not None else []

    def _job_graph(self, context: Context | None) -> Any:
        """The JobGraph submitted, for lineage and the XCom; None if unknown.

        A callable is called here only if this try did not submit (it re-attached, or
        resumed from the triggerer) and a context is at hand. A graph that cannot be
        read is logged, never fatal: the job itself is what the task is for.
        """
        if self._graph is None and self.builds_graph_at_runtime and context is None:
            return None
        try:
            if self._graph is None:
                self._graph = self.build_job_graph(context)
            self._graph = lineage.job_graph_of(self._graph)
            return self._graph
        except Exception as exc:
            self.log.warning("No lineage for this task: cannot read its job graph (%s)", exc)
            return None

    # -- OpenLineage (called by the openlineage provider's listener) --------------------------------------

    def get_openlineage_facets_on_start(self) -> OperatorLineage | None:
        return self._lineage(None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage | None:
        return self._lineage(self._result)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage | None:
        submitted = {"job_id": self._job_id, "job_url": self.hook.job_url(self._job_id)} if self._job_id else None
        return self._lineage(submitted)

    def _lineage(self, result: dict[str, Any] | None) -> OperatorLineage | None:
        graph = self._job_graph(None)
        if graph is None:
            return None
        try:
            return lineage.operator_lineage(lineage.sources_of(graph), lineage.sinks_of(graph), result)
        except ImportError:  # the openlineage provider is what calls this: only half installed
            return None

    def _cancel(self, job_id: str, why: str) -> None:
        self.log.warning("Cancelling job %s: %s", job_id, why)
        try:
            self.hook.cancel_job(job_id)
        except FlinkRuntimeException as exc:
            self.log.warning("Could not cancel job %s: %s", job_id, exc)
