"""Operators that act on a running job: take a savepoint, stop with one, cancel.

Each takes the job as ``job_id``: its id, or SubmitJobOperator's XCom (``job_id_from``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flink_runtime.airflow.exceptions import FlinkRuntimeApiError
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.job_ids import job_id_from
from flink_runtime.airflow.job_states import is_globally_terminal
from flink_runtime.airflow.operators.base import FlinkRuntimeBaseOperator
from flink_runtime.executiongraph.states import JobStatus

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["DEFAULT_WAIT_FOR_RUNNING_TIMEOUT", "CancelJobOperator", "StopJobOperator", "TriggerSavepointOperator"]

#: Seconds a savepoint or stop waits for a job that is not RUNNING yet (a fresh
#: external cluster was seen INITIALIZING a job for 39 s while its Spark started).
DEFAULT_WAIT_FOR_RUNNING_TIMEOUT = 180.0


class _SavepointOperator(FlinkRuntimeBaseOperator):
    """What taking a savepoint and stopping with one share: the job, where, how long."""

    template_fields: Sequence[str] = ("job_id", "target_directory")

    def __init__(
        self,
        *,
        job_id: str | dict[str, Any],
        target_directory: str | None = None,
        flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name,
        timeout: float | None = None,
        wait_for_running_timeout: float = DEFAULT_WAIT_FOR_RUNNING_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(flink_runtime_conn_id=flink_runtime_conn_id, **kwargs)
        if not wait_for_running_timeout >= 0:
            raise ValueError(f"wait_for_running_timeout must be 0 or more seconds, got {wait_for_running_timeout!r}")
        self.job_id = job_id
        self.target_directory = target_directory
        self.timeout = timeout
        self.wait_for_running_timeout = wait_for_running_timeout

    def _wait_until_running(self, job_id: str) -> None:
        # Right after a submit the job is INITIALIZING for as long as its deployment
        # takes; the cluster refuses a savepoint until it runs (409).
        self.hook.wait_until_running(job_id, self.wait_for_running_timeout)


class TriggerSavepointOperator(_SavepointOperator):
    """Take a savepoint of a running job and return its location (XCom ``return_value``).

    :param job_id: the job (templated; e.g. ``{{ ti.xcom_pull('submit', key='job_id') }}``), or
        SubmitJobOperator's XCom dict (``submit.output``).
    :param target_directory: where to write it; None: the cluster's state.savepoints.dir.
    :param cancel_job: cancel the job once the savepoint is written.
    :param timeout: seconds to wait for the savepoint; it may still complete after them.
    :param wait_for_running_timeout: seconds to wait for a job that is not RUNNING yet
        (one just submitted is INITIALIZING while it deploys) before the savepoint is
        triggered; the task fails after them naming the job's state. 0: do not wait.
    """

    def __init__(self, *, cancel_job: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancel_job = cancel_job

    def execute(self, context: Context) -> str:
        job_id = job_id_from(self.job_id)
        self._publish_link(context, job_id)
        self._wait_until_running(job_id)
        request_id = self.hook.trigger_savepoint(job_id, self.target_directory, self.cancel_job)
        self.log.info("Savepoint of job %s triggered (request %s)", job_id, request_id)
        location = self.hook.wait_for_savepoint(job_id, request_id, self.timeout)
        self.log.info("Savepoint completed: %s", location)
        return location


class StopJobOperator(_SavepointOperator):
    """Stop a job with a savepoint (it ends FINISHED) and return the savepoint's location.

    The job hands out no more input splits, lets in-flight work finish, publishes its
    output and writes the savepoint. Resume it later with
    ``SubmitJobOperator(from_savepoint=...)``.

    :param job_id: the job (templated).
    :param target_directory: where to write the savepoint; None: state.savepoints.dir.
    :param drain: Flink's flag, passed on; batch pipelines have no windows or timers to
        flush, so it changes nothing there.
    :param timeout: seconds to wait for the savepoint.
    :param wait_for_running_timeout: seconds to wait for a job that is not RUNNING yet
        before stopping it (as TriggerSavepointOperator). 0: do not wait.
    """

    def __init__(self, *, drain: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drain = drain

    def execute(self, context: Context) -> str:
        job_id = job_id_from(self.job_id)
        self._publish_link(context, job_id)
        self._wait_until_running(job_id)
        location = self.hook.stop_job(job_id, self.target_directory, self.drain, self.timeout)
        self.log.info("Job %s stopped with savepoint %s", job_id, location)
        return location


class CancelJobOperator(FlinkRuntimeBaseOperator):
    """Cancel a job and return the state it ended in.

    A job that has already ended is left alone (logged, not an error): either way it
    no longer runs, which is what the task is for.

    :param job_id: the job (templated).
    :param wait_for_completion: wait until the job has ended, not only begun cancelling.
    :param timeout: seconds to wait for it.
    """

    template_fields: Sequence[str] = ("job_id",)

    def __init__(
        self,
        *,
        job_id: str | dict[str, Any],
        flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name,
        wait_for_completion: bool = True,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(flink_runtime_conn_id=flink_runtime_conn_id, **kwargs)
        self.job_id = job_id
        self.wait_for_completion = wait_for_completion
        self.timeout = timeout

    def execute(self, context: Context) -> str:
        job_id = job_id_from(self.job_id)
        self._publish_link(context, job_id)
        try:
            self.hook.cancel_job(job_id)
        except FlinkRuntimeApiError as exc:
            state = self.hook.get_job_status(job_id) if exc.status_code == 409 else None
            if state is None or not is_globally_terminal(state):
                raise
            self.log.warning("Job %s had already ended %s; nothing to cancel", job_id, state)
            return state
        if not self.wait_for_completion:
            return JobStatus.CANCELLING.value
        state = self.hook.wait_for_job(job_id, (JobStatus.CANCELED.value,), timeout=self.timeout)
        self.log.info("Job %s ended %s", job_id, state)
        return state
