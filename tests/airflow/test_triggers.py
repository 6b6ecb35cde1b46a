"""JobStatusTrigger: an exact serialize round trip, and its one event for real jobs."""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.bases.xcom import BaseXCom
from airflow.triggers.base import TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.progress import PROGRESS_INTERVAL
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger
from flink_runtime.client import calls
from flink_runtime.jobgraph import JobGraph, JobVertex

JOB_ID = "0123456789abcdef0123456789abcdef"


def rebuild(trigger: JobStatusTrigger) -> JobStatusTrigger:
    """What the triggerer does: import the class by its path and call it with the kwargs."""
    path, kwargs = trigger.serialize()
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"job_id": JOB_ID},
        {
            "job_id": JOB_ID,
            "flink_runtime_conn_id": "other",
            "target_statuses": ("RUNNING", "FINISHED"),
            "failure_statuses": ["FAILED"],
            "poll_timeout": 5,
            "cancel_on_kill": True,
            "end_from_trigger": True,
            "lineage_events": {"COMPLETE": '{"eventType": "COMPLETE"}', "FAIL": '{"eventType": "FAIL"}'},
        },
    ],
)
def test_serialize_round_trip_is_exact(kwargs: dict[str, Any]) -> None:
    trigger = JobStatusTrigger(**kwargs)
    path, serialized = trigger.serialize()
    assert path == "flink_runtime.airflow.triggers.flink_runtime.JobStatusTrigger"
    assert set(serialized) == {
        "job_id",
        "flink_runtime_conn_id",
        "target_statuses",
        "failure_statuses",
        "poll_timeout",
        "cancel_on_kill",
        "end_from_trigger",
        "lineage_events",
    }
    assert rebuild(trigger).serialize() == (path, serialized)
    assert rebuild(rebuild(trigger)).serialize() == (path, serialized)


def test_its_repr_names_the_prepared_lineage_events_without_printing_them() -> None:
    events = {"COMPLETE": '{"eventType": "COMPLETE", "big": "x"}', "FAIL": '{"eventType": "FAIL"}'}
    text = repr(JobStatusTrigger(JOB_ID, end_from_trigger=True, lineage_events=events))
    assert "<COMPLETE, FAIL events>" in text and '"big"' not in text


def test_serialized_kwargs_survive_airflows_own_encoding() -> None:
    from airflow.serialization.serialized_objects import BaseSerialization

    path, serialized = JobStatusTrigger(JOB_ID, target_statuses=("RUNNING",)).serialize()
    decoded = BaseSerialization.deserialize(BaseSerialization.serialize(serialized))
    assert JobStatusTrigger(**decoded).serialize() == (path, serialized)


# -- run() against a MiniCluster ----------------------------------------------------------------------


@pytest.fixture
def submit(minicluster_conn_id: str) -> Iterator[Any]:
    hook = FlinkRuntimeHook(minicluster_conn_id)

    def submit(invokable: str, **config: Any) -> str:
        vertex = JobVertex(id="v", name=invokable.title(), invokable=invokable, config=config)
        return hook.submit_job(JobGraph(name=invokable, vertices=[vertex]))

    submit.hook = hook  # type: ignore[attr-defined]
    yield submit
    hook.close()


async def events_of(trigger: JobStatusTrigger, timeout: float = 60) -> list[TriggerEvent]:
    async def collect() -> list[TriggerEvent]:
        return [event async for event in trigger.run()]

    return await asyncio.wait_for(collect(), timeout)


@pytest.mark.integration
async def test_a_finished_job_fires_one_success_event(submit: Any, minicluster_conn_id: str) -> None:
    job_id = submit("sleep", seconds=0.5)
    events = await events_of(JobStatusTrigger(job_id, minicluster_conn_id))
    assert [event.payload for event in events] == [
        {"status": "success", "job_id": job_id, "state": "FINISHED", "message": f"job {job_id} reached FINISHED"}
    ]


