"""FlinkRuntimeHook.latest_checkpoint_path: Flink's `latest.completed.external_path`, or
None when there is none or the job's end deleted it; against the real REST API too."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.airflow.exceptions import FlinkRuntimeJobNotFound
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import sleep_job

JOB_ID = "0123456789abcdef0123456789abcdef"
CONN_ID = "flink_runtime_checkpoints_test"


def hook_answering(monkeypatch: pytest.MonkeyPatch, status: int, body: dict[str, Any]) -> FlinkRuntimeHook:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "flink_runtime", "host": "jm.example.com", "port": 8081}),
    )
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        assert request.url.path == f"/jobs/{JOB_ID}/checkpoints"
        return httpx.Response(status, json=body)

    transport = httpx.MockTransport(answer)
    return FlinkRuntimeHook(CONN_ID, retry_delay=0, transport=transport, async_transport=transport)


def completed(path: str, discarded: bool) -> dict[str, Any]:
    return {"latest": {"completed": {"id": 7, "external_path": path, "discarded": discarded}, "restored": None}}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (completed("/chk/j/chk-7", False), "/chk/j/chk-7"),
        (completed("/chk/j/chk-7", True), None),  # the job's end deleted it
        ({"latest": {"completed": None}}, None),  # no checkpoint completed
        ({"counts": {}}, None),
    ],
)
def test_latest_checkpoint_path_reads_flinks_field(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], expected: str | None
) -> None:
    assert hook_answering(monkeypatch, 200, body).latest_checkpoint_path(JOB_ID) == expected


def test_latest_checkpoint_path_of_an_unknown_job_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = hook_answering(monkeypatch, 404, {"errors": [f"Job {JOB_ID} not found"]})
    with pytest.raises(FlinkRuntimeJobNotFound, match=JOB_ID):
        hook.latest_checkpoint_path(JOB_ID)


@pytest.mark.integration
def test_latest_checkpoint_path_on_a_real_cluster(
    minicluster: MiniCluster, minicluster_conn_id: str, tmp_path: Path
) -> None:
    """Kept while the job runs, gone (None) once a cancel deletes it (the default retention)."""
    graph = sleep_job(30.0, name="checkpointed for the hook")
    graph.config["state.checkpoints.dir"] = str(tmp_path / "chk")
    rest = minicluster.rest_url
    hook = FlinkRuntimeHook(minicluster_conn_id)
    with JobClient(rest) as client:
        job_id = client.submit(graph)
        assert hook.latest_checkpoint_path(job_id) is None
        deadline = time.monotonic() + 30
        while (path := hook.latest_checkpoint_path(job_id)) is None:
            assert time.monotonic() < deadline
            if client.status(job_id).value == "RUNNING" and not client.checkpoints(job_id)["counts"]["in_progress"]:
                httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json={})
            time.sleep(0.2)
        assert Path(path, "_metadata").is_file() and path.startswith(str(tmp_path / "chk" / job_id))
        client.cancel(job_id)
        assert client.wait(job_id, timeout=30).value == "CANCELED"
        deadline = time.monotonic() + 20
        while hook.latest_checkpoint_path(job_id) is not None:
            assert time.monotonic() < deadline, "the cancelled job's checkpoint should be deleted"
            time.sleep(0.05)
    assert not Path(path).exists()
