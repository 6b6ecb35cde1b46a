"""The operators: XCom pushes, deferral, retries that re-attach, on_kill (mocked hook), and real runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from airflow.sdk.exceptions import TaskDeferralTimeout, TaskDeferred

from flink_runtime.airflow.exceptions import (
    FlinkRuntimeApiError,
    FlinkRuntimeException,
    FlinkRuntimeJobFailed,
    FlinkRuntimeJobNotFound,
    FlinkRuntimeTimeout,
)
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.links import FlinkRuntimeJobLink
from flink_runtime.airflow.operators.flink_runtime import (
    CancelJobOperator,
    StopJobOperator,
    SubmitJobOperator,
    TriggerSavepointOperator,
    deterministic_job_id,
)
from flink_runtime.airflow.progress import ProgressLog
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.pipeline import Pipeline

Context = dict[str, Any]
REST_URL = "http://jm:8081"
GRAPH = {"name": "noop", "vertices": [{"id": "n", "name": "N", "invokable": "noop"}]}
STORE_KEY = SubmitJobOperator.external_id_key
LINK_KEY = FlinkRuntimeJobLink().xcom_key


def job_id_of(try_number: int) -> str:
    """The id the FakeTaskInstance's try submits (see conftest)."""
    return deterministic_job_id("dag", "task", "manual__2026-01-01T00:00:00+00:00", -1, try_number)


def fake_hook(jobs: dict[str, str] | None = None) -> mock.MagicMock:
    """A hook whose cluster knows ``jobs`` (id -> state); submit_job adds a RUNNING one."""
    jobs = {} if jobs is None else jobs
    hook = mock.create_autospec(FlinkRuntimeHook, instance=True)
    hook.rest_url = REST_URL
    hook.job_url.side_effect = lambda job_id: f"{REST_URL}/jobs/{job_id}"
    hook.get_job.side_effect = lambda job_id: {"jid": job_id, "state": jobs[job_id]} if job_id in jobs else None
    hook.get_job_status.side_effect = lambda job_id: jobs[job_id]

    def submit_job(
        graph: Any, job_id: str | None = None, savepoint_path: str | None = None, config_defaults: Any = None
    ) -> str:
        if job_id in jobs:
            raise FlinkRuntimeApiError(409, [f"Job {job_id} was already submitted"], "POST", "/jobs")
        jobs[job_id] = "RUNNING"
        return job_id

    hook.submit_job.side_effect = submit_job
    hook.wait_for_job.return_value = "FINISHED"
    hook.job_failure.side_effect = lambda job_id, state, reason=None: FlinkRuntimeJobFailed(
        job_id,
        state,
        reason or f"Flink Runtime job {job_id} ended {state}: RuntimeError: kaboom",
        "RuntimeError: kaboom\n\ntrace",
    )
    hook.jobs = jobs
    return hook


def operator(hook: mock.MagicMock | None = None, **kwargs: Any) -> SubmitJobOperator:
    op = SubmitJobOperator(task_id="task", **({"job_graph": GRAPH} | kwargs))
    op.__dict__["hook"] = hook if hook is not None else fake_hook()  # the cached_property's slot
    return op


# -- submitting ---------------------------------------------------------------------------------------


def test_submit_pushes_the_job_and_its_link_right_away(task_context: Callable[..., Context]) -> None:
    context = task_context()
    op = operator(wait_for_completion=False)

    # Not awaited: the state as of submit, no records (the noop graph has no sink anyway).
    assert op.execute(context) == {
        "job_id": job_id_of(1),
        "state": "RUNNING",
        "job_url": f"{REST_URL}/jobs/{job_id_of(1)}",
        "outputs": [],
    }

    expected_url = f"{REST_URL}/jobs/{job_id_of(1)}"
    # The button: the plugin's redirect to the job's dashboard page (no token stored).
    link = f"/flink-runtime/jobs/{job_id_of(1)}?conn_id=flink_runtime_default"
    assert context["ti"].xcoms == {
        "job_id": job_id_of(1),
        "job_url": expected_url,
        "job_link": link,
        LINK_KEY: link,
    }
    op.hook.submit_job.assert_called_once_with(GRAPH, job_id=job_id_of(1), savepoint_path=None, config_defaults=None)
    op.hook.wait_for_job.assert_not_called()
    # Success clears the stored id: clearing the task later runs the job again.
    assert context["task_state_store"].values == {}


