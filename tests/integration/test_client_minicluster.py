"""JobClient against a real MiniCluster (2 TaskManagers x 2 slots)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.client import JobClient, JobNotFound, RestClientError
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.jobs import sleep_job as sleep_job_of

pytestmark = pytest.mark.integration


@pytest.fixture
def client(minicluster: MiniCluster) -> Iterator[JobClient]:
    with JobClient(minicluster.rest_url, timeout=10) as job_client:
        yield job_client


def sum_job(out: Path, count: int = 1000, modulo: int = 3) -> JobGraph:
    return modulo_sum_job(out, count, modulo)


def sleep_job(seconds: float = 30.0) -> JobGraph:
    return sleep_job_of(seconds)


def test_multi_vertex_job_finishes_with_the_right_output(client: JobClient, tmp_path: Path) -> None:
    job_id = client.submit(sum_job(tmp_path))
    assert client.wait(job_id, timeout=30) is JobStatus.FINISHED

    records = [record for part in tmp_path.glob("part-*.json") for record in json.loads(part.read_text())]
    assert {r["key"]: r["sum"] for r in records} == {k: sum(n for n in range(1000) if n % 3 == k) for k in range(3)}
    assert {r["key"]: r["count"] for r in records} == {0: 334, 1: 333, 2: 333}

    assert client.status(job_id) is JobStatus.FINISHED
    details = client.details(job_id)
    assert [v["status"] for v in details["vertices"]] == ["FINISHED"] * 3
    assert any(job["jid"] == job_id and job["state"] == "FINISHED" for job in client.list_jobs())
    assert client.exceptions(job_id)["root-exception"] is None
    with pytest.raises(RestClientError) as raised:
        client.cancel(job_id)
    assert raised.value.status_code == 409 and "FINISHED" in str(raised.value)


def test_events_yield_created_running_finished_in_order(client: JobClient) -> None:
    job_id = client.submit(JobGraph(name="noop", vertices=[JobVertex(id="n", name="N", invokable="noop")]))
    events = list(client.events(job_id, poll_timeout=10))
    assert [e.new_state for e in events] == [JobStatus.CREATED, JobStatus.RUNNING, JobStatus.FINISHED]
    assert [e.old_state for e in events] == [JobStatus.INITIALIZING, JobStatus.CREATED, JobStatus.RUNNING]
    assert all(e.job_id == job_id for e in events)
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert events[0].timestamp <= events[-1].timestamp


def test_cancel_a_running_job(client: JobClient) -> None:
    job_id = client.submit(sleep_job())
    assert client.status(job_id) is JobStatus.RUNNING  # POST /jobs answers once sources run
    client.cancel(job_id)
    seen: list[JobStatus] = []
    assert client.wait(job_id, timeout=10, on_event=lambda e: seen.append(e.new_state)) is JobStatus.CANCELED
    assert seen[-2:] == [JobStatus.CANCELLING, JobStatus.CANCELED]
    client.cancel(job_id)  # cancelling a CANCELED job again is acknowledged, as Flink does
    assert client.status(job_id) is JobStatus.CANCELED


def test_failed_job_exposes_its_root_exception(client: JobClient) -> None:
    graph = JobGraph(
        name="boom",
        vertices=[JobVertex(id="f", name="Fail", invokable="fail", config={"message": "kaboom 7"})],
    )
    job_id = client.submit(graph)
    assert client.wait(job_id, timeout=10) is JobStatus.FAILED
    assert "kaboom 7" in client.exceptions(job_id)["root-exception"]


def test_unknown_job_is_job_not_found(client: JobClient) -> None:
    missing = "f" * 32
    with pytest.raises(JobNotFound) as raised:
        client.status(missing)
    assert raised.value.status_code == 404 and missing in str(raised.value)
    with pytest.raises(JobNotFound):
        list(client.events(missing))


def test_invalid_job_graph_is_rejected_with_the_vertex_named(client: JobClient) -> None:
    document = {
        "name": "bad",
        "vertices": [{"id": "broken-vertex", "name": "B", "invokable": "no-such-thing"}],
    }
    with pytest.raises(RestClientError) as raised:
        client.submit(document)
    assert raised.value.status_code == 400
    assert "broken-vertex" in str(raised.value) and "no-such-thing" in str(raised.value)


def test_cluster_queries(client: JobClient) -> None:
    overview = client.overview()
    assert overview["taskmanagers"] == 2 and overview["slots-total"] == 4
    assert sorted(tm["id"] for tm in client.taskmanagers()) == ["minicluster-tm-0", "minicluster-tm-1"]
