"""Supervision escalates by default, in an in-process MiniCluster: when
one of its endpoints fails in a handler of its own (not a JobMaster's: that fails only the
job, tests/integration/test_supervision.py), nothing keeps serving from a state that is
now unknown. A library must not end the program that hosts it, so the cluster shuts
down and keeps the reason: its REST URL refuses connections, and the next call on it
(`rest_url`, `call`, leaving the `with` block) raises MiniClusterFailed naming the
endpoint, the handler and the error.

The embedded cluster (a MiniCluster in a process of its own) ends its process instead:
tests/airflow/test_embedded_supervision.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.minicluster import MiniCluster, MiniClusterFailed
from flink_runtime.rpc.messages import Heartbeat, SubmitJob
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests.conftest import fast_config
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration


class InjectedFault(RuntimeError):
    pass


def refuses_connections(rest_url: str) -> bool:
    try:
        httpx.get(f"{rest_url}/overview", timeout=2)
    except httpx.TransportError:
        return True
    return False


def poison_submit_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """The JobManager's SubmitJob handler raises, after changing nothing, for a job named 'poison'."""
    original = JobManager.on_submit_job

    def on_submit_job(self: JobManager, message: SubmitJob) -> Any:
        if message.job_graph.name == "poison":
            raise InjectedFault("the JobManager's state is half-changed")
        return original(self, message)

    monkeypatch.setattr(JobManager, "on_submit_job", on_submit_job)


# Set once the cluster serves: from then on a TaskManager's Heartbeat handler raises.
heartbeats_poisoned = threading.Event()


def poison_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TaskManager's Heartbeat handler raises once armed (the JobManager sends one every 500 ms)."""
    original = TaskExecutor.on_heartbeat
    heartbeats_poisoned.clear()

    def on_heartbeat(self: TaskExecutor, message: Heartbeat) -> Any:
        if heartbeats_poisoned.is_set():
            raise InjectedFault("the TaskManager's slot table is torn")
        return original(self, message)

    monkeypatch.setattr(TaskExecutor, "on_heartbeat", on_heartbeat)


def submit_poison(rest_url: str) -> None:
    graph = JobGraph(name="poison", vertices=[JobVertex(id="v", name="V", invokable="noop")])
    try:
        answer = httpx.post(
            f"{rest_url}/jobs", content=graph.to_json(), headers={"Content-Type": "application/json"}, timeout=30
        )
    except httpx.TransportError:
        return  # the cluster shut down before it answered
    assert answer.status_code != 202, answer.text


@pytest.mark.parametrize(
    ("poison", "trigger", "reason"),
    [
        (
            poison_submit_job,
            submit_poison,
            "JobManager (handling SubmitJob) failed: InjectedFault: the JobManager's state is half-changed",
        ),
        (
            poison_heartbeat,
            lambda rest_url: heartbeats_poisoned.set(),
            "TaskExecutor minicluster-tm-0 (handling Heartbeat) failed: InjectedFault: the TaskManager's slot table",
        ),
    ],
    ids=["jobmanager", "taskmanager"],
)
def test_an_endpoint_that_fails_shuts_the_minicluster_down_and_the_next_call_names_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, poison: Any, trigger: Any, reason: str
) -> None:
    poison(monkeypatch)
    cluster = MiniCluster(fast_config(**{"io.tmp.dirs": str(tmp_path / "data")}), num_taskmanagers=1)
    # Leaving the block raises the reason too, once the cluster has stopped.
    with pytest.raises(MiniClusterFailed) as left_with, cluster:
        rest_url = cluster.rest_url
        trigger(rest_url)
        eventually(lambda: refuses_connections(rest_url), 30, "the failed MiniCluster to shut down")
        assert cluster.failure is not None and str(cluster.failure).startswith(reason), cluster.failure
        assert isinstance(cluster.failure.__cause__, InjectedFault)
        with pytest.raises(MiniClusterFailed, match="InjectedFault"):
            cluster.rest_url  # noqa: B018 - the next call fails, naming why
    assert left_with.value is cluster.failure
    assert cluster.taskmanagers == []  # every part was stopped, not only the failed one
