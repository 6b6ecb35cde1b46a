"""Metrics of a real MiniCluster through Flink's REST metric endpoints and Prometheus text."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flink_runtime.client import JobClient
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import modulo_sum_job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def finished_job(minicluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    with JobClient(minicluster.rest_url, timeout=30) as client:
        job_id = client.submit(modulo_sum_job(tmp_path_factory.mktemp("metrics-out"), name="metrics"))
        assert client.wait(job_id, timeout=60) is JobStatus.FINISHED
    return job_id


@pytest.fixture(scope="module")
def rest(minicluster: MiniCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=minicluster.rest_url, timeout=30) as client:
        yield client


def values(rest: httpx.Client, path: str, get: str) -> dict[str, str]:
    answer = rest.get(path, params={"get": get})
    assert answer.status_code == 200, answer.text
    return {item["id"]: item["value"] for item in answer.json()}


def test_jobmanager_metrics(rest: httpx.Client) -> None:
    names = {item["id"] for item in rest.get("/v1/jobmanager/metrics").json()}
    assert {"numRegisteredTaskManagers", "taskSlotsTotal", "taskSlotsAvailable", "numRunningJobs"} <= names
    got = values(rest, "/jobmanager/metrics", "numRegisteredTaskManagers,taskSlotsTotal")
    assert got == {"numRegisteredTaskManagers": "2", "taskSlotsTotal": "4"}


def test_job_and_vertex_metrics_count_what_the_tasks_did(rest: httpx.Client, finished_job: str) -> None:
    job = values(rest, f"/jobs/{finished_job}/metrics", "numRestarts,uptime,numberOfCompletedCheckpoints")
    assert job["numRestarts"] == "0" and job["uptime"] == "0"  # FINISHED: no longer up
    source = values(rest, f"/jobs/{finished_job}/vertices/src/metrics", "0.numRecordsOut,1.numRecordsOut")
    assert int(source["0.numRecordsOut"]) + int(source["1.numRecordsOut"]) == 1000
    aggregated = rest.get(
        f"/jobs/{finished_job}/vertices/sum/subtasks/metrics", params={"get": "numRecordsIn", "agg": "sum,min"}
    ).json()
    assert aggregated[0]["id"] == "numRecordsIn" and aggregated[0]["sum"] == 1000.0
    assert set(aggregated[0]) == {"id", "sum", "min"}
    assert rest.get(f"/jobs/{finished_job}/vertices/nope/metrics").status_code == 404
    assert rest.get(f"/jobs/{'0' * 32}/metrics").status_code == 404


def test_prometheus_text_has_the_cluster_jobs_and_tasks(rest: httpx.Client, finished_job: str) -> None:
    answer = rest.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }
    assert samples[("flink_jobmanager_numRegisteredTaskManagers", ())] == 2
    written = [
        value
        for (name, labels), value in samples.items()
        if name == "flink_taskmanager_job_task_numRecordsOut"
        and ("job_id", finished_job) in labels
        and ("task_id", "src") in labels
    ]
    assert sum(written) == 1000 and len(written) == 2
    assert any(
        name == "flink_jobmanager_job_numRestarts" and ("job_id", finished_job) in labels for name, labels in samples
    )
