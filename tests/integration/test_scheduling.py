"""Scheduling semantics on a MiniCluster (2 TaskManagers x 2 slots)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import DistributionPattern, JobGraph, JobVertex, Partitioner
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}


def vertex_subtasks(rest_url: str, job_id: str, vertex_id: str) -> list[dict]:
    return httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{vertex_id}").json()["subtasks"]


def test_consumers_are_deployed_only_when_their_inputs_are_finished(minicluster: MiniCluster, tmp_path: Path) -> None:
    graph = JobGraph(
        name="lazy",
        vertices=[
            JobVertex(
                id="numbers", name="Numbers", invokable="number-source", parallelism=2,
                config={"count": 100, "splits": 4, "seconds_per_split": 0.3},
            ),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=2),
        ],
    )  # fmt: skip
    graph.connect("numbers", "sum", partitioner=Partitioner.HASH, keys=["key"])
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        # Sources run (submit answers once they do); the consumers wait in CREATED.
        assert {s["status"] for s in vertex_subtasks(minicluster.rest_url, job_id, "numbers")} <= {
            "RUNNING",
            "DEPLOYING",
            "INITIALIZING",
        }
        assert {s["status"] for s in vertex_subtasks(minicluster.rest_url, job_id, "sum")} == {"CREATED"}
        assert client.wait(job_id, timeout=30).value == "FINISHED"
    # Each source subtask pulls 2 splits at 0.3 s each; a consumer is deployed when the
    # last source partition is committed (just before that source reports FINISHED).
    sources_started = min(s["start-time"] for s in vertex_subtasks(minicluster.rest_url, job_id, "numbers"))
    consumers_started = min(s["start-time"] for s in vertex_subtasks(minicluster.rest_url, job_id, "sum"))
    assert consumers_started - sources_started >= 550


def test_co_located_subtasks_share_a_slot(minicluster: MiniCluster) -> None:
    graph = JobGraph(
        name="co-located",
        vertices=[
            JobVertex(
                id="head", name="Head", invokable="sleep", parallelism=2,
                config={"seconds": 0.2}, co_location_group="iteration",
            ),
            JobVertex(id="tail", name="Tail", invokable="noop", parallelism=2, co_location_group="iteration"),
        ],
    )  # fmt: skip
    graph.connect("head", "tail", distribution_pattern=DistributionPattern.POINTWISE, partitioner=Partitioner.FORWARD)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        assert client.wait(job_id, timeout=30).value == "FINISHED"
    heads = vertex_subtasks(minicluster.rest_url, job_id, "head")
    tails = vertex_subtasks(minicluster.rest_url, job_id, "tail")
    for head, tail in zip(heads, tails, strict=True):
        assert head["taskmanager-id"] == tail["taskmanager-id"]


def _peak_running(rest_url: str, job_id: str, seconds: float) -> int:
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        details = httpx.get(f"{rest_url}/jobs/{job_id}").json()
        peak = max(peak, sum(v["tasks"]["RUNNING"] for v in details["vertices"]))
        if details["state"] != "RUNNING":
            break
        time.sleep(0.05)
    return peak


@pytest.mark.parametrize(("sharing_group", "expected_peak"), [("default", 8), (None, 4)])
def test_slot_sharing_puts_one_subtask_of_each_vertex_in_a_slot(
    minicluster: MiniCluster, sharing_group: str | None, expected_peak: int
) -> None:
    # Two independent 4-wide vertices on 4 slots: sharing runs all 8 subtasks at once,
    # without it only 4 fit.
    vertices = [
        JobVertex(
            id=name, name=name, invokable="sleep", parallelism=4, config={"seconds": 1.0},
            slot_sharing_group=sharing_group,
        )
        for name in ("left", "right")
    ]  # fmt: skip
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(JobGraph(name=f"sharing {sharing_group}", vertices=vertices))
        assert _peak_running(minicluster.rest_url, job_id, 5) == expected_peak
        assert client.wait(job_id, timeout=30).value == "FINISHED"


def test_more_subtasks_than_slots_reuse_the_slots(minicluster: MiniCluster) -> None:
    graph = JobGraph(name="wide", vertices=[JobVertex(id="n", name="N", invokable="noop", parallelism=200)])
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        assert client.wait(job_id, timeout=30).value == "FINISHED"
    assert httpx.get(f"{minicluster.rest_url}/overview").json()["slots-available"] == 4


def test_same_job_id_twice_is_a_conflict(minicluster: MiniCluster) -> None:
    graph = JobGraph(name="once", job_id="ab" * 16, vertices=[JobVertex(id="n", name="N", invokable="noop")])
    first = httpx.post(f"{minicluster.rest_url}/jobs", content=graph.to_json(), headers=JSON)
    second = httpx.post(f"{minicluster.rest_url}/jobs", content=graph.to_json(), headers=JSON)
    assert first.status_code == 202
    assert second.status_code == 409
    assert "already submitted" in second.json()["errors"][0]


def test_event_long_poll_returns_when_the_job_changes(minicluster: MiniCluster) -> None:
    graph = JobGraph(name="poll", vertices=[JobVertex(id="s", name="S", invokable="sleep", config={"seconds": 0.5})])
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        page = httpx.get(f"{minicluster.rest_url}/jobs/{job_id}/events").json()
        assert page["state"] == "RUNNING"
        started = time.monotonic()
        answer = httpx.get(
            f"{minicluster.rest_url}/jobs/{job_id}/events", params={"since": page["next"], "timeout": 10}, timeout=15
        ).json()
        waited = time.monotonic() - started
    # The answer holds FINISHED, so it was not sent before the change (an early answer has no
    # events); it came well before the 10 s timeout, so it was sent on the change.
    assert [e["new-state"] for e in answer["events"]] == ["FINISHED"]
    assert waited < 3.0


def test_finished_jobs_expire_from_the_job_store(tmp_path: Path) -> None:
    config = fast_config(**{"jobstore.expiration-time": "1 s", "io.tmp.dirs": str(tmp_path)})
    with (
        MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as cluster,
        JobClient(cluster.rest_url) as client,
    ):
        job_id = client.submit(JobGraph(name="brief", vertices=[JobVertex(id="n", name="N", invokable="noop")]))
        assert client.wait(job_id, timeout=10).value == "FINISHED"
        assert httpx.get(f"{cluster.rest_url}/jobs/{job_id}").status_code == 200
        deadline = time.monotonic() + 5
        while httpx.get(f"{cluster.rest_url}/jobs/{job_id}").status_code != 404:
            assert time.monotonic() < deadline, "finished job did not expire"
            time.sleep(0.1)
