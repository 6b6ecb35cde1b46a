"""The REST paths Flink 2.3's web UI calls, asked directly over HTTP of the session MiniCluster:
each in Flink's shape, empty where the concept does not exist here, real data where it
does (busy/idle ratios from the tasks' measured time, TaskManager thread dumps of the
Python process, when each subtask entered each state). And Flink's multipart uploads
(`flink run`'s Java JobGraph, the web UI's JARs) answered 400 with the reason, after the
whole body was read. tests/browser/test_flink_web_ui.py walks the same paths in the UI.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def http(minicluster: MiniCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=minicluster.rest_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def finished(minicluster: MiniCluster) -> tuple[str, str]:
    """(job id, vertex id) of a finished job of two subtasks."""
    graph = JobGraph(name="ui routes", vertices=[JobVertex(id="noop", name="Noop", invokable="noop", parallelism=2)])
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        assert client.wait(job_id, timeout=60).value == "FINISHED"
    return job_id, "noop"


def test_concepts_that_do_not_exist_here_answer_flinks_empty_answers(http: httpx.Client) -> None:
    assert http.get("/applications/overview").json() == {"applications": []}
    assert http.get("/v1/datasets").json() == {"dataSets": []}
    assert http.get("/jars").json() == {"address": "", "files": []}


def test_a_vertexs_tabs(http: httpx.Client, finished: tuple[str, str], minicluster: MiniCluster) -> None:
    job_id, vertex = finished
    base = f"/jobs/{job_id}/vertices/{vertex}"
    assert http.get(f"{base}/watermarks").json() == []
    assert http.get(f"{base}/jm-operator-metrics").json() == []
    assert http.get(f"{base}/flamegraph", params={"type": "on_cpu"}).json() == {"endTimestamp": -2, "data": None}

    pressure = http.get(f"{base}/backpressure").json()
    assert pressure["status"] == "ok" and pressure["backpressure-level"] == "ok"
    assert [s["subtask"] for s in pressure["subtasks"]] == [0, 1]
    for subtask in pressure["subtasks"]:
        assert subtask["ratio"] == 0.0 and subtask["backpressure-level"] == "ok"
        assert 0.0 <= subtask["busyRatio"] <= 1.0 and 0.0 <= subtask["idleRatio"] <= 1.0
        assert subtask["busyRatio"] + subtask["idleRatio"] in (0.0, pytest.approx(1.0, abs=0.01))

    times = http.get(f"{base}/subtasktimes").json()
    assert times["id"] == vertex and len(times["subtasks"]) == 2
    for subtask in times["subtasks"]:
        assert {"DEPLOYING", "RUNNING", "FINISHED"} <= set(subtask["timestamps"]), subtask
        assert subtask["duration"] >= 0 and subtask["host"]

    taskmanagers = http.get(f"{base}/taskmanagers").json()["taskmanagers"]
    assert {tm["taskmanager-id"] for tm in taskmanagers} <= set(minicluster.jobmanager.task_managers)
    assert sum(tm["status-counts"]["FINISHED"] for tm in taskmanagers) == 2
    assert all(tm["status"] == "FINISHED" and tm["end-time"] >= tm["start-time"] > 0 for tm in taskmanagers)

    names = [a["name"] for a in http.get(f"{base}/accumulators").json()["user-accumulators"]]
    assert names == ["numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut"]
    per_subtask = http.get(f"{base}/subtasks/accumulators").json()
    assert per_subtask["parallelism"] == 2 and [s["subtask"] for s in per_subtask["subtasks"]] == [0, 1]

    unknown = http.get(f"/jobs/{job_id}/vertices/nope/watermarks")
    assert unknown.status_code == 404 and "nope" in unknown.json()["errors"][0]


def test_the_jobmanager_of_a_job(http: httpx.Client, finished: tuple[str, str], minicluster: MiniCluster) -> None:
    job_id, _ = finished
    config = {item["key"]: item["value"] for item in http.get(f"/jobs/{job_id}/jobmanager/config").json()}
    assert config["heartbeat.interval"] == "500 ms"
    environment = http.get(f"/jobs/{job_id}/jobmanager/environment").json()
    assert "Python" in environment["jvm"]["version"] and environment["classpath"]
    assert http.get(f"/jobs/{job_id}/jobmanager/log-url").json()["url"].endswith("/jobmanager/log")
    tm_id = sorted(minicluster.jobmanager.task_managers)[0]
    url = http.get(f"/jobs/{job_id}/taskmanagers/{tm_id}/log-url").json()["url"]
    assert url.endswith(f"/taskmanagers/{tm_id}/log")
    assert http.get("/jobs/0123456789abcdef0123456789abcdef/jobmanager/config").status_code == 404


def test_a_taskmanagers_thread_dump_is_its_python_threads(http: httpx.Client, minicluster: MiniCluster) -> None:
    tm_id = sorted(minicluster.jobmanager.task_managers)[0]
    threads = http.get(f"/taskmanagers/{tm_id}/thread-dump").json()["threadInfos"]
    assert any(t["threadName"] == "MainThread" for t in threads), [t["threadName"] for t in threads]
    for thread in threads:
        assert thread["stringifiedThreadInfo"].startswith(f'"{thread["threadName"]}"')
        assert "\tat " in thread["stringifiedThreadInfo"]
    assert http.get("/taskmanagers/nope/thread-dump").status_code == 404


def test_metrics_aggregated_over_taskmanagers_and_jobs(http: httpx.Client, finished: tuple[str, str]) -> None:
    names = [item["id"] for item in http.get("/taskmanagers/metrics").json()]
    assert names, "the TaskManagers report no metrics"
    answer = http.get("/taskmanagers/metrics", params={"get": names[0], "agg": "min,max"}).json()
    assert answer and set(answer[0]) == {"id", "min", "max"} and answer[0]["min"] <= answer[0]["max"]
    job_id, _ = finished
    restarts = http.get("/jobs/metrics", params={"get": "numRestarts", "jobs": job_id}).json()
    assert restarts == [{"id": "numRestarts", "min": 0.0, "max": 0.0, "avg": 0.0, "sum": 0.0}]
    assert http.get("/jobs/metrics", params={"jobs": "nope"}).status_code == 404


@pytest.mark.parametrize("path", ["/v1/jobs", "/jars/upload"])
def test_a_multipart_program_is_read_whole_and_refused_with_the_reason(http: httpx.Client, path: str) -> None:
    """What `flink run` (POST /jobs: a Java-serialized JobGraph and JARs) and the web UI's
    upload (POST /jars/upload) send: answered 400 with what to use instead, not 415."""
    payload = b"\xac\xed\x00\x05" + b"x" * (4 << 20)  # a Java serialization stream's magic, 4 MiB
    files = {"file_0": ("job.graph", payload, "application/octet-stream")}
    answer = http.post(path, files=files)
    assert answer.status_code == 400, answer.text
    message = answer.json()["errors"][0]
    assert "cannot run" in message and "flink-runtime run job.json" in message, message
    assert str(len(payload)) in message or "bytes" in message, message
