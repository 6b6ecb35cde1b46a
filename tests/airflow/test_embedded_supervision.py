"""Supervision escalates by default, in the embedded cluster Airflow
uses: when one of its endpoints fails in a handler of its own, the cluster's process
ends with the reason in its log and exit status 70, and the next task's hook starts a
fresh cluster at the same URL. A process that logged the error and went on would serve
from a state nobody knows.

The seam is what any peer holding the cluster secret can send: a RegisterTaskManager
offering -1 slots, which the JobManager's handler half-applies (the TaskManager is
registered and watched) before the slot pool refuses it with a ValueError."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from flink_runtime.airflow.embedded import LOG_FILE, STATE_FILE, stop_embedded_cluster
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.rpc.messages import RegisterTaskManager
from flink_runtime.rpc.supervision import EXIT_INTERNAL_ERROR
from tests.helpers.forged_rpc import ask

pytestmark = pytest.mark.integration

CONN_ID = "flink_runtime_embedded_supervision"
SECRET = "embedded-supervision-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An embedded connection (1 TaskManager x 1 slot, never idle-stopped) whose cluster
    takes its secret from FLINK_PROPERTIES, as a deployment's environment can give it."""
    directory = tmp_path / "embedded"
    fields = {
        "conn_type": "flink_runtime",
        "host": "embedded",
        "port": free_port(),
        "extra": {"state_dir": str(directory), "taskmanagers": 1, "slots": 1, "embedded_idle_timeout": 0},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(fields))
    properties = os.environ.get("FLINK_PROPERTIES", "")
    monkeypatch.setenv("FLINK_PROPERTIES", f"{properties}\nsecurity.cluster.secret: {SECRET}\n")
    yield directory
    stop_embedded_cluster(directory)


def listening_rpc_ports(pid: int, rest_port: int) -> set[int]:
    connections = psutil.Process(pid).net_connections(kind="tcp")
    return {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN} - {rest_port}


def test_a_failed_endpoint_ends_the_embedded_process_and_the_next_task_starts_a_fresh_one(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FlinkRuntimeHook(CONN_ID) as hook:
        rest_url = hook.rest_url  # a task's first use starts the cluster
    state = json.loads((state_dir / STATE_FILE).read_text())
    pid, port = state["pid"], state["port"]
    log_before = (state_dir / LOG_FILE).stat().st_size

    # A peer with the secret; the JobManager's port among the process's RPC ports (the
    # TaskManager's answers that it does not handle the message, and goes on).
    forged = RegisterTaskManager(
        task_manager_id="forged-tm", address="tcp://127.0.0.1:9", host="127.0.0.1", slots=-1, secret=SECRET
    )
    for rpc_port in listening_rpc_ports(pid, port):
        ask(f"tcp://127.0.0.1:{rpc_port}", forged, SECRET, timeout=2.0)

    # It is this test's child (the hook started it from here): its exit status is ours to read.
    assert psutil.Process(pid).wait(60) == EXIT_INTERNAL_ERROR
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{rest_url}/overview", timeout=2)
    output = (state_dir / LOG_FILE).read_text(errors="replace")[log_before:]
    assert (
        "JobManager (handling RegisterTaskManager) failed and nothing above it can handle it: "
        "ValueError: num_slots must be >= 0, got -1; exiting with code 70"
    ) in output, output[-3000:]
    assert any("exiting with code 70" in path.read_text(errors="replace") for path in (state_dir / "log").iterdir())

    with caplog.at_level(logging.WARNING, "flink_runtime.embedded"), FlinkRuntimeHook(CONN_ID) as hook:
        assert hook.rest_url == rest_url  # the next task: a fresh cluster at the same URL
    # Its log says why the last one ended, where its user looks first.
    assert any(
        record.getMessage().startswith(f"The embedded cluster (pid {pid}) has exited: ")
        and "num_slots must be >= 0, got -1; exiting with code 70" in record.getMessage()
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]
    again = json.loads((state_dir / STATE_FILE).read_text())
    assert again["pid"] != pid
    overview = httpx.get(f"{rest_url}/overview").json()
    assert overview["taskmanagers"] == 1 and overview["slots-total"] == 1  # no forged TaskManager
    assert (state_dir / LOG_FILE).read_text(errors="replace").count(f"MiniCluster ready rest={rest_url}") == 2