def test_waits_for_the_job_and_returns_its_id(task_context: Callable[..., Context]) -> None:
    context = task_context()
    op = operator(from_savepoint="/sp/savepoint-1", poll_timeout=7, timeout=100)
    assert op.execute(context)["job_id"] == job_id_of(1)
    op.hook.submit_job.assert_called_once_with(
        GRAPH, job_id=job_id_of(1), savepoint_path="/sp/savepoint-1", config_defaults=None
    )
    op.hook.wait_for_job.assert_called_once_with(job_id_of(1), ["FINISHED"], 100, 7, progress=mock.ANY)
    assert isinstance(op.hook.wait_for_job.call_args.kwargs["progress"], ProgressLog)  # logs while waiting


def test_a_failed_job_fails_the_task_with_its_root_exception(task_context: Callable[..., Context]) -> None:
    context = task_context()
    op = operator()
    op.hook.wait_for_job.return_value = "FAILED"
    with pytest.raises(FlinkRuntimeJobFailed, match="RuntimeError: kaboom") as failure:
        op.execute(context)
    assert failure.value.root_exception == "RuntimeError: kaboom\n\ntrace"
    op.hook.job_failure.assert_called_once_with(job_id_of(1), "FAILED", None)
    # The failed job's id stays stored: the retry must know it is not to be re-attached.
    assert context["task_state_store"].values == {STORE_KEY: job_id_of(1)}


def test_the_timeout_cancels_the_job(task_context: Callable[..., Context]) -> None:
    op = operator(timeout=5)
    op.hook.wait_for_job.side_effect = FlinkRuntimeTimeout("did not reach FINISHED within 5 s")
    with pytest.raises(FlinkRuntimeTimeout):
        op.execute(task_context())
    op.hook.cancel_job.assert_called_once_with(job_id_of(1))


@pytest.mark.parametrize(
    "make_graph",
    [
        lambda: JobGraph(name="g", vertices=[JobVertex(id="n", name="N", invokable="noop")]),
        lambda: Pipeline("p"),
        lambda: json.dumps(GRAPH),
    ],
)
def test_job_graph_forms_pass_through_to_the_hook(task_context: Callable[..., Context], make_graph: Callable) -> None:
    graph = make_graph()
    op = operator(job_graph=graph, wait_for_completion=False)
    op.execute(task_context())
    assert op.hook.submit_job.call_args.args[0] is graph


def test_a_callable_job_graph_gets_the_context(task_context: Callable[..., Context]) -> None:
    context = task_context()
    seen: list[Context] = []

    def build(ctx: Context) -> dict[str, Any]:
        seen.append(ctx)
        return {**GRAPH, "name": f"noop {ctx['run_id']}"}

    op = operator(job_graph=build, wait_for_completion=False)
    op.execute(context)
    assert seen == [context]
    assert op.hook.submit_job.call_args.args[0]["name"] == f"noop {context['run_id']}"


def test_a_json_file_is_rendered_with_jinja(tmp_path: Path) -> None:
    from airflow.sdk import DAG

    (tmp_path / "job.json").write_text('{"name": "count {{ params.day }}", "vertices": []}')
    absolute = tmp_path / "absolute.json"
    absolute.write_text('{"name": "abs {{ params.day }}"}')
    with DAG("templated", schedule=None, template_searchpath=[str(tmp_path)], params={"day": "monday"}):
        relative_op = SubmitJobOperator(task_id="relative", job_graph="job.json")
        absolute_op = SubmitJobOperator(task_id="absolute", job_graph=str(absolute))
    context = {"params": {"day": "monday"}}
    for op in (relative_op, absolute_op):
        op.resolve_template_files()
        op.render_template_fields(context)
    assert json.loads(relative_op.job_graph)["name"] == "count monday"
    assert json.loads(absolute_op.job_graph)["name"] == "abs monday"