@pytest.mark.integration
async def test_a_failed_job_fires_one_error_event(submit: Any, minicluster_conn_id: str) -> None:
    job_id = submit("fail", message="kaboom", after_seconds=0.3)
    events = await events_of(JobStatusTrigger(job_id, minicluster_conn_id))
    assert [event.payload for event in events] == [
        {"status": "error", "job_id": job_id, "state": "FAILED", "message": f"job {job_id} is FAILED"}
    ]


def in_a_triggerer(trigger: JobStatusTrigger) -> JobStatusTrigger:
    """What the triggerer sets on a trigger it runs for a deferred task."""
    trigger.task_instance = SimpleNamespace(dag_id="dag", task_id="wait", run_id="run", map_index=-1)
    return trigger


@pytest.mark.integration
async def test_ending_from_the_trigger_succeeds_the_task_with_the_state_as_xcom(
    submit: Any, minicluster_conn_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Task SDK's channel to the execution API exists only in a triggerer: recorded
    # here (tests/airflow/test_real_airflow.py checks the real one end to end).
    pushed: list[tuple[str, Any, dict[str, Any]]] = []

    async def aset(key: str, value: Any, **where: Any) -> None:
        pushed.append((key, value, where))

    monkeypatch.setattr(BaseXCom, "aset", aset)
    job_id = submit("sleep", seconds=0.3)
    events = await events_of(in_a_triggerer(JobStatusTrigger(job_id, minicluster_conn_id, end_from_trigger=True)))
    assert len(events) == 1
    assert isinstance(events[0], TaskSuccessEvent)
    assert pushed == [
        ("return_value", "FINISHED", {"dag_id": "dag", "task_id": "wait", "run_id": "run", "map_index": -1})
    ]


def prepared_lineage_events() -> dict[str, str]:
    """What the sensor prepares when it defers (with the provider's listener code, see
    flink_runtime/airflow/task_end_lineage.py): a COMPLETE and a FAIL event of one run."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run
    from openlineage.client.serde import Serde
    from openlineage.client.uuid import generate_new_uuid

    run_id = str(generate_new_uuid())
    error = error_message_run.ErrorMessageRunFacet(message="placeholder", programmingLanguage="python")

    def event(kind: Any, facets: dict[str, Any]) -> str:
        run = Run(runId=run_id, facets=facets)
        job = Job(namespace="flink-runtime-tests", name="dag.wait")
        return Serde.to_json(RunEvent(eventType=kind, eventTime="2026-01-01T00:00:00+00:00", run=run, job=job))

    return {"COMPLETE": event(RunState.COMPLETE, {}), "FAIL": event(RunState.FAIL, {"errorMessage": error})}


@pytest.mark.integration
async def test_ending_from_the_trigger_sends_the_prepared_openlineage_end_event(
    submit: Any, minicluster_conn_id: str, monkeypatch: pytest.MonkeyPatch, openlineage_events: Path
) -> None:
    async def aset(key: str, value: Any, **where: Any) -> None:
        pass

    monkeypatch.setattr(BaseXCom, "aset", aset)
    prepared = prepared_lineage_events()
    finished = submit("sleep", seconds=0.2)
    failed = submit("fail", message="kaboom from the task", after_seconds=0.2)
    for job_id in (finished, failed):
        trigger = JobStatusTrigger(job_id, minicluster_conn_id, end_from_trigger=True, lineage_events=prepared)
        await events_of(in_a_triggerer(trigger))

    sent = [json.loads(line) for line in openlineage_events.read_text().splitlines()]
    assert [e["eventType"] for e in sent] == ["COMPLETE", "FAIL"]
    assert {e["run"]["runId"] for e in sent} == {json.loads(prepared["COMPLETE"])["run"]["runId"]}
    assert all(e["eventTime"] > "2026-11" for e in sent)  # the end's time, not the deferral's
    error = sent[1]["run"]["facets"]["errorMessage"]
    assert error["message"] == f"job {failed} is FAILED: RuntimeError: kaboom from the task"
    assert "RuntimeError: kaboom from the task" in error["stackTrace"]  # the job's root exception


@pytest.mark.integration
async def test_without_a_task_instance_the_trigger_hands_the_task_back(submit: Any, minicluster_conn_id: str) -> None:
    # dag.test() runs triggers inline and resumes the task with the event's payload.
    job_id = submit("sleep", seconds=0.3)
    events = await events_of(JobStatusTrigger(job_id, minicluster_conn_id, end_from_trigger=True))
    assert [event.payload["status"] for event in events] == ["success"]


@pytest.mark.integration
async def test_ending_from_the_trigger_fails_the_task_with_the_root_exception_in_its_log(
    submit: Any, minicluster_conn_id: str, capfd: pytest.CaptureFixture
) -> None:
    job_id = submit("fail", message="kaboom from the task", after_seconds=0.2)
    capfd.readouterr()
    trigger = in_a_triggerer(JobStatusTrigger(job_id, minicluster_conn_id, end_from_trigger=True))
    events = await events_of(trigger)
    assert len(events) == 1
    assert isinstance(events[0], TaskFailedEvent)
    logged = capfd.readouterr()  # a trigger logs through Airflow's structlog, to the console here
    errors = [line for line in (logged.out + logged.err).splitlines() if "[error" in line]
    assert any(f"Root exception of job {job_id} (FAILED)" in line for line in errors), errors
    assert any(f"The task fails: job {job_id} is FAILED: RuntimeError: kaboom from the task" in line for line in errors)


async def test_ending_from_the_trigger_fails_the_task_when_the_job_cannot_be_followed(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_NOWHERE", '{"conn_type": "flink_runtime", "host": "127.0.0.1", "port": 9}')
    monkeypatch.setattr(FlinkRuntimeHook, "__init__", _fast_retries(FlinkRuntimeHook.__init__))
    trigger = in_a_triggerer(JobStatusTrigger(JOB_ID, "nowhere", end_from_trigger=True))
    events = await events_of(trigger, timeout=30)
    assert len(events) == 1
    assert isinstance(events[0], TaskFailedEvent)
    logged = capfd.readouterr()
    assert f"The task fails: could not follow job {JOB_ID}" in logged.out + logged.err


@pytest.mark.integration
async def test_a_cancelled_job_fires_one_error_event_and_the_trigger_cancels_nothing(
    submit: Any, minicluster_conn_id: str
) -> None:
    job_id = submit("sleep", seconds=30)
    trigger = JobStatusTrigger(job_id, minicluster_conn_id)
    waiting = asyncio.ensure_future(events_of(trigger))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await asyncio.to_thread(submit.hook.cancel_job, job_id)
    events = await waiting
    assert [(event.payload["status"], event.payload["state"]) for event in events] == [("error", "CANCELED")]


@pytest.mark.integration
async def test_cancelling_the_trigger_leaves_the_job_running(submit: Any, minicluster_conn_id: str) -> None:
    job_id = submit("sleep", seconds=30)
    waiting = asyncio.ensure_future(events_of(JobStatusTrigger(job_id, minicluster_conn_id)))
    await asyncio.sleep(0.5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert submit.hook.get_job_status(job_id) == "RUNNING"
    submit.hook.cancel_job(job_id)


@pytest.mark.integration
async def test_a_users_kill_cancels_the_job_only_with_cancel_on_kill(submit: Any, minicluster_conn_id: str) -> None:
    """Marking a deferred SubmitJobOperator failed cancels the job it owns (its trigger has
    cancel_on_kill), or the job would run on with nobody waiting; a sensor's trigger only
    watches, so its on_kill leaves the job RUNNING."""
    watched = submit("sleep", seconds=30)
    await JobStatusTrigger(watched, minicluster_conn_id).on_kill()  # a sensor's: watches only
    assert submit.hook.get_job_status(watched) == "RUNNING"

    owned = submit("sleep", seconds=30)
    trigger = JobStatusTrigger(owned, minicluster_conn_id, cancel_on_kill=True)
    waiting = asyncio.ensure_future(events_of(trigger))
    await asyncio.sleep(0.3)
    waiting.cancel()  # the triggerer cancels the trigger's task, then calls on_kill
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await rebuild(trigger).on_kill()
    assert submit.hook.wait_for_job(owned, ["CANCELED"], timeout=30) == "CANCELED"
    await rebuild(trigger).on_kill()  # again, on a CANCELED job: acknowledged, no error
    submit.hook.cancel_job(watched)


@pytest.mark.integration
async def test_on_kill_of_a_job_that_finished_leaves_it_finished(submit: Any, minicluster_conn_id: str) -> None:
    job_id = submit("sleep", seconds=0.1)
    assert submit.hook.wait_for_job(job_id, ["FINISHED"], timeout=30) == "FINISHED"
    await JobStatusTrigger(job_id, minicluster_conn_id, cancel_on_kill=True).on_kill()  # 409, logged
    assert submit.hook.get_job_status(job_id) == "FINISHED"


@pytest.mark.integration
async def test_waiting_for_running_and_ending_without_it(submit: Any, minicluster_conn_id: str) -> None:
    running = submit("sleep", seconds=5)
    events = await events_of(JobStatusTrigger(running, minicluster_conn_id, target_statuses=["RUNNING"]))
    assert [(event.payload["status"], event.payload["state"]) for event in events] == [("success", "RUNNING")]
    submit.hook.cancel_job(running)

    # A state passed before the trigger started still counts: the events are replayed.
    finished = submit("noop")
    submit.hook.wait_for_job(finished, ["FINISHED"], timeout=30)
    events = await events_of(JobStatusTrigger(finished, minicluster_conn_id, target_statuses=["RUNNING"]))
    assert [event.payload["state"] for event in events] == ["RUNNING"]

    # Terminal, neither target nor failure: nothing can follow, so an error.
    trigger = JobStatusTrigger(finished, minicluster_conn_id, target_statuses=["CANCELED"], failure_statuses=[])
    events = await events_of(trigger)
    assert [event.payload for event in events] == [
        {
            "status": "error",
            "job_id": finished,
            "state": "FINISHED",
            "message": f"job {finished} ended FINISHED without reaching CANCELED",
        }
    ]


@pytest.mark.integration
async def test_it_long_polls_instead_of_polling_periodically(
    submit: Any, minicluster_conn_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    polls: list[tuple[int, float]] = []
    original = calls.job_events

    def counting(job_id: str, since: int = 0, timeout: float = 0.0) -> calls.Call[calls.EventPage]:
        polls.append((since, timeout))
        return original(job_id, since, timeout)

    monkeypatch.setattr(calls, "job_events", counting)
    job_id = submit("sleep", seconds=3)
    events = await events_of(JobStatusTrigger(job_id, minicluster_conn_id, poll_timeout=30))
    assert events[0].payload["state"] == "FINISHED"
    # Three seconds of RUNNING cost one waiting request, not one per polling period; a
    # request waits up to the progress interval (the trigger logs progress between them).
    assert 1 <= len(polls) <= 3, polls
    assert all(timeout == PROGRESS_INTERVAL for _, timeout in polls)


@pytest.mark.integration
async def test_an_unknown_job_fires_an_error_without_a_state(minicluster_conn_id: str) -> None:
    events = await events_of(JobStatusTrigger(JOB_ID, minicluster_conn_id))
    assert len(events) == 1
    payload = events[0].payload
    assert (payload["status"], payload["state"]) == ("error", None)
    assert payload["message"].startswith(f"could not follow job {JOB_ID}:")
    assert "not found" in payload["message"]


async def test_an_unreachable_cluster_fires_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_FLINK_RUNTIME_NOWHERE", '{"conn_type": "flink_runtime", "host": "127.0.0.1", "port": 9}'
    )
    monkeypatch.setattr(FlinkRuntimeHook, "__init__", _fast_retries(FlinkRuntimeHook.__init__))
    events = await events_of(JobStatusTrigger(JOB_ID, "flink_runtime_nowhere"), timeout=30)
    assert [(event.payload["status"], event.payload["state"]) for event in events] == [("error", None)]
    assert "cannot reach" in events[0].payload["message"]


def _fast_retries(init: Any) -> Any:
    def fast(self: FlinkRuntimeHook, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.retry_delay = 0.0

    return fast
