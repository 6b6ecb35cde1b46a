"""Fine-grained resources through real processes: a TaskManager with
taskmanager.cpu.cores: 2 and four slots runs subtasks that need one core each two at a
time (not four, as by slot count), and a job that needs four cores in one slot fails at
once with NoResourceAvailableException naming what it asked and what the largest
TaskManager has, instead of running or waiting out slot.request.timeout.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.jobgraph import JobGraph, JobVertex, ResourceProfile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_cores(tmp_path_factory: pytest.TempPathFactory):
    properties = {
        "taskmanager.cpu.cores": "2",
        "taskmanager.memory.task.heap.size": "1g",
        "slot.request.timeout": "120 s",
    }
    with StandaloneCluster(tmp_path_factory.mktemp("two-cores"), properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=4)
        yield cluster


def sleepers(cpu: float, parallelism: int, seconds: float) -> JobGraph:
    return JobGraph(
        name=f"{parallelism} sleepers of {cpu:g} cores",
        vertices=[
            JobVertex(
                id="sleep",
                name="Sleep",
                invokable="sleep",
                parallelism=parallelism,
                config={"seconds": seconds},
                resources=ResourceProfile(cpu_cores=cpu, task_heap_memory_mb=256),
            )
        ],
    )


def test_subtasks_needing_one_core_each_run_two_at_a_time_on_two_cores(two_cores: StandaloneCluster) -> None:
    with JobClient(two_cores.rest_url, timeout=30) as client:
        job_id = client.submit(sleepers(cpu=1, parallelism=4, seconds=2.0))
        most_running = 0
        busy: dict | None = None  # GET /taskmanagers/:id while two subtasks run
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            subtasks = httpx.get(f"{two_cores.rest_url}/jobs/{job_id}/vertices/sleep", timeout=10).json()["subtasks"]
            running = sum(1 for s in subtasks if s["status"] in ("DEPLOYING", "INITIALIZING", "RUNNING"))
            most_running = max(most_running, running)
            if busy is None and sum(1 for s in subtasks if s["status"] == "RUNNING") == 2:
                tm_id = next(s["taskmanager-id"] for s in subtasks if s["status"] == "RUNNING")
                busy = httpx.get(f"{two_cores.rest_url}/taskmanagers/{tm_id}", timeout=10).json()
            if all(s["status"] == "FINISHED" for s in subtasks):
                break
            time.sleep(0.1)
        status = client.wait(job_id, timeout=60)
        assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
    # Four slots, but two cores: never more than two subtasks of one core at once.
    assert most_running == 2
    # REST shows it as Flink's does: the total, nothing free, and each slot with its resources.
    assert busy is not None
    assert busy["totalResource"]["cpuCores"] == 2 and busy["totalResource"]["taskHeapMemory"] == 1024
    assert busy["freeResource"]["cpuCores"] == 0 and busy["freeResource"]["taskHeapMemory"] == 512
    assert busy["slotsNumber"] == 4
    assert [
        (s["resource"]["cpuCores"], s["resource"]["taskHeapMemory"], s["jobId"]) for s in busy["allocatedSlots"]
    ] == [
        (1.0, 256, job_id),
        (1.0, 256, job_id),
    ]


def test_a_job_needing_more_cores_than_any_taskmanager_fails_at_once_with_the_numbers(
    two_cores: StandaloneCluster,
) -> None:
    with JobClient(two_cores.rest_url, timeout=30) as client:
        started = time.monotonic()
        job_id = client.submit(sleepers(cpu=4, parallelism=1, seconds=0.1))
        status = client.wait(job_id, timeout=60)
        took = time.monotonic() - started
        root = client.exceptions(job_id)["root-exception"]
    assert status.value == "FAILED"
    assert "NoResourceAvailableException" in root
    assert "needs 4 cores, 256 MB task heap" in root
    assert "offers 2 cores, 1024 MB task heap" in root
    # At once: not after slot.request.timeout (120 s here).
    assert took < 30, f"the job failed only after {took:.1f} s"


def test_the_cluster_still_runs_jobs_without_resources(two_cores: StandaloneCluster, tmp_path: Path) -> None:
    """UNKNOWN profiles take default slots (2 cores / 4 slots): four at a time, as by count."""
    graph = JobGraph(
        name="no resources",
        vertices=[JobVertex(id="sleep", name="Sleep", invokable="sleep", parallelism=4, config={"seconds": 1.5})],
    )
    with JobClient(two_cores.rest_url, timeout=30) as client:
        job_id = client.submit(graph)
        most_running = 0
        while True:
            subtasks = httpx.get(f"{two_cores.rest_url}/jobs/{job_id}/vertices/sleep", timeout=10).json()["subtasks"]
            most_running = max(most_running, sum(1 for s in subtasks if s["status"] == "RUNNING"))
            if all(s["status"] == "FINISHED" for s in subtasks) or most_running == 4:
                break
            time.sleep(0.1)
        assert client.wait(job_id, timeout=60).value == "FINISHED"
    assert most_running == 4