def test_a_json_file_names_the_runs_day_for_manual_runs_too(tmp_path: Path) -> None:
    """`{{ ds }}` is undefined in a manual run (no logical date in Airflow 3); the form
    docs/airflow.md gives, `{{ dag_run.run_after | ds }}`, works for every run."""
    import jinja2
    from airflow.sdk import DAG

    (tmp_path / "job.json").write_text('{"name": "count {{ dag_run.run_after | ds }}", "vertices": []}')
    (tmp_path / "ds.json").write_text('{"name": "count {{ ds }}", "vertices": []}')
    with DAG("manual", schedule=None, template_searchpath=[str(tmp_path)]):
        documented = SubmitJobOperator(task_id="documented", job_graph="job.json")
        bare_ds = SubmitJobOperator(task_id="bare_ds", job_graph="ds.json")
    run = mock.Mock(run_after=datetime(2026, 11, 23, 9, 30, tzinfo=UTC))
    manual_context = {"dag_run": run}  # what a manual run's context lacks: ds, logical_date
    documented.resolve_template_files()
    documented.render_template_fields(manual_context)
    assert json.loads(documented.job_graph)["name"] == "count 2026-11-23"
    bare_ds.resolve_template_files()
    with pytest.raises(jinja2.UndefinedError, match="'ds' is undefined"):
        bare_ds.render_template_fields(manual_context)


# -- retries ------------------------------------------------------------------------------------------


def test_a_retry_re_attaches_to_the_stored_running_job(task_context: Callable[..., Context]) -> None:
    hook = fake_hook({job_id_of(1): "RUNNING"})
    task_context.store.set(STORE_KEY, job_id_of(1))
    context = task_context(try_number=2)

    assert operator(hook).execute(context)["job_id"] == job_id_of(1)

    hook.submit_job.assert_not_called()
    hook.wait_for_job.assert_called_once()
    assert context["ti"].xcoms["job_id"] == job_id_of(1)


def test_a_retry_after_the_job_finished_only_reports_it(task_context: Callable[..., Context]) -> None:
    hook = fake_hook({job_id_of(1): "FINISHED"})
    task_context.store.set(STORE_KEY, job_id_of(1))
    context = task_context(try_number=2)

    assert operator(hook).execute(context)["job_id"] == job_id_of(1)

    hook.submit_job.assert_not_called()
    hook.wait_for_job.assert_not_called()
    assert context["ti"].xcoms["job_url"] == f"{REST_URL}/jobs/{job_id_of(1)}"
    assert task_context.store.values == {}


@pytest.mark.parametrize("state", ["FAILED", "CANCELED", "CANCELLING"])
def test_a_retry_after_the_job_failed_submits_a_fresh_one(task_context: Callable[..., Context], state: str) -> None:
    hook = fake_hook({job_id_of(1): state})
    task_context.store.set(STORE_KEY, job_id_of(1))

    assert operator(hook).execute(task_context(try_number=2))["job_id"] == job_id_of(2)

    assert hook.submit_job.call_args.kwargs["job_id"] == job_id_of(2)


def test_a_stored_job_the_cluster_forgot_is_submitted_again(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    hook.get_job_status.side_effect = FlinkRuntimeJobNotFound(404, ["not found"])
    task_context.store.set(STORE_KEY, job_id_of(1))
    assert operator(hook, wait_for_completion=False).execute(task_context(try_number=2))["job_id"] == job_id_of(2)


def test_without_a_stored_id_a_running_job_of_an_earlier_try_is_found_by_its_id(
    task_context: Callable[..., Context],
) -> None:
    # The worker died between submitting and storing the id (or there is no store).
    hook = fake_hook({job_id_of(1): "RUNNING"})
    assert operator(hook).execute(task_context(try_number=3, with_store=False))["job_id"] == job_id_of(1)
    hook.submit_job.assert_not_called()


def test_a_finished_job_found_only_by_its_id_is_run_again(task_context: Callable[..., Context]) -> None:
    # That is what clearing a successful task asks for (its stored id was removed on success).
    hook = fake_hook({job_id_of(1): "FINISHED"})
    assert operator(hook).execute(task_context(try_number=2))["job_id"] == job_id_of(2)
    hook.submit_job.assert_called_once()


def test_the_same_try_run_twice_attaches_to_its_own_job(task_context: Callable[..., Context]) -> None:
    hook = fake_hook({job_id_of(2): "FINISHED"})
    assert operator(hook).execute(task_context(try_number=2))["job_id"] == job_id_of(2)
    assert hook.submit_job.call_count == 1  # the 409 said: already there


def test_job_ids_are_deterministic_per_task_instance_and_try() -> None:
    first = deterministic_job_id("d", "t", "r", -1, 1)
    assert first == deterministic_job_id("d", "t", "r", -1, 1)
    assert len(first) == 32 and int(first, 16) >= 0
    others = {
        deterministic_job_id(*key) for key in [("d", "t", "r", 0, 1), ("d", "t", "r", -1, 2), ("d", "u", "r", -1, 1)]
    }
    assert first not in others and len(others) == 3


# -- deferral -----------------------------------------------------------------------------------------


def test_deferrable_defers_to_the_job_status_trigger(task_context: Callable[..., Context]) -> None:
    context = task_context()
    op = operator(deferrable=True, poll_timeout=12, timeout=600, flink_runtime_conn_id="cluster")

    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)

    trigger = deferred.value.trigger
    assert isinstance(trigger, JobStatusTrigger)
    assert trigger.serialize()[1] == {
        "job_id": job_id_of(1),
        "flink_runtime_conn_id": "cluster",
        "target_statuses": ["FINISHED"],
        "failure_statuses": ["FAILED", "CANCELED"],
        "poll_timeout": 12.0,
        "cancel_on_kill": True,  # the operator owns its job: a user's kill cancels it
        "end_from_trigger": False,  # the operator resumes on a worker: the XCom and asset events are its own
        "lineage_events": None,  # the worker's own listener sends the task's lineage, not the trigger
    }
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == timedelta(seconds=600)
    # The link is there before the task waits in the triggerer.
    assert context["ti"].xcoms["job_id"] == job_id_of(1)
    assert context["task_state_store"].values == {STORE_KEY: job_id_of(1)}


