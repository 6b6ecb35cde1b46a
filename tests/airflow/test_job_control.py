"""Savepoint and stop operators on a job that is not RUNNING yet, on
the session's MiniCluster: a job just submitted is INITIALIZING while its plan is
resolved, and the cluster refuses a savepoint until it runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.airflow.exceptions import FlinkRuntimeJobFailed, FlinkRuntimeTimeout
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.operators.flink_runtime import StopJobOperator, TriggerSavepointOperator
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration


def slow_to_start(tmp_path: Path) -> Pipeline:
    (tmp_path / "in").mkdir()
    for index in range(6):
        (tmp_path / "in" / f"{index}.txt").write_text("a b a\n")
    pipeline = Pipeline("slow to start", parallelism=1)
    source = pipeline.read_text(f"{tmp_path}/in/*.txt", split_size=1).transform("tests.helpers.transforms:slow_to_plan")
    source.select("explode(split(value, ' ')) AS word").key_by("word").agg("count(*) AS n").write_parquet(
        f"{tmp_path}/out", mode="overwrite"
    )
    return pipeline


def test_savepoint_and_stop_right_after_submit_wait_for_running_and_say_why_when_they_cannot(
    task_context: Callable[..., dict[str, Any]], minicluster_conn_id: str, tmp_path: Path
) -> None:
    with FlinkRuntimeHook(minicluster_conn_id) as hook:
        job_id = hook.submit_job(slow_to_start(tmp_path))
        assert hook.get_job_status(job_id) == "INITIALIZING"  # POST /jobs gave up waiting (10 s)

        # Too short a wait: the task fails naming the state and the parameter to raise.
        impatient = TriggerSavepointOperator(
            task_id="savepoint",
            job_id=job_id,
            target_directory=str(tmp_path / "savepoints"),
            wait_for_running_timeout=0.5,
            flink_runtime_conn_id=minicluster_conn_id,
        )
        with pytest.raises(FlinkRuntimeTimeout) as timed_out:
            impatient.execute(task_context())
        message = str(timed_out.value)
        assert f"job {job_id} is still INITIALIZING, not RUNNING, after 0.5 s" in message
        assert "Raise wait_for_running_timeout (now 0.5 s)" in message

        # The default: the stop waits until the job runs, then stops it with a savepoint.
        started = time.monotonic()
        stop = StopJobOperator(
            task_id="stop",
            job_id=job_id,
            target_directory=str(tmp_path / "savepoints"),
            flink_runtime_conn_id=minicluster_conn_id,
        )
        location = stop.execute(task_context())
        print(f"stop right after submit: waited and stopped in {time.monotonic() - started:.1f} s")
        assert (Path(location) / "_metadata").is_file()
        assert hook.get_job_status(job_id) == "FINISHED"

        # A job that has ended will never run: fail at once, saying so.
        started = time.monotonic()
        late = TriggerSavepointOperator(task_id="savepoint", job_id=job_id, flink_runtime_conn_id=minicluster_conn_id)
        with pytest.raises(FlinkRuntimeJobFailed, match=f"job {job_id} has already ended FINISHED"):
            late.execute(task_context())
        assert time.monotonic() - started < 5


def test_wait_for_running_timeout_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="wait_for_running_timeout must be 0 or more seconds, got -1"):
        TriggerSavepointOperator(task_id="savepoint", job_id="j", wait_for_running_timeout=-1)
