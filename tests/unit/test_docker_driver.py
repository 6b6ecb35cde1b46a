"""The docker driver against a fake Docker Engine client (the Engine API layer faked; the
real engine is tests/integration/test_active_resource_manager_docker.py's)."""

from __future__ import annotations

from typing import Any

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.resourcemanager.active import create_driver
from flink_runtime.resourcemanager.docker_driver import LABEL_CLUSTER, LABEL_WORKER, DockerDriver
from flink_runtime.resourcemanager.driver import WorkerLaunch
from flink_runtime.resourcemanager.policy import WorkerSpec


class NotFound(Exception):
    pass


class APIError(Exception):
    pass


class FakeContainer:
    def __init__(self, name: str, labels: dict[str, str]) -> None:
        self.name, self.labels = name, labels
        self.short_id = name[-6:]
        self.attrs: dict[str, Any] = {"State": {"Status": "running", "ExitCode": 0}}
        self.removed = False
        self.stopped_with: int | None = None

    def reload(self) -> None:
        if self.removed:
            raise NotFound(self.name)

    def stop(self, timeout: int) -> None:
        self.stopped_with = timeout
        self.attrs["State"] = {"Status": "exited", "ExitCode": 0}

    def remove(self, force: bool = False) -> None:
        self.removed = True

    def logs(self, tail: int) -> bytes:
        return b"error: configuration: something was wrong\n"


class FakeContainers:
    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        self.all: list[FakeContainer] = []

    def run(self, image: str, **options: Any) -> FakeContainer:
        self.runs.append({"image": image, **options})
        container = FakeContainer(options["name"], options["labels"])
        self.all.append(container)
        return container

    def list(self, all: bool, filters: dict[str, str], ignore_removed: bool = False) -> list[FakeContainer]:  # noqa: A002 - the API's name
        key, _, value = filters["label"].partition("=")
        return [c for c in self.all if not c.removed and c.labels.get(key) == value]


class FakeClient:
    def __init__(self, cpus: int = 8) -> None:
        self.containers = FakeContainers()
        self.cpus = cpus

    def info(self) -> dict[str, Any]:
        return {"NCPU": self.cpus}


def driver(client: FakeClient, **config: str) -> DockerDriver:
    return DockerDriver(Configuration({"high-availability.cluster-id": "c1", **config}), (client, NotFound, APIError))


def launch(worker_id: str, heap: int = 0) -> WorkerLaunch:
    return WorkerLaunch(
        worker_id,
        WorkerSpec(2, 2.0, heap),
        "127.0.0.1",
        6123,
        {"security.cluster.secret": "s", "a.b": 1, "env.log.dir": "/jobmanager/host/log"},
    )


def test_a_worker_is_a_container_of_the_image_with_its_options_size_and_labels() -> None:
    client = FakeClient()
    docker = driver(client, **{"resourcemanager.docker.volumes": "/data:/data"})
    docker.start_worker(launch("tm-active-1", heap=512))
    (run,) = client.containers.runs
    assert run["image"] == "flink-runtime:0.1.0" and run["network_mode"] == "host"
    assert run["command"][0] == "taskmanager"
    assert "taskmanager.resource-id=tm-active-1" in run["command"]
    assert "jobmanager.rpc.port=6123" in run["command"] and "taskmanager.numberOfTaskSlots=2" in run["command"]
    # The secret travels in the environment, never on the command line.
    assert not any("secret" in part for part in run["command"])
    assert "security.cluster.secret: s" in run["environment"]["FLINK_PROPERTIES"]
    # The JobManager host's log folder does not exist in a container: it logs into its own.
    assert "env.log.dir" not in run["environment"]["FLINK_PROPERTIES"]
    assert run["labels"] == {LABEL_CLUSTER: "c1", LABEL_WORKER: "tm-active-1"}
    assert run["nano_cpus"] == 2_000_000_000 and run["mem_limit"] == "1536m"
    assert run["volumes"] == {"/data": {"bind": "/data", "mode": "rw"}}


def test_a_worker_sized_above_the_docker_hosts_cores_gets_all_of_them() -> None:
    client = FakeClient(cpus=1)
    driver(client).start_worker(launch("tm-active-1"))
    assert client.containers.runs[0]["nano_cpus"] == 1_000_000_000


def test_a_container_that_exited_is_reported_once_and_removed(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient()
    docker = driver(client)
    docker.start_worker(launch("tm-active-1"))
    docker.start_worker(launch("tm-active-2"))
    assert docker.terminated_workers() == []
    crashed = client.containers.all[0]
    crashed.attrs["State"] = {"Status": "exited", "ExitCode": 137, "OOMKilled": True}
    ((worker, reason),) = docker.terminated_workers()
    assert worker == "tm-active-1" and "exited with status 137 (killed: out of memory)" in reason
    assert crashed.removed and docker.terminated_workers() == []
    # What it printed goes with the container: its last lines are in the JobManager's log.
    assert "tm-active-1's container" in caplog.text and "something was wrong" in caplog.text
    docker.stop_worker("tm-active-2")
    assert client.containers.all[1].stopped_with == 10
    assert [w for w, _ in docker.terminated_workers()] == ["tm-active-2"]


def test_containers_an_earlier_jobmanager_left_are_removed_at_start_and_all_at_stop() -> None:
    client = FakeClient()
    left = client.containers.run("img", name="old", labels={LABEL_CLUSTER: "c1", LABEL_WORKER: "tm-active-1"})
    other = client.containers.run("img", name="other", labels={LABEL_CLUSTER: "c2", LABEL_WORKER: "tm-active-1"})
    docker = driver(client)
    assert left.removed and not other.removed
    docker.start_worker(launch("tm-active-1"))
    docker.stop_all()
    assert client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}=c1"}) == []


def test_a_malformed_volume_is_refused_with_the_entry() -> None:
    with pytest.raises(ConfigurationError, match="'data:/data' is not host-path:container-path"):
        driver(FakeClient(), **{"resourcemanager.docker.volumes": "data:/data"})


def test_the_docker_driver_without_the_docker_package_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> None:
        raise ImportError("No module named 'docker'")

    monkeypatch.setattr("flink_runtime.resourcemanager.active.docker_engine", missing)
    with pytest.raises(ConfigurationError, match=r"docker needs the docker Python package .*flink-runtime\[docker\]"):
        create_driver(Configuration({"resourcemanager.driver": "docker"}))
