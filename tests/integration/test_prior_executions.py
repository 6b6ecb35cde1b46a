"""A restarted subtask keeps its prior attempts (Flink's priorExecutions): REST answers
each attempt, for a running JobManager's job and, from the job store, after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from tests.helpers.jobs import flaky_job

pytestmark = pytest.mark.integration

# Times and durations of an attempt that are measured at answer time ("until now").
GROWING = {"status-duration"}


def attempts(rest_url: str, job_id: str) -> dict[str, Any]:
    subtask = f"{rest_url}/jobs/{job_id}/vertices/flaky/subtasks/0"
    answers = {n: httpx.get(f"{subtask}/attempts/{n}", timeout=10) for n in (0, 1, 2)}
    current = httpx.get(subtask, timeout=10)
    assert [answers[n].status_code for n in (0, 1)] == [200, 200] and current.status_code == 200, answers
    return {
        "failed": {k: v for k, v in answers[0].json().items() if k not in GROWING},
        "current": {k: v for k, v in answers[1].json().items() if k not in GROWING},
        "subtask": current.json(),
        "missing": (answers[2].status_code, answers[2].json()),
    }


def test_a_restarted_subtask_answers_every_attempt_also_after_a_jobmanager_restart(tmp_path: Path) -> None:
    with StandaloneCluster(tmp_path, properties={"jobstore.expiration-time": "1 h"}) as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(flaky_job())
            assert client.wait(job_id, timeout=60).value == "FINISHED"

        live = attempts(cluster.rest_url, job_id)
        failed, current = live["failed"], live["current"]
        assert (failed["subtask"], failed["attempt"], failed["status"]) == (0, 0, "FAILED")
        assert "flaky on purpose" in failed["failure-cause"]
        assert failed["taskmanager-id"] == "tm-0" and failed["endpoint"] and failed["host"]
        assert 0 < failed["start-time"] <= failed["end-time"] <= current["start-time"]
        assert (current["attempt"], current["status"]) == (1, "FINISHED")
        assert live["subtask"]["attempt"] == 1
        assert [prior["attempt"] for prior in live["subtask"]["prior-attempts"]] == [0]
        status, error = live["missing"]
        assert status == 404 and "Attempt 2 not found in subtask 0" in error["errors"][0]
        vertex = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/flaky", timeout=10).json()
        assert [p["status"] for p in vertex["subtasks"][0]["prior-attempts"]] == ["FAILED"]

        # The job store archived the attempts: a new JobManager answers them the same.
        cluster.jobmanager.kill()
        cluster.start_jobmanager()
        archived = attempts(cluster.rest_url, job_id)
        assert archived["failed"] == failed and archived["current"] == current
        assert archived["missing"][0] == 404
        assert [p["attempt"] for p in archived["subtask"]["prior-attempts"]] == [0]
        missing = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/flaky/subtasks/1", timeout=10)
        assert missing.status_code == 404 and "has no subtask 1" in missing.json()["errors"][0]
