"""Batch jobs run to the end on any number of slots, and a retry finds a slot.

Exchanges are blocking, so a finished subtask's slot is free for the next subtask (Flink
schedules batch jobs by pipelined region for this reason). A finished producer that
kept its shared slot for a consumer that cannot start until producers still queued for
slots have run would deadlock a(8) -> b(8) on 2 slots, and a failed subtask's retry would
wait out slot.request.timeout beside a slot held by a FINISHED subtask.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config

pytestmark = pytest.mark.integration


def all_to_all_noop(parallelism: int) -> JobGraph:
    graph = JobGraph(
        name=f"noop {parallelism} x {parallelism}",
        vertices=[
            JobVertex(id="a", name="A", invokable="noop", parallelism=parallelism),
            JobVertex(id="b", name="B", invokable="noop", parallelism=parallelism),
        ],
    )
    graph.connect("a", "b", partitioner=Partitioner.REBALANCE)  # ALL_TO_ALL, default sharing group
    return graph


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory: pytest.TempPathFactory):
    """One TaskManager with 2 slots: far fewer slots than subtasks."""
    config = fast_config(**{"io.tmp.dirs": str(tmp_path_factory.mktemp("two-slots"))})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        yield cluster


# 8: the a(8) -> b(8) deadlock; 500: 250 waves of slots per vertex and 250,000 all-to-all
# edges, enough to show scheduling that grows with waves x edges (2000 took 42 s of a
# loaded suite for the same point; 500 takes 5-8 s).
@pytest.mark.parametrize("parallelism", [8, 500])
def test_all_to_all_job_with_more_subtasks_than_slots_finishes(two_slots: MiniCluster, parallelism: int) -> None:
    # slot.request.timeout is 5 s here: a deadlock fails the job with NoResourceAvailable.
    with JobClient(two_slots.rest_url, timeout=60) as client:
        job_id = client.submit(all_to_all_noop(parallelism))
        status = client.wait(job_id, timeout=180)
        assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
        tasks = {v["id"]: v["tasks"] for v in client.details(job_id)["vertices"]}
    assert tasks["a"]["FINISHED"] == tasks["b"]["FINISHED"] == parallelism


def test_retry_takes_the_slot_of_a_finished_subtask(tmp_path: Path) -> None:
    """kill -9 of one of two one-slot TaskManagers: the lost source's retry runs in the
    survivor's slot once its source subtask finished, long before slot.request.timeout."""
    properties = {
        "heartbeat.interval": "300 ms",
        "heartbeat.timeout": "3 s",
        "slot.request.timeout": "120 s",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "5",
        "restart-strategy.fixed-delay.delay": "100 ms",
    }
    count = 40_000
    graph = JobGraph(
        name="failover on a full cluster",
        vertices=[
            JobVertex(
                id="src", name="Numbers", invokable="number-source", parallelism=2,
                config={"count": count, "splits": 24, "modulo": 7, "seconds_per_split": 0.25},
            ),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=2),
            JobVertex(id="sink", name="Sink", invokable="collect-sink", config={"path": str(tmp_path / "out")}),
        ],
    )  # fmt: skip
    graph.connect("src", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=2, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(graph)
            time.sleep(1.0)
            subtasks = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/src").json()["subtasks"]
            victim_id = next(s["taskmanager-id"] for s in subtasks if s["subtask"] == 1)
            victim = next(tm for tm in cluster.taskmanagers if tm.name == f"taskmanager-{victim_id}")
            victim.kill()
            killed_at = time.monotonic()
            status = client.wait(job_id, timeout=90)
            finished_after = time.monotonic() - killed_at
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]

    # The survivor has ~6 s of splits left; without a free slot the retry would wait 120 s.
    assert finished_after < 40, f"job finished {finished_after:.1f} s after the kill"
    records = [r for part in (tmp_path / "out").glob("part-*.json") for r in json.loads(part.read_text())]
    assert sum(r["count"] for r in records) == count
    assert sum(r["sum"] for r in records) == count * (count - 1) // 2
