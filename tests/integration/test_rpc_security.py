"""Forged RPC against a real cluster with a cluster secret (issue 9): a raw ZeroMQ peer
that never registered sends the project's own messages to the JobManager and to a
TaskManager. Nothing it sends changes any state."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import msgspec
import pytest
import zmq

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.rpc.messages import (
    PROTOCOL_VERSION,
    CancelJob,
    DisconnectTaskManager,
    ReleasePartitions,
    UpdateTaskExecutionState,
)
from flink_runtime.rpc.service import TELL, Envelope
from flink_runtime.security.rpc_keys import curve_keys, make_client
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

SECRET = "rpc-forgery-secret"


def forge(address: str, messages: list, secret: str | None) -> None:
    """Send `messages` as tells from a fresh DEALER (CURVE keys of `secret`, or none)."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    keys = curve_keys(secret) if secret else None
    if keys is not None:
        make_client(dealer, keys)
    dealer.connect(address)
    try:
        for message in messages:
            dealer.send(msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, TELL, 0, message)), zmq.NOBLOCK)
        time.sleep(1.0)
    finally:
        dealer.close()


@pytest.mark.parametrize("forger_secret", [None, "a-guess"], ids=["no-credentials", "wrong-secret"])
def test_forged_messages_change_nothing(tmp_path: Path, forger_secret: str | None) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.txt").write_text("keep me")
    properties = {"security.cluster.secret": SECRET, "heartbeat.interval": "500 ms", "heartbeat.timeout": "5 s"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(sleep_job(120, name="target"))
            deadline = time.monotonic() + 30
            while client.status(job_id).value != "RUNNING" and time.monotonic() < deadline:
                time.sleep(0.1)
            details = client.details(job_id)
            vertex = details["vertices"][0]["id"]
            subtasks = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/{vertex}").json()
            execution_id = subtasks["subtasks"][0]["attempt-id"]
            (taskmanager,) = client.taskmanagers()

            assert cluster.jobmanager is not None
            forge(
                cluster.jobmanager.rpc_address,
                [
                    UpdateTaskExecutionState(
                        jobmanager_id="",
                        job_id=job_id,
                        execution_id=execution_id,
                        state="FAILED",
                        error="made-up exception",
                    ),
                    CancelJob(job_id=job_id),
                    DisconnectTaskManager(task_manager_id=taskmanager["id"], reason="forged"),
                ],
                forger_secret,
            )
            forge(
                cluster.taskmanagers[0].rpc_address,
                [ReleasePartitions(job_id=str(outside)), ReleasePartitions(job_id="x", data_namespace="/")],
                forger_secret,
            )

            assert client.status(job_id).value == "RUNNING"
            assert [tm["id"] for tm in client.taskmanagers()] == [taskmanager["id"]]
            assert client.exceptions(job_id)["exceptionHistory"]["entries"] == []
            assert (outside / "data.txt").read_text() == "keep me"
            client.cancel(job_id)
            assert client.wait(job_id, timeout=30).value == "CANCELED"
