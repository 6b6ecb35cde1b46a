"""JobStatusSensor: wait for a flink-runtime job to reach a state."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf

from flink_runtime.airflow.exceptions import FlinkRuntimeException
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.job_ids import job_id_from
from flink_runtime.airflow.job_states import is_globally_terminal
from flink_runtime.airflow.links import FlinkRuntimeJobLink
from flink_runtime.airflow.operators.base import raise_job_failure
from flink_runtime.airflow.task_end_lineage import listeners_needing_a_worker, task_end_events
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["JobStatusSensor"]

_FAILURES = ("FAILED", "CANCELED")


class JobStatusSensor(BaseSensorOperator):
    """Wait until a job is in ``target_status``; the reached state is the XCom.

    Fails at once, with the job's root exception in the task log, when the job ends
    FAILED or CANCELED (unless that is a target) or ends in any state that is not a
    target: nothing can follow a terminal state, so waiting on would only wait for
    the timeout. Works in poke and reschedule mode, and deferrable (JobStatusTrigger,
    which follows the job's events instead of poking). Deferred, the sensor by default
    ends from the triggerer: the trigger marks the task success (the state as XCom) or
    failed (root exception and the failing subtask's log lines in the task log) without
    handing it back to a worker, which saves a worker start per sensor.

    :param job_id: the job (templated): its id or SubmitJobOperator's XCom (``submit.output``).
    :param target_status: a state or a list of states, e.g. "RUNNING" or
        ["FINISHED", "CANCELED"] (templated).
    :param flink_runtime_conn_id: the connection to the cluster.
    :param deferrable: wait in the triggerer instead of poking.
    :param poll_timeout: deferrable only: seconds one long poll may wait.
    :param end_from_trigger: deferrable only: let the triggerer end the task. None (the
        default) does so unless Airflow has listeners other than the OpenLineage
        provider's (whose COMPLETE/FAIL event the trigger sends itself, see
        flink_runtime.airflow.task_end_lineage): they need the task to end on a worker,
        and the task log says so. Airflow refuses to load a DAG whose task sets True
        while any listener is registered. False always resumes on a worker
        (``execute_complete``), as does a ``soft_fail`` sensor, since only a worker turns
        a failure into a skip.
    """

    template_fields: Sequence[str] = ("job_id", "target_status")
    operator_extra_links = (FlinkRuntimeJobLink(),)
    ui_color = "#e3eef9"

    def __init__(
        self,
        *,
        job_id: str,
        target_status: str | Sequence[str] = "FINISHED",
        flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_timeout: float = 30.0,
        end_from_trigger: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.target_status = target_status
        self.flink_runtime_conn_id = flink_runtime_conn_id
        self.deferrable = deferrable
        self.poll_timeout = poll_timeout
        self.end_from_trigger = end_from_trigger

    @cached_property
    def hook(self) -> FlinkRuntimeHook:
        return FlinkRuntimeHook(self.flink_runtime_conn_id)

    @property
    def target_statuses(self) -> list[str]:
        if isinstance(self.target_status, str):
            return [self.target_status]
        return [str(state) for state in self.target_status]

    def execute(self, context: Context) -> Any:
        self.job_id = job_id_from(self.job_id)
        FlinkRuntimeJobLink.persist(context, self.hook.job_url(self.job_id))
        if not self.deferrable:
            return super().execute(context)
        # One look first: a job already there needs no trip through the triggerer.
        result = self.poke(context)
        if result:
            return result.xcom_value
        ends_from_trigger = self._ends_from_trigger()
        self.defer(
            trigger=JobStatusTrigger(
                self.job_id,
                self.flink_runtime_conn_id,
                target_statuses=self.target_statuses,
                failure_statuses=[state for state in _FAILURES if state not in self.target_statuses],
                poll_timeout=self.poll_timeout,
                end_from_trigger=ends_from_trigger,
                # What the OpenLineage listener would send at the end on a worker: the
                # trigger sends it when it ends the task itself.
                lineage_events=task_end_events(context, self.log) if ends_from_trigger else None,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _ends_from_trigger(self) -> bool:
        if self.end_from_trigger is not None:
            return self.end_from_trigger and not self.soft_fail
        if self.soft_fail:
            return False
        needing_a_worker = listeners_needing_a_worker()
        if needing_a_worker:
            # Said once per deferral (once per try): resuming costs a worker start, ~2 s.
            self.log.info(
                "The task will resume on a worker when job %s is done, instead of ending in the triggerer: "
                "Airflow calls listeners (%s) only on a worker. end_from_trigger=False makes this the "
                "explicit choice.",
                self.job_id,
                ", ".join(needing_a_worker),
            )
            return False
        return True

    def poke(self, context: Context) -> PokeReturnValue:
        state = self.hook.get_job_status(self.job_id)
        if state in self.target_statuses:
            self.log.info("Job %s is %s", self.job_id, state)
            return PokeReturnValue(is_done=True, xcom_value=state)
        if is_globally_terminal(state):
            self._fail(state)
        self.log.info("Job %s is %s; waiting for %s", self.job_id, state, " or ".join(self.target_statuses))
        return PokeReturnValue(is_done=False)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        self.job_id = job_id_from(self.job_id)  # a fresh instance: execute() did not run in it
        if event["status"] == "success":
            self.log.info("Job %s is %s", self.job_id, event["state"])
            return str(event["state"])
        if event["state"] is None:
            raise FlinkRuntimeException(event["message"])
        self._fail(str(event["state"]), event["message"])

    def _fail(self, state: str, reason: str | None = None) -> NoReturn:
        if reason is None and state not in _FAILURES:
            reason = f"job {self.job_id} ended {state} without reaching {' or '.join(self.target_statuses)}"
        raise_job_failure(self, self.hook, self.job_id, state, reason)
