"""What an ``embedded`` Airflow connection controls: the connection
form offers every option the hook reads, the TaskManagers' RPC ports, where checkpoints
go (the state dir, not /tmp), and the UI's "Test" button, which checks and never starts."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.airflow.embedded import STATE_FILE, stop_embedded_cluster
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.xdist_group("airflow-db")  # one worker makes the in-process metadata DB (make test: -n 2)

CONN_ID = "flink_runtime_embedded_test"
# Every extra cluster_settings / embedded_options read (hooks/connection.py).
EXTRAS_THE_HOOK_READS = {
    "https",
    "verify_tls",
    "timeout",
    "embedded",
    "taskmanagers",
    "slots",
    "state_dir",
    "embedded_idle_timeout",
    "taskmanager_rpc_port",
}


def free_ports(count: int) -> list[int]:
    """``count`` consecutive free ports (the TaskManagers take port + i)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            sockets = [socket.socket() for _ in range(count)]
            for offset, sock in enumerate(sockets):
                sock.bind(("127.0.0.1", first + offset))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return list(range(first, first + count))
    raise AssertionError("no run of free ports")


def test_the_connection_form_offers_every_option_the_hook_reads() -> None:
    from airflow.providers_manager import ProvidersManager

    widgets = ProvidersManager().connection_form_widgets
    ours = {
        name.removeprefix("extra__flink_runtime__") for name in widgets if name.startswith("extra__flink_runtime__")
    }
    assert ours == EXTRAS_THE_HOOK_READS
    idle = widgets["extra__flink_runtime__embedded_idle_timeout"].field
    assert idle["value"] == 3600 and idle["schema"]["minimum"] == 0


@pytest.fixture
def embedded_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    state_dir = tmp_path / "embedded"

    def define(**extra: Any) -> str:
        fields = {"conn_type": "flink_runtime", "host": "embedded", "port": free_ports(1)[0]}
        fields["extra"] = {"state_dir": str(state_dir), "embedded_idle_timeout": 0, **extra}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(fields))
        return str(state_dir)

    yield define
    stop_embedded_cluster(state_dir)


def test_a_bad_taskmanager_port_is_named(embedded_connection: Callable[..., str]) -> None:
    embedded_connection(taskmanagers=2, taskmanager_rpc_port=65535)
    ok, message = FlinkRuntimeHook(CONN_ID).test_connection()
    assert not ok
    assert "taskmanager_rpc_port must leave a port for each of the 2 TaskManagers" in message, message


@pytest.mark.integration
def test_test_button_checks_without_starting_then_ports_and_checkpoints_follow_the_connection(
    embedded_connection: Callable[..., str], airflow_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    tm_ports = free_ports(2)
    state_dir = Path(embedded_connection(taskmanagers=2, slots=1, taskmanager_rpc_port=tm_ports[0]))
    monkeypatch.setenv("AIRFLOW__CORE__TEST_CONNECTION", "Enabled")
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "s" * 64)
    airflow_api = TestClient(create_app())
    admin = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="someone", role="admin"))

    def test_button() -> dict[str, Any]:
        answer = airflow_api.post(
            "/api/v2/connections/test",
            json={"connection_id": CONN_ID, "conn_type": "flink_runtime"},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    # The API server checks the connection but is no host for the workers' cluster.
    result = test_button()
    assert result["status"] is True, result
    assert "first task that uses it starts a cluster of 2 TaskManagers x 1 slots" in result["message"]
    assert not (state_dir / STATE_FILE).exists()

    with FlinkRuntimeHook(CONN_ID) as hook:
        rest_url = hook.rest_url  # a task's first use starts it
        result = test_button()
        assert result["status"] is True and f"runs at {rest_url}" in result["message"], result

        addresses = sorted(tm["path"] for tm in httpx.get(f"{rest_url}/taskmanagers").json()["taskmanagers"])
        assert [int(address.rsplit(":", 1)[1]) for address in addresses] == tm_ports, addresses

        # A checkpoint lands in the state dir, not in the system temp dir.
        job_id = hook.submit_job(sleep_job(20.0, name="checkpointed"))
        hook.wait_until_running(job_id, 60)
        trigger = httpx.post(f"{rest_url}/jobs/{job_id}/checkpoints", json={"checkpointType": "FULL"})
        assert trigger.status_code == 202, trigger.text
        request_id = trigger.json()["request-id"]
        deadline = time.monotonic() + 60
        while (status := httpx.get(f"{rest_url}/jobs/{job_id}/checkpoints/{request_id}").json())["status"][
            "id"
        ] != "COMPLETED":
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        checkpoint_id = status["operation"]["checkpointId"]
        assert (state_dir / "checkpoints" / job_id / f"chk-{checkpoint_id}" / "_metadata").is_file()
        hook.cancel_job(job_id)
