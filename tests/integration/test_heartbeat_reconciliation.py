"""Reconciliation through heartbeats on a real MiniCluster: every
HeartbeatResponse lists the executions its TaskManager runs, and the JobManager

- fails an execution it believes running that the TaskManager no longer has (its final
  state never reached the JobManager), so the restart strategy runs it again instead of
  the job waiting for ever;
- cancels an execution the TaskManager runs that the JobManager does not (a stale task:
  an attempt the JobManager gave up while its TaskManager kept running it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from flink_runtime.taskmanager.task import Task
from tests.conftest import fast_config

pytestmark = pytest.mark.integration

RESTART_ONCE = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1",
    "restart-strategy.fixed-delay.delay": "100 ms",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    config = fast_config(**{"io.tmp.dirs": str(tmp_path_factory.mktemp("reconciliation-data"))})
    with MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=1) as minicluster:
        yield minicluster


def sleep_job(name: str, seconds: float) -> JobGraph:
    return JobGraph(
        name=name,
        vertices=[JobVertex(id="zzz", name="Sleep", invokable="sleep", config={"seconds": seconds})],
        config=dict(RESTART_ONCE),
    )


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def running_task(cluster: MiniCluster, job_id: str, other_than: str = "") -> tuple[int, Task] | None:
    """(index of its TaskManager, task) of the job's task running on some TaskManager,
    other than the attempt `other_than` (one whose thread ended stays in its TaskManager's
    table until that TaskManager's mailbox removes it)."""
    for index, taskmanager in enumerate(cluster.taskmanagers):
        for task in list(taskmanager.tasks.values()):
            if task.job_id == job_id and task.execution_id != other_than:
                return index, task
    return None


def in_mailbox(cluster: MiniCluster, endpoint: Any, function: Callable[..., Any], *args: Any) -> Any:
    async def call() -> Any:
        return await endpoint.call_in_mailbox(function, *args)

    return cluster.call(call)


def attempt_number(cluster: MiniCluster, job_id: str) -> int:
    assert cluster.jobmanager is not None
    graph = cluster.jobmanager.jobs[job_id].graph
    assert graph is not None
    return next(iter(graph.all_execution_vertices())).current_execution.attempt_number


def test_an_execution_its_taskmanager_lost_is_failed_and_restarted(cluster: MiniCluster) -> None:
    with JobClient(cluster.rest_url) as client:
        job_id = client.submit(sleep_job("lost task", seconds=3))
        index, task = wait_for(lambda: running_task(cluster, job_id), 30, "the task runs on a TaskManager")
        wait_for(lambda: client.status(job_id).value == "RUNNING", 30, "the job is RUNNING")
        # The TaskManager loses the task without its final state ever reaching the
        # JobManager (what a lost update does): from now on it is not in the reports.
        taskmanager = cluster.taskmanagers[index]
        in_mailbox(cluster, taskmanager, taskmanager.tasks.pop, task.execution_id)

        assert client.wait(job_id, timeout=60).value == "FINISHED"
        root = client.exceptions(job_id)["root-exception"]
        assert "ExecutionLostException" in root
        assert task.execution_id in root and "heartbeat report does not list it" in root
        assert attempt_number(cluster, job_id) == task.descriptor.attempt_number + 1, "it ran again"


def test_a_stale_task_the_jobmanager_gave_up_is_cancelled(
    cluster: MiniCluster, caplog: pytest.LogCaptureFixture
) -> None:
    assert cluster.jobmanager is not None
    jobmanager = cluster.jobmanager
    with JobClient(cluster.rest_url) as client:
        job_id = client.submit(sleep_job("stale task", seconds=30))
        _, stale = wait_for(lambda: running_task(cluster, job_id), 30, "the task runs on a TaskManager")
        wait_for(lambda: client.status(job_id).value == "RUNNING", 30, "the job is RUNNING")
        # The JobManager gives the attempt up (as it does when a SubmitTask answer is lost,
        # or after a partition) while its TaskManager keeps running it: a new attempt
        # starts, and the old one is a task the JobManager no longer knows.
        job = jobmanager.jobs[job_id]
        in_mailbox(cluster, jobmanager, job.fail_execution, stale.execution_id, "given up by the test")
        # Well before its 30 s sleep would end.
        wait_for(lambda: not stale.thread.is_alive(), 15, "the stale task is cancelled")
        assert stale.cancelled.is_set(), "it stopped because it was cancelled, not because it finished"
        assert any(
            stale.execution_id in record.getMessage() and "cancelling it" in record.getMessage()
            for record in caplog.records
        ), "the JobManager said why"
        # The job goes on with its new attempt.
        new_attempt = wait_for(
            lambda: running_task(cluster, job_id, other_than=stale.execution_id), 30, "the new attempt runs"
        )[1]
        assert new_attempt.descriptor.attempt_number > stale.descriptor.attempt_number
        assert client.status(job_id).value == "RUNNING"
        client.cancel(job_id)
        assert client.wait(job_id, timeout=60).value == "CANCELED"
