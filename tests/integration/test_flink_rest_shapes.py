"""Our REST answers have the shape of a real Flink 2.3 cluster's (recorded in
tests/flink_reference/recorded by tests/flink_reference/record.py): every field
Flink's typed clients read is there with Flink's JSON type (tests/flink_shapes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from tests.flink_shapes import assert_flink_shape, recorded
from tests.helpers.jobs import modulo_sum_job, sleep_job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jobs(minicluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A finished, a failed and a running job on the shared MiniCluster."""
    with JobClient(minicluster.rest_url, timeout=30) as client:
        finished = client.submit(modulo_sum_job(tmp_path_factory.mktemp("shapes-out"), name="shapes finished"))
        failing = JobGraph(
            name="shapes failed",
            vertices=[JobVertex(id="f", name="Fail", invokable="fail", config={"message": "shape of a failure"})],
        )
        failed = client.submit(failing)
        assert client.wait(finished, timeout=60) is JobStatus.FINISHED
        assert client.wait(failed, timeout=60) is JobStatus.FAILED
        running = client.submit(sleep_job(120, name="shapes running"))
        yield {"finished": finished, "failed": failed, "running": running}
        client.cancel(running)
        client.wait(running, timeout=30)


@pytest.fixture(scope="module")
def rest(minicluster: MiniCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=minicluster.rest_url + "/v1", timeout=30) as client:
        yield client


def get(rest: httpx.Client, path: str) -> Any:
    answer = rest.get(path)
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def test_cluster_answers(rest: httpx.Client) -> None:
    assert_flink_shape(get(rest, "/overview"), "overview")
    assert_flink_shape(get(rest, "/config"), "config")
    assert_flink_shape(get(rest, "/jobmanager/config"), "jobmanager_config")
    assert_flink_shape(get(rest, "/jobs"), "jobs")


def test_taskmanagers(rest: httpx.Client, jobs: dict[str, str]) -> None:
    taskmanagers = get(rest, "/taskmanagers")
    assert_flink_shape(taskmanagers, "taskmanagers")
    first = taskmanagers["taskmanagers"][0]
    assert first["totalResource"]["cpuCores"] > 0 and first["hardware"]["physicalMemory"] > 0
    assert first["memoryConfiguration"]["taskHeap"] == 2**30  # the Spark JVM's default 1g heap
    assert sum(tm["assignedTasks"] for tm in taskmanagers["taskmanagers"]) >= 1  # the running sleeper
    one = get(rest, f"/taskmanagers/{first['id']}")
    assert_flink_shape(one, "taskmanager")
    holding = [get(rest, f"/taskmanagers/{tm['id']}") for tm in taskmanagers["taskmanagers"]]
    assert any(slot["jobId"] == jobs["running"] for tm in holding for slot in tm["allocatedSlots"])


def test_jobs_overview_has_every_field_flinks_list_reads(rest: httpx.Client, jobs: dict[str, str]) -> None:
    overview = get(rest, "/jobs/overview")
    assert_flink_shape(overview, "jobs_overview")
    mine = {job["jid"]: job for job in overview["jobs"]}
    assert mine[jobs["finished"]]["jobType"] == "BATCH"
    assert mine[jobs["finished"]]["tasks"]["finished"] == mine[jobs["finished"]]["tasks"]["total"] == 5
    assert mine[jobs["running"]]["pending-operators"] == 0


@pytest.mark.parametrize("which", ["finished", "failed", "running"])
def test_job_details_status_and_execution_result(rest: httpx.Client, jobs: dict[str, str], which: str) -> None:
    job_id = jobs[which]
    details = get(rest, f"/jobs/{job_id}")
    assert_flink_shape(details, f"job_{which}")
    assert details["timestamps"]["RECONCILING"] == 0 and details["schedulerType"] == "Default"
    status = get(rest, f"/jobs/{job_id}/status")
    assert_flink_shape(status, f"job_{which}_status")
    assert status["status"] == details["state"]
    result = get(rest, f"/jobs/{job_id}/execution-result")
    assert_flink_shape(result, f"job_{which}_execution_result")
    if which == "finished":
        metrics = {vertex["id"]: vertex["metrics"] for vertex in details["vertices"]}
        assert metrics["src"]["write-records"] == metrics["sum"]["read-records"] == 1000
        assert metrics["sum"]["write-records"] == metrics["sink"]["read-records"] == 3
        assert metrics["sink"]["write-bytes"] > 0 and metrics["sink"]["write-records-complete"] is True
    plan = get(rest, f"/jobs/{job_id}/plan")["plan"]
    assert plan["jid"] == job_id and plan == details["plan"]
    if which == "running":
        assert result == {"status": {"id": "IN_PROGRESS"}}
    else:
        outcome = result["job-execution-result"]
        assert outcome["application-status"] == {"finished": "SUCCEEDED", "failed": "FAILED"}[which]
        assert outcome["net-runtime"] == details["duration"]
    if which == "failed":
        assert "shape of a failure" in result["job-execution-result"]["failure-cause"]["stack-trace"]


