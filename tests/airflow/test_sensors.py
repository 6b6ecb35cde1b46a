"""JobStatusSensor: poke, fail fast, defer (mocked hook), and a real job."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from airflow.sdk import PokeReturnValue
from airflow.sdk.exceptions import TaskDeferred

from flink_runtime.airflow.exceptions import FlinkRuntimeException, FlinkRuntimeJobFailed, FlinkRuntimeJobNotFound
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.sensors.flink_runtime import JobStatusSensor
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger
from flink_runtime.jobgraph import JobGraph, JobVertex

Context = dict[str, Any]
JOB_ID = "0123456789abcdef0123456789abcdef"
ROOT = "RuntimeError: kaboom\n\nF (1/1) failed:\nTraceback ..."


def sensor(*states: str, **kwargs: Any) -> JobStatusSensor:
    """A sensor whose hook answers ``states`` one poke after another."""
    hook = mock.create_autospec(FlinkRuntimeHook, instance=True)
    hook.get_job_status.side_effect = list(states)
    hook.job_url.side_effect = lambda job_id: f"http://jm:8081/jobs/{job_id}"
    hook.job_failure.side_effect = lambda job_id, state, reason=None: FlinkRuntimeJobFailed(
        job_id, state, reason or f"Flink Runtime job {job_id} ended {state}: RuntimeError: kaboom", ROOT
    )
    op = JobStatusSensor(task_id="wait", job_id=JOB_ID, **({"poke_interval": 0.01} | kwargs))
    op.__dict__["hook"] = hook
    return op


def outcome(result: PokeReturnValue) -> tuple[bool, Any]:
    return result.is_done, result.xcom_value


def test_poke_is_done_on_a_target_state_with_the_state_as_xcom(task_context: Callable[..., Context]) -> None:
    op = sensor("RUNNING", "FINISHED")
    assert outcome(op.poke(task_context())) == (False, None)
    assert outcome(op.poke(task_context())) == (True, "FINISHED")


def test_execute_pokes_until_the_target_and_links_the_job(task_context: Callable[..., Context]) -> None:
    context = task_context()
    op = sensor("CREATED", "RUNNING", "RUNNING", "FINISHED")
    assert op.execute(context) == "FINISHED"
    assert op.hook.get_job_status.call_count == 4
    assert context["ti"].xcoms["job_url"] == f"http://jm:8081/jobs/{JOB_ID}"


@pytest.mark.parametrize("state", ["FAILED", "CANCELED"])
def test_a_failed_or_cancelled_job_fails_fast_with_its_root_exception(
    task_context: Callable[..., Context], state: str
) -> None:
    op = sensor("RUNNING", state, "never asked")
    with pytest.raises(FlinkRuntimeJobFailed, match=f"ended {state}: RuntimeError: kaboom") as failure:
        op.execute(task_context())
    assert failure.value.root_exception == ROOT
    assert op.hook.get_job_status.call_count == 2


def test_a_failure_state_that_is_a_target_is_success(task_context: Callable[..., Context]) -> None:
    assert sensor("CANCELED", target_status=["FINISHED", "CANCELED"]).execute(task_context()) == "CANCELED"


def test_a_job_that_ended_without_reaching_the_target_fails(task_context: Callable[..., Context]) -> None:
    op = sensor("FINISHED", target_status="RUNNING")
    with pytest.raises(FlinkRuntimeJobFailed):
        op.execute(task_context())
    op.hook.job_failure.assert_called_once_with(
        JOB_ID, "FINISHED", f"job {JOB_ID} ended FINISHED without reaching RUNNING"
    )


def test_an_unknown_job_fails_the_sensor(task_context: Callable[..., Context]) -> None:
    op = sensor()
    op.hook.get_job_status.side_effect = FlinkRuntimeJobNotFound(404, [f"Job {JOB_ID} not found"])
    with pytest.raises(FlinkRuntimeJobNotFound):
        op.execute(task_context())


def test_deferrable_looks_once_then_defers(task_context: Callable[..., Context]) -> None:
    op = sensor("RUNNING", deferrable=True, target_status=["FINISHED", "CANCELED"], timeout=300, poll_timeout=9)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, JobStatusTrigger)
    assert trigger.target_statuses == ["FINISHED", "CANCELED"]
    assert trigger.failure_statuses == ["FAILED"]
    assert trigger.poll_timeout == 9.0
    assert trigger.cancel_on_kill is False  # a sensor only watches the job
    assert trigger.end_from_trigger is True  # nothing left for a worker to do
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == timedelta(seconds=300)


@pytest.mark.parametrize(
    ("kwargs", "ends_from_trigger"),
    [
        ({"end_from_trigger": False}, False),
        ({"soft_fail": True}, False),
        ({"end_from_trigger": True, "soft_fail": True}, False),
        ({"end_from_trigger": True}, True),
    ],
)
def test_a_sensor_resumes_on_a_worker_when_asked_or_when_a_failure_must_become_a_skip(
    task_context: Callable[..., Context], kwargs: dict[str, Any], ends_from_trigger: bool
) -> None:
    op = sensor("RUNNING", deferrable=True, **kwargs)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context())
    assert deferred.value.trigger.end_from_trigger is ends_from_trigger


class _Listener:
    """A listener as a plugin registers one (the OpenLineage provider's, say)."""


def test_by_default_a_sensor_resumes_on_a_worker_when_airflow_has_listeners_and_says_why(
    task_context: Callable[..., Context], capfd: pytest.CaptureFixture
) -> None:
    from airflow.sdk.listener import get_listener_manager

    manager = get_listener_manager()
    listener = _Listener()
    manager.add_listener(listener)
    try:
        op = sensor("RUNNING", deferrable=True)
        with pytest.raises(TaskDeferred) as deferred:
            op.execute(task_context())
    finally:
        manager.pm.unregister(listener)
    assert deferred.value.trigger.end_from_trigger is False
    assert deferred.value.trigger.lineage_events is None
    # ... and the DAG still loads: Airflow refuses end_from_trigger=True with listeners.
    assert op.end_from_trigger is None
    logged = capfd.readouterr()  # the task log goes through Airflow's structlog, to the console here
    why = [line for line in (logged.out + logged.err).splitlines() if "will resume on a worker" in line]
    assert len(why) == 1, why  # said once
    assert (
        f"The task will resume on a worker when job {JOB_ID} is done, instead of ending in the triggerer: "
        "Airflow calls listeners (tests.airflow.test_sensors._Listener) only on a worker. "
        "end_from_trigger=False makes this the explicit choice."
    ) in why[0]


def test_the_openlineage_listener_alone_does_not_send_the_sensor_back_to_a_worker(
    task_context: Callable[..., Context], openlineage_events: Path, capfd: pytest.CaptureFixture
) -> None:
    # Its end events are prepared at the deferral and sent by the trigger (test_real_airflow.py
    # checks them under a real triggerer); this fake task instance has no DAG run to build them from.
    op = sensor("RUNNING", deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context())
    assert deferred.value.trigger.end_from_trigger is True
    logged = capfd.readouterr()
    assert "will resume on a worker" not in logged.out + logged.err


def test_deferrable_does_not_defer_when_the_job_is_already_there(task_context: Callable[..., Context]) -> None:
    assert sensor("FINISHED", deferrable=True).execute(task_context()) == "FINISHED"


def test_execute_complete(task_context: Callable[..., Context]) -> None:
    op = sensor()
    context = task_context()
    success = {"status": "success", "job_id": JOB_ID, "state": "RUNNING", "message": "reached"}
    assert op.execute_complete(context, success) == "RUNNING"
    with pytest.raises(FlinkRuntimeJobFailed, match="is FAILED"):
        op.execute_complete(
            context, {"status": "error", "job_id": JOB_ID, "state": "FAILED", "message": "job is FAILED"}
        )
    with pytest.raises(FlinkRuntimeException, match="could not follow"):
        op.execute_complete(
            context, {"status": "error", "job_id": JOB_ID, "state": None, "message": "could not follow"}
        )


def test_job_id_and_target_status_are_templated() -> None:
    assert set(JobStatusSensor.template_fields) == {"job_id", "target_status"}


@pytest.mark.parametrize("mode", ["poke", "reschedule"])
@pytest.mark.integration
def test_waits_for_a_real_job(task_context: Callable[..., Context], minicluster_conn_id: str, mode: str) -> None:
    sleep = JobVertex(id="s", name="S", invokable="sleep", config={"seconds": 1.5})
    with FlinkRuntimeHook(minicluster_conn_id) as hook:
        job_id = hook.submit_job(JobGraph(name="s", vertices=[sleep]))
    op = JobStatusSensor(
        task_id="wait",
        job_id=job_id,
        flink_runtime_conn_id=minicluster_conn_id,
        poke_interval=0.2,
        timeout=60,
        mode=mode,
    )
    assert outcome(op.poke(task_context())) == (False, None)
    if mode == "poke":
        assert op.execute(task_context()) == "FINISHED"
    else:
        # Reschedule mode leaves the slot between pokes (the runner reschedules the task).
        while not (result := op.poke(task_context())).is_done:
            time.sleep(0.2)
        assert result.xcom_value == "FINISHED"


@pytest.mark.parametrize(
    "given",
    [
        {"job_id": JOB_ID, "state": "RUNNING", "outputs": []},  # submit.output, resolved
        str({"job_id": JOB_ID, "state": "RUNNING", "outputs": []}),  # rendered into a string template
    ],
)
def test_the_job_id_may_be_submit_job_operators_xcom(task_context: Callable[..., Context], given: Any) -> None:
    op = sensor("FINISHED")
    op.job_id = given
    assert op.execute(task_context()) == "FINISHED"
    op.hook.get_job_status.assert_called_once_with(JOB_ID)


def test_a_job_id_that_is_no_job_id_fails_with_what_was_given(task_context: Callable[..., Context]) -> None:
    op = sensor("FINISHED")
    op.job_id = {"state": "RUNNING"}
    with pytest.raises(ValueError, match="without a 'job_id'"):
        op.execute(task_context())
