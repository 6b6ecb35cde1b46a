"""A job's progress in the task log, and the failing subtask's last log lines."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.progress import ProgressLog, describe_progress, failing_subtask
from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger
from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config
from tests.helpers.jobs import modulo_sum_job

DETAILS = {
    "state": "RUNNING",
    "vertices": [
        {"id": "src", "name": "Read", "parallelism": 2, "tasks": {"FINISHED": 1}, "metrics": {"write-records": 1500}},
        {"id": "sink", "name": "Write", "parallelism": 2, "tasks": {}, "metrics": {"write-bytes": 3 << 20}},
    ],
}
ACCUMULATORS = {
    "user-task-accumulators": [
        {"name": "Read.splits.total", "value": "24"},
        {"name": "Read.splits.completed", "value": "12"},
    ]
}


def test_one_line_per_job_with_each_vertex() -> None:
    assert describe_progress("j1", DETAILS, ACCUMULATORS) == (
        "Job j1 RUNNING: Read 1/2 finished, splits 12/24, records out 1,500 | Write 0/2 finished (3.0 MiB)"
    )


def test_progress_is_logged_when_it_changed_and_at_most_every_interval(caplog: pytest.LogCaptureFixture) -> None:
    progress = ProgressLog(logging.getLogger("progress-test"), interval=5.0)
    with caplog.at_level(logging.INFO, "progress-test"):
        assert progress.due(0.0)
        progress.report("a", 0.0)
        assert not progress.due(4.9) and progress.due(5.0)
        progress.report("a", 5.0)  # unchanged: not logged again
        progress.report("b", 10.0)
    assert [record.getMessage() for record in caplog.records] == ["a", "b"]


def test_the_failing_subtask_is_found_by_its_flink_task_name() -> None:
    exceptions = {"exceptionHistory": {"entries": [{"taskName": "Write (2/2)"}]}}
    assert failing_subtask(exceptions, DETAILS) == ("sink", 1)
    assert failing_subtask({"exceptionHistory": {"entries": [{"taskName": None}]}}, DETAILS) is None
    assert failing_subtask({"exceptionHistory": {"entries": [{"taskName": "Gone (1/1)"}]}}, DETAILS) is None
    assert failing_subtask({}, DETAILS) is None


@pytest.mark.integration
def test_the_non_deferrable_wait_logs_state_changes_and_progress(
    minicluster_conn_id: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook = FlinkRuntimeHook(minicluster_conn_id)
    job_id = hook.submit_job(modulo_sum_job(tmp_path / "out", name="progress"))
    logger = logging.getLogger("progress-wait")
    with caplog.at_level(logging.INFO, "progress-wait"):
        assert hook.wait_for_job(job_id, ["FINISHED"], timeout=60, progress=ProgressLog(logger, 0.2)) == "FINISHED"
    lines = [record.getMessage() for record in caplog.records]
    assert any(line.startswith(f"Job {job_id} RUNNING: Numbers ") for line in lines), lines
    assert any("CREATED -> RUNNING" in line for line in lines), lines
    hook.close()


@pytest.mark.integration
async def test_the_trigger_logs_progress_while_it_waits(minicluster_conn_id: str, capfd: pytest.CaptureFixture) -> None:
    hook = FlinkRuntimeHook(minicluster_conn_id)
    vertex = JobVertex(id="v", name="Sleep", invokable="sleep", config={"seconds": 6})
    job_id = hook.submit_job(JobGraph(name="progress trigger", vertices=[vertex]))
    events = [event async for event in JobStatusTrigger(job_id, minicluster_conn_id).run()]
    assert events[0].payload["state"] == "FINISHED"
    logged = capfd.readouterr()  # a trigger logs through Airflow's structlog, to the console here
    assert f"Job {job_id} RUNNING: Sleep 0/1 finished" in logged.out + logged.err
    hook.close()


@pytest.mark.integration
def test_a_failed_job_brings_its_failing_subtasks_last_log_lines(tmp_path: Path) -> None:
    """A cluster that keeps logs (env.log.dir): the failure carries the subtask's lines."""
    config = fast_config(**{"env.log.dir": str(tmp_path / "log"), "io.tmp.dirs": str(tmp_path / "data")})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        host, port = cluster.rest_url.removeprefix("http://").rsplit(":", 1)
        os.environ["AIRFLOW_CONN_PROGRESS_LOGS"] = json.dumps(
            {"conn_type": "flink_runtime", "host": host, "port": int(port)}
        )
        try:
            hook = FlinkRuntimeHook("progress_logs")
            failing = JobVertex(id="f", name="Fail", invokable="fail", config={"message": "the reason"})
            with JobClient(cluster.rest_url) as client:
                job_id = client.submit(JobGraph(name="fails", vertices=[failing]))
                assert client.wait(job_id, timeout=60).value == "FAILED"
            failure: Any = hook.job_failure(job_id, "FAILED")
            hook.close()
        finally:
            del os.environ["AIRFLOW_CONN_PROGRESS_LOGS"]
    assert "the reason" in str(failure)
    assert failure.log_lines and all(f"job={job_id} vertex=f subtask=0" in line for line in failure.log_lines)
    assert any("the reason" in line for line in failure.log_lines)