def test_deferrable_does_not_defer_for_a_job_that_already_ended(task_context: Callable[..., Context]) -> None:
    hook = fake_hook({job_id_of(1): "FINISHED"})
    result = operator(hook, deferrable=True).execute(task_context(try_number=1, with_store=False))
    assert (result["job_id"], result["state"]) == (job_id_of(1), "FINISHED")


def test_execute_complete(task_context: Callable[..., Context]) -> None:
    context = task_context()
    context["task_state_store"].set(STORE_KEY, job_id_of(1))
    op = operator()
    success = {"status": "success", "job_id": job_id_of(1), "state": "FINISHED", "message": "reached FINISHED"}
    assert op.execute_complete(context, success)["job_id"] == job_id_of(1)
    assert context["task_state_store"].values == {}

    failure = {"status": "error", "job_id": job_id_of(1), "state": "FAILED", "message": "job is FAILED"}
    with pytest.raises(FlinkRuntimeJobFailed):
        op.execute_complete(context, failure)
    op.hook.job_failure.assert_called_with(job_id_of(1), "FAILED", "job is FAILED")

    lost = {"status": "error", "job_id": job_id_of(1), "state": None, "message": "could not follow job: unreachable"}
    with pytest.raises(FlinkRuntimeException, match="could not follow job"):
        op.execute_complete(context, lost)


def test_a_deferral_timeout_cancels_the_job(task_context: Callable[..., Context]) -> None:
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason

    context = task_context()
    context["ti"].xcom_push("job_id", job_id_of(1))
    op = operator(deferrable=True, timeout=60)
    with pytest.raises(TaskDeferralTimeout):
        op.resume_execution(TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context)
    op.hook.cancel_job.assert_called_once_with(job_id_of(1))


# -- on_kill ------------------------------------------------------------------------------------------


def test_on_kill_cancels_the_submitted_job(task_context: Callable[..., Context]) -> None:
    op = operator()
    op.on_kill()  # nothing submitted yet: nothing to cancel
    op.hook.cancel_job.assert_not_called()
    op.execute(task_context())
    op.on_kill()
    op.hook.cancel_job.assert_called_once_with(job_id_of(1))


def test_on_kill_survives_a_cluster_that_does_not_answer(task_context: Callable[..., Context]) -> None:
    op = operator()
    op.execute(task_context())
    op.hook.cancel_job.side_effect = FlinkRuntimeException("cannot reach the JobManager")
    op.on_kill()


# -- the other operators ------------------------------------------------------------------------------


def with_hook(op: Any, hook: mock.MagicMock) -> Any:
    op.__dict__["hook"] = hook
    return op


