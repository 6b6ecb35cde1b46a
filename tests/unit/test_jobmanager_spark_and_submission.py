"""Two parts of the JobManager built alone: JobManagerSpark (its SparkSession, with the
session factory replaced by a recorder: starting Spark is not this layer's to test) and
validate_submission (what a cluster accepts of a JobGraph)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph.jobgraph import JobGraph, JobVertex, new_job_id
from flink_runtime.jobgraph.validation import InvalidJobGraph
from flink_runtime.jobmanager import spark_session
from flink_runtime.jobmanager.spark_session import JobManagerSpark
from flink_runtime.jobmanager.submission import validate_submission


class Sessions:
    def __init__(self) -> None:
        self.acquired: list[dict[str, Any]] = []
        self.released = 0

    def acquire(self, settings: dict[str, Any], **options: Any) -> object:
        self.acquired.append(options)
        return object()

    def release(self) -> None:
        self.released += 1


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> Sessions:
    recorder = Sessions()
    monkeypatch.setattr(spark_session, "acquire_session", recorder.acquire)
    monkeypatch.setattr(spark_session, "release_session", recorder.release)
    return recorder


def test_the_session_starts_once_on_first_use_from_any_thread(sessions: Sessions) -> None:
    spark = JobManagerSpark(Configuration({}), planning_only=True)
    spark.release()
    assert sessions.released == 0  # never started: nothing to give back
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(spark.get())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(session) for session in got}) == 1
    # Alone in its process it plans on one core: a Spark cluster's cores are the TaskManagers'.
    assert sessions.acquired == [{"default_cores": 1, "planning_only": True}]
    spark.release()
    spark.release()
    assert sessions.released == 1


def test_a_minicluster_jobmanager_shares_the_taskmanagers_session(sessions: Sessions) -> None:
    JobManagerSpark(Configuration({}), planning_only=False).get()
    assert sessions.acquired == [{"default_cores": 1, "planning_only": False}]


def graph(invokable: str, config: dict[str, Any] | None = None) -> JobGraph:
    vertex = JobVertex(id="source", name="Source", invokable=invokable, parallelism=1)
    return JobGraph(name="job", job_id=new_job_id(), vertices=[vertex], config=config or {})


def test_a_submission_with_builtin_or_class_path_invokables_is_accepted() -> None:
    validate_submission(graph("noop"), Configuration({}))
    validate_submission(graph("my_package.tasks:MyTask"), Configuration({}))  # imported by the planner, not here


def test_an_unknown_invokable_is_refused_by_name() -> None:
    with pytest.raises(InvalidJobGraph, match="unknown invokable 'no_such_invokable'"):
        validate_submission(graph("no_such_invokable"), Configuration({}))


def test_the_config_and_path_problems_of_a_submission_are_listed_at_once(tmp_path: Any) -> None:
    cluster = Configuration({"security.allowed-directories": str(tmp_path)})
    config = {"jobmanager.rpc.port": 1234, "state.checkpoints.dir": "/elsewhere/checkpoints"}
    with pytest.raises(InvalidJobGraph) as raised:
        validate_submission(graph("noop", config), cluster)
    [cluster_setting, path] = raised.value.errors
    assert cluster_setting.startswith("config['jobmanager.rpc.port']") and "cluster setting" in cluster_setting
    assert path.startswith("config['state.checkpoints.dir']")
    validate_submission(graph("noop", {"state.checkpoints.dir": str(tmp_path / "cp")}), cluster)
