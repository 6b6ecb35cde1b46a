"""@task.flink_runtime: a function returning a JobGraph or Pipeline, submitted
and awaited as SubmitJobOperator, registered through the provider's task-decorators."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, task

from flink_runtime.airflow.decorators.flink_runtime import flink_runtime_task
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator, deterministic_job_id
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.pipeline import Pipeline


def test_the_provider_registers_task_flink_runtime() -> None:
    assert task.flink_runtime is flink_runtime_task


def test_the_decorated_task_is_a_submit_job_operator_with_its_options() -> None:
    with DAG("decorated", schedule=None):

        @task.flink_runtime(flink_runtime_conn_id="cluster", deferrable=True, timeout=60)
        def build(name: str) -> JobGraph:
            return JobGraph(name=name, vertices=[JobVertex(id="v", name="V", invokable="noop")])

        operator = build("x").operator
    assert isinstance(operator, SubmitJobOperator)
    assert (operator.task_id, operator.flink_runtime_conn_id, operator.deferrable, operator.timeout) == (
        "build",
        "cluster",
        True,
        60,
    )


@pytest.mark.integration
def test_it_calls_the_function_with_its_arguments_and_context_then_runs_the_job(
    task_context: Callable[..., Any], minicluster_conn_id: str, tmp_path: Path
) -> None:
    (tmp_path / "in.txt").write_text("a b a\n")
    calls: list[tuple[str, Any]] = []
    with DAG("decorated", schedule=None):

        @task.flink_runtime(flink_runtime_conn_id=minicluster_conn_id)
        def count_words(directory: str, run_id: str | None = None) -> Pipeline:
            calls.append((directory, run_id))
            pipeline = Pipeline(f"words {run_id}", parallelism=1)
            pipeline.read_text(f"{directory}/*.txt").select("explode(split(value, ' ')) AS word").key_by("word").agg(
                "count(*) AS n"
            ).write_parquet(f"{directory}/out")
            return pipeline

        operator = count_words(str(tmp_path)).operator
    context = task_context(run_id="decorated-1")
    result = operator.execute(context)

    assert calls == [(str(tmp_path), "decorated-1")]  # the argument, and run_id from the context
    ti = context["ti"]
    job_id = result["job_id"]
    assert job_id == deterministic_job_id(ti.dag_id, ti.task_id, "decorated-1", -1, 1)
    assert result["state"] == "FINISHED"
    # Two distinct words: two records, in the folder the function chose.
    assert [(o["path"], o["format"], o["records"]) for o in result["outputs"]] == [(f"{tmp_path}/out", "parquet", 2)]
    with FlinkRuntimeHook(minicluster_conn_id) as hook:
        assert hook.get_job_status(job_id) == "FINISHED"
    assert any((tmp_path / "out").glob("*.parquet"))


def test_the_xcom_is_not_split_whatever_the_function_is_annotated_to_return() -> None:
    """A function returning a JSON-like graph is annotated ``-> dict``; Airflow would infer
    multiple_outputs from that, but the XCom is the job's result, one value."""
    with DAG("decorated", schedule=None):

        @task.flink_runtime(flink_runtime_conn_id="cluster")
        def as_dict() -> dict[str, Any]:
            return {"name": "g", "vertices": [{"id": "n", "name": "N", "invokable": "noop"}]}

        operator = as_dict().operator
    assert operator.multiple_outputs is False


def test_a_function_that_returns_nothing_fails_saying_what_to_return(task_context: Callable[..., Any]) -> None:
    with DAG("decorated", schedule=None):

        @task.flink_runtime(flink_runtime_conn_id="cluster")
        def forgot_return() -> None:
            pass

        operator = forgot_return().operator
    with pytest.raises(TypeError, match="returned None: return the Pipeline or JobGraph"):
        operator.build_job_graph(task_context(run_id="r"))


def test_the_function_gets_the_arguments_rendered_on_the_task_airflow_executes() -> None:
    """Airflow renders a copy of the task (prepare_for_execution) and runs that copy: the
    function must see the copy's rendered arguments, not the DAG file's "{{ ds }}"."""
    import jinja2

    seen: list[str] = []
    with DAG("decorated", schedule=None):

        @task.flink_runtime(flink_runtime_conn_id="cluster")
        def build(day: str) -> JobGraph:
            seen.append(day)
            return JobGraph(name=day, vertices=[JobVertex(id="v", name="V", invokable="noop")])

        operator = build(day="{{ ds }}").operator
    executed = operator.prepare_for_execution()
    executed.render_template_fields({"ds": "2024-03-05"}, jinja2.Environment())
    assert executed.build_job_graph({"ds": "2024-03-05"}).name == "2024-03-05"
    assert seen == ["2024-03-05"]
