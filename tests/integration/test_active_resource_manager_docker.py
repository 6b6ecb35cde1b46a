"""The docker driver end to end: a JobManager with no TaskManager runs a job needing 3
slots through TaskManager containers of the project's image, started through the Docker
Engine API, and removes them when idle.

Needs what `make docker-smoke` sets up: a running dockerd (scripts/ensure-docker.sh)
and the image flink-runtime:0.1.0 (built by scripts/docker-smoke.sh), plus the `docker`
Python package (the `docker` extra). Marked `docker`: `make test` leaves it out (the
image build takes minutes), `make test-docker` sets all of that up and runs it; it fails
saying which is missing otherwise. The containers use the host's network (the
JobManager's loopback RPC) and see the test's folder at the same path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.executiongraph.states import JobStatus
from tests.helpers.waiting import eventually
from tests.integration.test_active_resource_manager import PROPERTIES, assert_exact_output, three_slot_job

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = "flink-runtime:0.1.0"
LABEL_CLUSTER = "org.flink-runtime.cluster-id"


def docker_client() -> Any:
    # docker.errors, not docker: the repository's docker/ folder imports as an empty
    # namespace package when the real one is not installed.
    try:
        import docker.errors as errors

        import docker
    except ImportError:
        pytest.fail("the docker Python package is not installed: make test-docker installs the docker extra")

    try:
        client = docker.from_env()
        client.ping()
    except errors.DockerException as exc:
        pytest.fail(f"no Docker engine answers ({exc}); start one with scripts/ensure-docker.sh")
    try:
        client.images.get(IMAGE)
    except errors.ImageNotFound:
        pytest.fail(f"image {IMAGE} missing; build it with make docker-smoke")
    return client


@pytest.mark.timeout(600)
def test_an_empty_cluster_runs_a_three_slot_job_in_taskmanager_containers(tmp_path: Path) -> None:
    client = docker_client()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # the image runs as user 50000
    cluster_id = f"docker-test-{tmp_path.name}"
    properties = {
        **PROPERTIES,
        "resourcemanager.driver": "docker",
        "resourcemanager.docker.image": IMAGE,
        "resourcemanager.docker.volumes": f"{shared}:{shared}",
        "high-availability.cluster-id": cluster_id,
        "io.tmp.dirs": str(shared / "data"),
        # A container's first start is slower than a process's.
        "resourcemanager.taskmanager-registration.timeout": "5 min",
    }
    try:
        with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
            cluster.start_jobmanager()
            with JobClient(cluster.rest_url, timeout=60) as jobs:
                job_id = jobs.submit(three_slot_job(shared / "out"))
                assert jobs.wait(job_id, timeout=400) is JobStatus.FINISHED
            assert_exact_output(shared / "out")
            labelled = {"label": f"{LABEL_CLUSTER}={cluster_id}"}
            assert len(client.containers.list(all=True, filters=labelled)) >= 1

            def no_taskmanager() -> bool:
                answer = httpx.get(f"{cluster.rest_url}/taskmanagers", timeout=5, **cluster.http_options())
                return answer.json()["taskmanagers"] == []

            eventually(no_taskmanager, timeout=60, what="the idle TaskManager containers unregistered")
            eventually(
                lambda: client.containers.list(all=True, filters=labelled) == [],
                timeout=60,
                what="the idle TaskManager containers removed",
            )
            log = cluster.jobmanager.log() if cluster.jobmanager else ""
            assert "Started TaskManager tm-active-1 as container" in log
    finally:
        for container in client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={cluster_id}"}):
            container.remove(force=True)