def test_trigger_savepoint_returns_the_location(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    hook.trigger_savepoint.return_value = "req-1"
    hook.wait_for_savepoint.return_value = "/sp/savepoint-abc"
    op = with_hook(TriggerSavepointOperator(task_id="sp", job_id="j1", target_directory="/sp", timeout=30), hook)
    context = task_context()
    assert op.execute(context) == "/sp/savepoint-abc"
    hook.trigger_savepoint.assert_called_once_with("j1", "/sp", False)
    hook.wait_for_savepoint.assert_called_once_with("j1", "req-1", 30)
    assert context["ti"].xcoms["job_url"] == f"{REST_URL}/jobs/j1"


def test_stop_job_returns_the_location(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    hook.stop_job.return_value = "/sp/savepoint-abc"
    op = with_hook(StopJobOperator(task_id="stop", job_id="j1", drain=True), hook)
    assert op.execute(task_context()) == "/sp/savepoint-abc"
    hook.stop_job.assert_called_once_with("j1", None, True, None)


def test_cancel_job_waits_for_canceled(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    hook.wait_for_job.return_value = "CANCELED"
    assert with_hook(CancelJobOperator(task_id="c", job_id="j1"), hook).execute(task_context()) == "CANCELED"
    hook.cancel_job.assert_called_once_with("j1")


def test_cancelling_a_job_that_already_ended_is_not_an_error(task_context: Callable[..., Context]) -> None:
    hook = fake_hook({"j1": "FINISHED"})
    hook.cancel_job.side_effect = FlinkRuntimeApiError(409, ["Job j1 has already ended"])
    assert with_hook(CancelJobOperator(task_id="c", job_id="j1"), hook).execute(task_context()) == "FINISHED"


def test_cancel_errors_other_than_already_ended_fail_the_task(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    hook.cancel_job.side_effect = FlinkRuntimeApiError(404, ["Job j1 not found"])
    with pytest.raises(FlinkRuntimeApiError, match="not found"):
        with_hook(CancelJobOperator(task_id="c", job_id="j1"), hook).execute(task_context())


def test_templated_fields_and_links() -> None:
    assert set(SubmitJobOperator.template_fields) == {"job_graph", "from_savepoint"}
    assert SubmitJobOperator.template_ext == (".json",)
    for op_class in (TriggerSavepointOperator, StopJobOperator, CancelJobOperator):
        assert "job_id" in op_class.template_fields
    for op_class in (SubmitJobOperator, TriggerSavepointOperator, StopJobOperator, CancelJobOperator):
        assert [link.name for link in op_class.operator_extra_links] == ["Flink Runtime Job"]


# -- for real, against a MiniCluster -------------------------------------------------------------------


@pytest.mark.integration
def test_submit_job_operator_runs_a_real_job(task_context: Callable[..., Context], minicluster_conn_id: str) -> None:
    context = task_context(run_id="real-run-1")
    op = SubmitJobOperator(task_id="task", job_graph=GRAPH, flink_runtime_conn_id=minicluster_conn_id)

    job_id = op.execute(context)["job_id"]

    assert job_id == deterministic_job_id("dag", "task", "real-run-1", -1, 1)
    with FlinkRuntimeHook(minicluster_conn_id) as hook:
        assert hook.get_job_status(job_id) == "FINISHED"
        assert context["ti"].xcoms["job_url"] == hook.job_url(job_id)


@pytest.mark.integration
def test_submit_job_operator_fails_with_the_real_root_exception(
    task_context: Callable[..., Context], minicluster_conn_id: str
) -> None:
    failing = {
        "name": "f",
        "vertices": [{"id": "f", "name": "F", "invokable": "fail", "config": {"message": "kaboom 9"}}],
    }
    op = SubmitJobOperator(task_id="task", job_graph=failing, flink_runtime_conn_id=minicluster_conn_id)
    with pytest.raises(FlinkRuntimeJobFailed, match="RuntimeError: kaboom 9") as failure:
        op.execute(task_context(run_id="real-run-2"))
    assert "Traceback" in (failure.value.root_exception or "")

    # The retry submits a fresh job (the first one FAILED), under the next try's id.
    fixed = SubmitJobOperator(task_id="task", job_graph=GRAPH, flink_runtime_conn_id=minicluster_conn_id)
    assert fixed.execute(task_context(try_number=2, run_id="real-run-2"))["job_id"] == deterministic_job_id(
        "dag", "task", "real-run-2", -1, 2
    )


@pytest.mark.integration
def test_a_retry_after_a_worker_crash_attaches_to_the_running_job(
    task_context: Callable[..., Context], minicluster_conn_id: str
) -> None:
    """Try 1 submits and its worker dies (no store write survives); try 2 must find the
    running job by its deterministic id and wait for it: exactly one job runs."""
    slow = {
        "name": "crash-then-retry",
        "vertices": [{"id": "s", "name": "S", "invokable": "sleep", "config": {"seconds": 2}}],
    }
    crashed = SubmitJobOperator(
        task_id="task", job_graph=slow, wait_for_completion=False, flink_runtime_conn_id=minicluster_conn_id
    )
    first = crashed.execute(task_context(run_id="crash-run", with_store=False))["job_id"]

    retry = SubmitJobOperator(task_id="task", job_graph=slow, flink_runtime_conn_id=minicluster_conn_id)
    second = retry.execute(task_context(try_number=2, run_id="crash-run", with_store=False))["job_id"]

    assert second == first
    with FlinkRuntimeHook(minicluster_conn_id) as hook:
        assert hook.get_job_status(first) == "FINISHED"
        names = [job["name"] for job in httpx.get(f"{hook.rest_url}/jobs/overview").json()["jobs"]]
    assert names.count("crash-then-retry") == 1


# -- job ids given as SubmitJobOperator's XCom --------------------------------------------------------


SUBMIT_XCOM = {"job_id": "j1", "state": "FINISHED", "job_url": f"{REST_URL}/jobs/j1", "outputs": []}


@pytest.mark.parametrize(
    "given",
    [
        "j1",
        " j1\n",
        SUBMIT_XCOM,
        str(SUBMIT_XCOM),  # the dict rendered into a string template: its repr
        json.dumps(SUBMIT_XCOM),
    ],
)
def test_operators_taking_a_job_id_accept_the_submit_xcom(task_context: Callable[..., Context], given: Any) -> None:
    hook = fake_hook({"j1": "RUNNING"})
    hook.wait_for_job.return_value = "CANCELED"
    hook.stop_job.return_value = "/sp/savepoint-abc"
    hook.trigger_savepoint.return_value = "req-1"
    hook.wait_for_savepoint.return_value = "/sp/savepoint-abc"
    with_hook(CancelJobOperator(task_id="c", job_id=given), hook).execute(task_context())
    with_hook(StopJobOperator(task_id="s", job_id=given), hook).execute(task_context())
    with_hook(TriggerSavepointOperator(task_id="t", job_id=given), hook).execute(task_context())
    hook.cancel_job.assert_called_once_with("j1")
    hook.stop_job.assert_called_once_with("j1", None, False, None)
    hook.trigger_savepoint.assert_called_once_with("j1", None, False)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (None, "got NoneType None"),
        ("", "got str ''"),
        ({"state": "FINISHED"}, "a dict without a 'job_id'"),
        ("{'job_id': ", "neither JSON nor a Python literal"),
    ],
)
def test_a_job_id_that_is_none_fails_saying_what_to_pass(
    task_context: Callable[..., Context], given: Any, message: str
) -> None:
    hook = fake_hook()
    with pytest.raises(FlinkRuntimeException, match=message) as failure:
        with_hook(CancelJobOperator(task_id="c", job_id=given), hook).execute(task_context())
    assert "xcom_pull('submit')['job_id']" in str(failure.value)
    hook.cancel_job.assert_not_called()


SINK_GRAPH = {
    "name": "copy",
    "vertices": [
        {
            "id": "copy",
            "name": "Copy",
            "invokable": "spark",
            "config": {
                "source": {"format": "csv", "paths": ["/in/*.csv"], "schema": "id BIGINT"},
                "operators": [],
                "sink": {"format": "parquet", "path": "s3a://bucket/out/day=1", "mode": "overwrite"},
            },
        }
    ],
}


def test_the_result_names_each_output_with_its_records_once_finished(task_context: Callable[..., Context]) -> None:
    hook = fake_hook()
    metrics = {"write-records": 42, "write-bytes": 1234}
    hook.get_job.side_effect = lambda job_id: {
        "jid": job_id,
        "state": "FINISHED",
        "vertices": [{"id": "copy", "metrics": metrics}],
    }
    result = operator(hook, job_graph=SINK_GRAPH).execute(task_context())
    assert result["outputs"] == [
        {
            "path": "s3a://bucket/out/day=1",
            "format": "parquet",
            "uri": "s3://bucket/out/day=1",
            "records": 42,
            "bytes": 1234,
        }
    ]
    assert hook.get_job.call_count == 2  # one look for an earlier try's job, one for the result: not one per call