def test_exceptions_are_flink_2s_history(rest: httpx.Client, jobs: dict[str, str]) -> None:
    failed = get(rest, f"/jobs/{jobs['failed']}/exceptions")
    assert_flink_shape(failed, "job_failed_exceptions")
    entry = failed["exceptionHistory"]["entries"][0]
    assert entry["failureLabels"] == {} and entry["endpoint"] and "shape of a failure" in entry["stacktrace"]
    assert_flink_shape(get(rest, f"/jobs/{jobs['finished']}/exceptions"), "job_finished_exceptions")
    one = get(rest, f"/jobs/{jobs['failed']}/exceptions?maxExceptions=1")
    assert len(one["exceptionHistory"]["entries"]) == 1


def test_accumulators_list_records_bytes_and_splits(rest: httpx.Client, jobs: dict[str, str]) -> None:
    accumulators = get(rest, f"/jobs/{jobs['finished']}/accumulators")
    assert_flink_shape(accumulators, "job_finished_accumulators")
    values = {a["name"]: a["value"] for a in accumulators["user-task-accumulators"]}
    assert values["Numbers.splits.total"] == "5" and int(values["Numbers.splits.assignments"]) >= 5
    assert values["Sum.numRecordsIn"] == "1000" and int(values["Sink.numBytesOut"]) > 0


def test_vertex_subtasks(rest: httpx.Client, jobs: dict[str, str]) -> None:
    vertex = get(rest, f"/jobs/{jobs['running']}/vertices/zzz")
    assert_flink_shape(vertex, "job_running_vertex")
    assert set(vertex["subtasks"][0]["status-duration"]) >= {"CREATED", "RUNNING"}


def test_unknown_job_is_a_json_404(rest: httpx.Client) -> None:
    for path in ("", "/status", "/execution-result"):
        answer = rest.get(f"/jobs/{'0' * 32}{path}")
        assert answer.status_code == 404
        assert "not found" in answer.json()["errors"][0]


def test_archived_overview_is_rebuilt_with_task_counts() -> None:
    from flink_runtime.jobmanager.archived_jobs import from_archive
    from flink_runtime.rest.job_views import job_overview

    details = recorded("job_finished")  # what the job store held of a job before it archived records
    overview = job_overview(from_archive(details, None)[0].summary())
    assert overview["tasks"]["finished"] == 2 and overview["tasks"]["total"] == 2
    assert overview["jobType"] == "BATCH" and overview["state"] == "FINISHED"
    assert_flink_shape({"jobs": [overview]}, "jobs_overview")


def test_job_config_is_flinks_job_config_info(rest: httpx.Client, minicluster: MiniCluster) -> None:
    graph = sleep_job(0, name="shapes config")
    graph.config.update({"restart-strategy.type": "fixed-delay", "s3.secret-key": "hunter2", "my.setting": "1"})
    with JobClient(minicluster.rest_url, timeout=30) as client:
        job_id = client.submit(graph)
        client.wait(job_id, timeout=60)
    config = get(rest, f"/jobs/{job_id}/config")
    assert config["jid"] == job_id and config["name"] == "shapes config"
    execution = config["execution-config"]
    assert execution["job-parallelism"] == 1 and execution["object-reuse-mode"] is False
    assert "fixed" in execution["restart-strategy"].lower()
    assert execution["user-config"]["my.setting"] == "1" and "hunter2" not in str(execution["user-config"])
    assert rest.get("/jobs/00000000000000000000000000000000/config").status_code == 404
