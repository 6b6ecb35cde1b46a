"""Checkpoints on request through Flink's REST API (POST /jobs/:id/checkpoints), their
status, statistics, details and configuration, on the MiniCluster, in Flink 2.3's shapes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from tests.flink_shapes import assert_flink_shape
from tests.helpers.jobs import sleep_job
from tests.integration.test_savepoints import wait_running

pytestmark = pytest.mark.integration


def poll(url: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (answer := httpx.get(url).json())["status"]["id"] != "COMPLETED":
        assert answer == {"status": {"id": "IN_PROGRESS"}, "operation": None}
        assert time.monotonic() < deadline, f"{url} not COMPLETED after {timeout} s"
        time.sleep(0.1)
    return answer


def test_a_checkpoint_on_request_completes_and_shows_in_the_statistics(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    rest = minicluster.rest_url
    graph = sleep_job(20.0, name="checkpointed on request")
    graph.config.update({"state.checkpoints.dir": str(tmp_path / "chk"), "execution.checkpointing.timeout": "30 s"})
    with JobClient(rest) as client:
        job_id = client.submit(graph)
        wait_running(client, job_id)
        trigger_id = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
        body = {"checkpointType": "FULL", "triggerId": trigger_id}
        first = httpx.post(f"{rest}/v1/jobs/{job_id}/checkpoints", json=body)
        again = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json=body)
        assert (first.status_code, again.status_code) == (202, 202)
        assert first.json() == again.json() == {"request-id": trigger_id}

        status = poll(f"{rest}/jobs/{job_id}/checkpoints/{trigger_id}")
        assert_flink_shape(status, "checkpoint_status_completed")
        checkpoint_id = status["operation"]["checkpointId"]
        assert (tmp_path / "chk" / job_id / f"chk-{checkpoint_id}" / "_metadata").is_file()
        # The same triggerId after completion: still the same request, no new checkpoint.
        after = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json=body)
        assert (after.status_code, after.json()) == (202, {"request-id": trigger_id})

        # Flink's CLI sends CONFIGURED and no triggerId: a new request, a new checkpoint.
        cli = httpx.post(
            f"{rest}/v1/jobs/{job_id}/checkpoints", json={"checkpointType": "CONFIGURED", "triggerId": None}
        )
        assert cli.status_code == 202 and cli.json()["request-id"] != trigger_id
        second = poll(f"{rest}/jobs/{job_id}/checkpoints/{cli.json()['request-id']}")["operation"]["checkpointId"]
        assert second > checkpoint_id

        stats = httpx.get(f"{rest}/jobs/{job_id}/checkpoints").json()
        assert_flink_shape(stats, "job_running_checkpoints")
        assert {checkpoint_id, second} <= {item["id"] for item in stats["history"]}
        assert stats["latest"]["completed"]["id"] == second
        assert stats["counts"]["completed"] >= 2

        details = httpx.get(f"{rest}/jobs/{job_id}/checkpoints/details/{checkpoint_id}")
        assert details.status_code == 200
        assert_flink_shape(details.json(), "job_running_checkpoint_details", keyed_by_id=frozenset({"$.tasks"}))
        assert details.json()["tasks"]["zzz"]["num_subtasks"] == 1
        unknown = httpx.get(f"{rest}/jobs/{job_id}/checkpoints/details/999999")
        assert unknown.status_code == 404 and "999999" in unknown.json()["errors"][0]

        config = httpx.get(f"{rest}/jobs/{job_id}/checkpoints/config").json()
        assert_flink_shape(config, "job_running_checkpoints_config")
        assert config["timeout"] == 30_000

        client.cancel(job_id)
        assert client.wait(job_id, timeout=60).value == "CANCELED"
        refused = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json={})
        assert refused.status_code == 409 and "not RUNNING" in refused.json()["errors"][0]
        # An ended job still answers its statistics and requests.
        assert httpx.get(f"{rest}/jobs/{job_id}/checkpoints").json()["counts"]["completed"] >= 2
        assert httpx.get(f"{rest}/jobs/{job_id}/checkpoints/{trigger_id}").json() == status


def test_malformed_checkpoint_requests_are_400_naming_the_field(minicluster: MiniCluster) -> None:
    rest = minicluster.rest_url
    with JobClient(rest) as client:
        job_id = client.submit(sleep_job(5.0, name="checkpoint refusals"))
        wait_running(client, job_id)
        for body, field in [
            ({"checkpointType": "DIFFERENTIAL"}, "checkpointType"),
            ({"triggerId": "../../etc/passwd"}, "triggerId"),
        ]:
            answer = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json=body)
            assert answer.status_code == 400 and field in answer.json()["errors"][0], answer.text
        unknown = httpx.get(f"{rest}/jobs/{job_id}/checkpoints/{'0' * 32}")
        assert unknown.status_code == 404 and "no checkpoint operation" in unknown.json()["errors"][0]
        client.cancel(job_id)


def test_a_checkpoint_whose_storage_cannot_be_written_is_refused(minicluster: MiniCluster, tmp_path: Path) -> None:
    rest = minicluster.rest_url
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the checkpoints should go")
    graph = sleep_job(5.0, name="no checkpoint storage")
    graph.config["state.checkpoints.dir"] = str(blocked)
    with JobClient(rest) as client:
        job_id = client.submit(graph)
        wait_running(client, job_id)
        answer = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json={})
        assert answer.status_code == 400
        assert "cannot write a checkpoint" in answer.json()["errors"][0]
        client.cancel(job_id)
