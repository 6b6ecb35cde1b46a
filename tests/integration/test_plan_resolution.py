"""A TaskManager's side of ResolvePlan (taskmanager/plan_resolution.py), on a real
SparkSession: the planner's answer, the job's code's errors, what makes it decline, and
the time limit."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.blob import BlobServer
from flink_runtime.minicluster import MiniCluster
from flink_runtime.operators.spark.plan import resolve_vertex
from flink_runtime.rpc.messages import PlanRefused, PlanResolved, ResolvePlan
from flink_runtime.spark.session import acquire_session, release_session
from flink_runtime.taskmanager.plan_resolution import PlanResolution

pytestmark = pytest.mark.integration

VALUE = '{"type": "struct", "fields": [{"name": "value", "type": "string", "nullable": true, "metadata": {}}]}'


@pytest.fixture(scope="module")
def spark(minicluster: MiniCluster) -> Iterator:
    session = acquire_session(minicluster.config.to_dict(), default_cores=2)
    yield session
    release_session()


@pytest.fixture
def plans(spark, tmp_path: Path) -> PlanResolution:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    return PlanResolution(
        lambda: spark, lambda: BlobServer("http://127.0.0.1:9"), str(tmp_path / "blobs"), [str(allowed)], "tm-test"
    )


def resolve(plans: PlanResolution, **fields) -> PlanResolved | PlanRefused:
    return asyncio.run(plans.resolve(ResolvePlan(job_id="job-1", **fields)))


def test_the_answer_is_the_planners(plans: PlanResolution, spark) -> None:
    config = {
        "operators": [
            {"op": "select", "exprs": ["upper(value) AS shout"]},
            {"op": "sql", "query": "SELECT * FROM input"},
        ]
    }
    # A running task's view of the same name, in the TaskManager's session: left alone.
    spark.range(1).createOrReplaceTempView("input")
    answer = resolve(plans, config=config, input_schemas=[VALUE])
    assert isinstance(answer, PlanResolved), answer
    assert spark.table("input").columns == ["id"]
    spark.catalog.dropTempView("input")
    assert (answer.resolved, answer.output_schema) == resolve_vertex(spark, config, [VALUE], [])


def test_the_job_codes_error_is_answered_as_the_planner_would_raise_it(plans: PlanResolution, spark) -> None:
    config = {"operators": [{"op": "transform", "function": "tests.helpers.transforms:raises_value_error"}]}
    answer = resolve(plans, config=config, input_schemas=[VALUE])
    assert isinstance(answer, PlanRefused) and answer.user_code, answer
    with pytest.raises(Exception) as here:
        resolve_vertex(spark, config, [VALUE], [])
    assert (answer.error, answer.cause_name) == (str(here.value), type(here.value).__name__)
    assert "a transform that refuses its input" in answer.error
    assert "raises_value_error" in answer.cause_trace


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"files": ["/etc/hostname"]}, "input file /etc/hostname"),
        ({"libraries": ["/nowhere/lib.zip"]}, "the job's libraries"),
    ],
    ids=["a file outside its allowed directories", "a library it cannot find"],
)
def test_what_keeps_the_taskmanager_from_trying_is_not_the_job_codes_error(
    plans: PlanResolution, fields: dict, reason: str
) -> None:
    answer = resolve(plans, config={"operators": []}, input_schemas=[VALUE], **fields)
    assert isinstance(answer, PlanRefused) and not answer.user_code, answer
    assert answer.error.startswith(reason), answer.error


def test_code_that_never_returns_is_answered_timed_out_and_interrupted(plans: PlanResolution) -> None:
    config = {"operators": [{"op": "transform", "function": "tests.helpers.hostile:loops_for_ever"}]}
    started = time.monotonic()
    answer = resolve(plans, config=config, input_schemas=[VALUE], timeout=2.0)
    assert isinstance(answer, PlanRefused) and answer.timed_out, answer
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 10
    while any(thread.name == "resolve-plan-job-1" for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "the resolving thread still runs the endless loop"
        time.sleep(0.1)
