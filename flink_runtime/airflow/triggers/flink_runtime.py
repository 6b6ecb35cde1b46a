"""JobStatusTrigger: waits in the triggerer for a job to reach a state, without polling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from flink_runtime.airflow.exceptions import FlinkRuntimeApiError, FlinkRuntimeException
from flink_runtime.airflow.hooks.errors import log_job_failure
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.progress import ProgressLog
from flink_runtime.airflow.task_end_lineage import emit_task_end_event

__all__ = ["JobStatusTrigger"]


class JobStatusTrigger(BaseTrigger):
    """Fires once the job reaches one of ``target_statuses`` or ``failure_statuses``.

    It follows the JobManager's JobStatusChanged events with long polls
    (``GET /jobs/:id/events``): a request costs nothing while the job is quiet, and
    a change is seen at once rather than at the next polling period. The events are
    replayed from the job's first, so a state the job passed before the trigger
    started still counts. A globally terminal state that is neither a target nor a
    failure (a job FINISHED while a sensor waited for RUNNING) fires an error too:
    nothing can follow it.

    Exactly one event is yielded::

        {"status": "success" | "error", "job_id": ..., "state": <state or None>, "message": ...}

    ``status`` is "success" only for a target state; "error" for a failure state, a
    terminal non-target, or a JobManager that could not be asked (``state`` None).
    Ending the trigger cancels nothing: the job belongs to the task, which may retry
    and re-attach to it (a triggerer restart or hand-over moves the trigger, the job
    runs on). Only a user's kill of the deferred task (mark failed, mark success,
    clear) reaches ``on_kill``, which cancels the job when ``cancel_on_kill`` is set:
    the SubmitJobOperator's trigger owns its job, a sensor's only watches one.

    With ``end_from_trigger`` the trigger ends the task itself instead of handing
    the event back to a worker (Airflow's TaskSuccessEvent/TaskFailedEvent): a target
    state makes the task succeed with the state as its XCom ``return_value``; any
    other outcome fails it (retries apply), after the root exception and the failing
    subtask's last log lines went to the task log. No worker slot, no second start of
    the task: for a sensor, which has nothing left to do, that is most of the latency.

    :param job_id: the job to follow.
    :param flink_runtime_conn_id: the connection to the cluster.
    :param target_statuses: states that end the wait successfully.
    :param failure_statuses: states that end it with an error.
    :param poll_timeout: seconds one long poll may wait for an event (at most 60).
    :param cancel_on_kill: cancel the job when a user kills the deferred task.
    :param end_from_trigger: end the task from the triggerer (see above).
    :param lineage_events: with ``end_from_trigger``: the OpenLineage COMPLETE and FAIL
        events (JSON by type) the task would send at its end on a worker, prepared when
        it deferred (flink_runtime.airflow.task_end_lineage); the trigger sends the one
        that applies when it ends the task, since Airflow's listeners never see that end.
    """

    def __init__(
        self,
        job_id: str,
        flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name,
        target_statuses: Iterable[str] = ("FINISHED",),
        failure_statuses: Iterable[str] = ("FAILED", "CANCELED"),
        poll_timeout: float = 30.0,
        cancel_on_kill: bool = False,
        end_from_trigger: bool = False,
        lineage_events: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.job_id = job_id
        self.flink_runtime_conn_id = flink_runtime_conn_id
        # Lists, not tuples: the serialized kwargs come back as lists, and a trigger
        # rebuilt from them must serialize exactly as this one did.
        self.target_statuses = [str(state) for state in target_statuses]
        self.failure_statuses = [str(state) for state in failure_statuses]
        self.poll_timeout = float(poll_timeout)
        self.cancel_on_kill = bool(cancel_on_kill)
        self.end_from_trigger = bool(end_from_trigger)
        self.lineage_events = dict(lineage_events) if lineage_events else None
        self._xcom_channel_ready: asyncio.Future[None] | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "flink_runtime.airflow.triggers.flink_runtime.JobStatusTrigger",
            {
                "job_id": self.job_id,
                "flink_runtime_conn_id": self.flink_runtime_conn_id,
                "target_statuses": self.target_statuses,
                "failure_statuses": self.failure_statuses,
                "poll_timeout": self.poll_timeout,
                "cancel_on_kill": self.cancel_on_kill,
                "end_from_trigger": self.end_from_trigger,
                "lineage_events": self.lineage_events,
            },
        )

    def __repr__(self) -> str:
        # The prepared lineage events are kilobytes of JSON: named, not printed.
        classpath, kwargs = self.serialize()
        if kwargs["lineage_events"]:
            kwargs["lineage_events"] = f"<{', '.join(sorted(kwargs['lineage_events']))} events>"
        return self.repr(classpath, kwargs)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if self.end_from_trigger and self.task_instance is not None:
            # Airflow builds the triggerer's execution-API channel on its first use (10-15 s
            # measured on 2 busy cores): use it now, while the job runs, so that pushing the
            # XCom at the end does not pay for that.
            self._xcom_channel_ready = asyncio.ensure_future(self._open_execution_api_channel())
        async with FlinkRuntimeHook(self.flink_runtime_conn_id) as hook:
            # The same wait as SubmitJobOperator's on a worker (hooks/plans.py), awaited.
            try:
                state = await hook.a_wait_for_job(
                    self.job_id,
                    [*self.target_statuses, *self.failure_statuses],
                    poll_timeout=self.poll_timeout,
                    progress=ProgressLog(self.log),
                )
            except FlinkRuntimeException as exc:
                event = await self._ending(hook, None, f"could not follow job {self.job_id}: {exc}")
            else:
                event = await self._ending(hook, state)
        yield event

    async def on_kill(self) -> None:
        """A user killed the deferred task: cancel its job (Airflow bounds the time this
        takes; a job that already ended is left as it is)."""
        if not self.cancel_on_kill:
            return
        async with FlinkRuntimeHook(self.flink_runtime_conn_id) as hook:
            try:
                await hook.a_cancel_job(self.job_id)
            except FlinkRuntimeApiError as exc:
                if exc.status_code != 409:
                    raise
                self.log.info("Job %s had ended already; nothing to cancel: %s", self.job_id, exc)
                return
        self.log.info("The task was killed: cancelled job %s.", self.job_id)

    async def _ending(self, hook: FlinkRuntimeHook, state: str | None, message: str | None = None) -> TriggerEvent:
        """The one event this trigger yields: for the task to resume with, or, with
        ``end_from_trigger``, one that ends the task."""
        event = self._event(state, message)
        if not self.end_from_trigger or self.task_instance is None:
            # Without a task instance (dag.test()'s inline run) nobody could end the
            # task from here: it resumes and execute_complete decides, as without the flag.
            return event
        if event.payload["status"] == "success":
            self.log.info("Job %s is %s; the task succeeds (ended by the triggerer).", self.job_id, state)
            success = await self._success_with_xcom(state)
            await self._send_lineage(True)
            return success
        if state is None:
            self.log.error("The task fails: %s", event.payload["message"])
            await self._send_lineage(False, event.payload["message"])
            return TaskFailedEvent()
        # The task never resumes on a worker, so its log gets here what raise_job_failure
        # would have written there (both through log_job_failure).
        failure = await hook.a_job_failure(self.job_id, state, event.payload["message"])
        self.log.error("The task fails: %s", failure)
        log_job_failure(self.log, failure)
        await self._send_lineage(False, str(failure), failure.root_exception)
        return TaskFailedEvent()

    async def _send_lineage(self, succeeded: bool, reason: str | None = None, stack_trace: str | None = None) -> None:
        """The OpenLineage end event the listener would have sent on a worker; never a
        reason for the task not to end (as on a worker, lineage trouble is a warning)."""
        if not self.lineage_events:
            return
        try:
            await emit_task_end_event(self.lineage_events, succeeded, reason, self.log, stack_trace)
        except Exception as exc:
            self.log.warning("Could not send the task's OpenLineage end event: %s", exc)

    async def _success_with_xcom(self, state: str | None) -> TaskSuccessEvent:
        """TaskSuccessEvent, with the reached state as the task's XCom ``return_value``.

        Pushed through the Task SDK (the triggerer's execution-API channel), as a task's
        own return value is: Airflow 3.3 stores an event's ``xcoms`` JSON-encoded a
        second time, so a downstream task would pull '"FINISHED"' instead of 'FINISHED'.
        """
        ti = self.task_instance
        from airflow.sdk.bases.xcom import BaseXCom

        if self._xcom_channel_ready is not None:
            await self._xcom_channel_ready
        await BaseXCom.aset(
            "return_value", state, dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=ti.map_index
        )
        return TaskSuccessEvent()

    async def _open_execution_api_channel(self) -> None:
        """Ask the execution API something that exists: the task's DAG run state. (Reading
        the task's own XCom, which does not exist yet, made the triggerer log an ERROR
        "XCom not found" for every sensor.)"""
        from airflow.sdk.execution_time.comms import GetDagRunState

        ti = self.task_instance
        try:
            from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS  # set only in a triggerer

            await SUPERVISOR_COMMS.asend(GetDagRunState(dag_id=ti.dag_id, run_id=ti.run_id))
        except Exception as exc:  # only a warm-up: the push at the end reports real trouble
            self.log.debug("Reading the task's DAG run state failed: %s", exc)

    def _event(self, state: str | None, message: str | None = None) -> TriggerEvent:
        if state in self.target_statuses:
            status = "success"
            message = message or f"job {self.job_id} reached {state}"
        else:
            status = "error"
            if message is None and state in self.failure_statuses:
                message = f"job {self.job_id} is {state}"
            elif message is None:
                message = f"job {self.job_id} ended {state} without reaching {' or '.join(self.target_statuses)}"
        return TriggerEvent({"status": status, "job_id": self.job_id, "state": state, "message": message})
