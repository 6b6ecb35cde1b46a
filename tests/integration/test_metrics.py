"""Metrics of a real MiniCluster through Flink's REST metric endpoints and Prometheus text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flink_runtime.client import JobClient
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.waiting import eventually

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
    got = values(rest, "/jobmanager/metrics", "numRegisteredTaskManagers,taskSlotsTotal,uptime")
    assert float(got.pop("uptime")) > 0
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


def test_taskmanagers_report_cpu_memory_and_their_spark_jvm(
    rest: httpx.Client, minicluster: MiniCluster, tmp_path: Path
) -> None:
    """Each TaskManager samples itself and sends the figures with its heartbeats; a
    TaskManager that ran a Spark task also reports that JVM's heap (through JMX)."""
    (tmp_path / "in.txt").write_text("a b\nc\n")
    pipeline = Pipeline("metrics spark", parallelism=1)
    pipeline.read_text(str(tmp_path / "in.txt")).select("value").write_parquet(str(tmp_path / "out"))
    with JobClient(minicluster.rest_url, timeout=30) as client:
        assert client.wait(client.submit(pipeline.job_graph()), timeout=120) is JobStatus.FINISHED
    ids = [tm["id"] for tm in rest.get("/taskmanagers").json()["taskmanagers"]]
    heap = "Status.JVM.Memory.Heap.Used,Status.JVM.Memory.Heap.Max"
    eventually(lambda: any(len(values(rest, f"/taskmanagers/{tm}/metrics", heap)) == 2 for tm in ids))
    for tm in ids:
        names = {item["id"] for item in rest.get(f"/taskmanagers/{tm}/metrics").json()}
        assert {"Status.Python.CPU.Load", "Status.Python.Memory.RSS", "System.Memory.Total"} <= names
        python = values(rest, f"/taskmanagers/{tm}/metrics", "Status.Python.Memory.RSS,Status.Python.CPU.Load")
        assert int(python["Status.Python.Memory.RSS"]) > 10 << 20 and 0 <= float(python["Status.Python.CPU.Load"]) <= 1
    with_jvm = [tm for tm in ids if values(rest, f"/taskmanagers/{tm}/metrics", heap)]
    jvm = values(rest, f"/taskmanagers/{with_jvm[0]}/metrics", heap + ",Status.JVM.CPU.Load")
    assert 0 < int(jvm["Status.JVM.Memory.Heap.Used"]) <= int(jvm["Status.JVM.Memory.Heap.Max"])
    details = rest.get(f"/taskmanagers/{with_jvm[0]}").json()["metrics"]
    assert details["heapMax"] == int(jvm["Status.JVM.Memory.Heap.Max"]) and details["garbageCollectors"]
    assert rest.get("/taskmanagers/nope/metrics").status_code == 404
    scraped = {
        (sample.name, sample.labels.get("tm_id"))
        for family in text_string_to_metric_families(rest.get("/metrics").text)
        for sample in family.samples
    }
    assert ("flink_taskmanager_Status_JVM_Memory_Heap_Used", with_jvm[0]) in scraped
    assert all(("flink_taskmanager_Status_Python_Memory_RSS", tm) in scraped for tm in ids)
