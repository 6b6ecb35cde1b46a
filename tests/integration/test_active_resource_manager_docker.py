"""The docker driver end to end (issue 25 item 2), against a real dockerd: a JobManager
with no TaskManager runs a job needing 3 slots of 1 core through TaskManager containers
of the project's image, started through the Docker Engine API; they go away when idle;
one killed mid-job (SIGKILL to the container) is replaced and the output is still exact;
a job needing more than resourcemanager.max-taskmanagers allow fails with the numbers;
no container is left once the JobManager stopped.

Needs what `make test-docker` sets up: a running dockerd (scripts/ensure-docker.sh), the
image flink-runtime:0.1.0 (scripts/docker-build.sh) and the `docker` Python package (the
`docker` extra). Marked `docker`: `make test` leaves it out (an image build takes
minutes); run alone without them, it fails saying which is missing. The containers use
the host's network (the JobManager's loopback RPC) and see the test's folder at the
same path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.executiongraph.states import JobStatus
from tests.helpers.waiting import eventually
from tests.integration.test_active_resource_manager import PROPERTIES, assert_exact_output, registered, three_slot_job

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = "flink-runtime:0.1.0"
LABEL_CLUSTER = "org.flink-runtime.cluster-id"
LABEL_WORKER = "org.flink-runtime.worker-id"
# Fixed: a JobManager of this cluster id removes what a killed earlier run left behind.
CLUSTER_ID = "docker-driver-test"
LABELLED = {"label": f"{LABEL_CLUSTER}={CLUSTER_ID}"}


def docker_client() -> Any:
    # docker.errors, not docker: the repository's docker/ folder imports as an empty
    # namespace package when the real one is not installed.
    try:
        import docker.errors as errors

        import docker
    except ImportError:
        pytest.fail(
            "the docker Python package is not installed: make test-docker installs it "
            "(or: uv pip install --python .venv/bin/python docker)"
        )

    try:
        client = docker.from_env()
        client.ping()
    except errors.DockerException as exc:
        pytest.fail(f"no Docker engine answers ({exc}); start one with scripts/ensure-docker.sh or make test-docker")
    try:
        client.images.get(IMAGE)
    except errors.ImageNotFound:
        pytest.fail(f"image {IMAGE} missing; build it with scripts/docker-build.sh or make test-docker")
    return client


@pytest.fixture(scope="module")
def engine() -> Any:
    return docker_client()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """io.tmp.dirs and the sinks' folder, mounted into every container at the same path."""
    folder = tmp_path_factory.mktemp("docker-shared")
    folder.chmod(0o777)  # the image runs as uid 50000
    return folder


@pytest.fixture(scope="module")
def cluster(engine: Any, shared: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    properties = {
        **PROPERTIES,
        "resourcemanager.driver": "docker",
        "resourcemanager.docker.image": IMAGE,
        "resourcemanager.docker.volumes": f"{shared}:{shared}",
        "resourcemanager.max-taskmanagers": 3,
        "high-availability.cluster-id": CLUSTER_ID,
        "io.tmp.dirs": str(shared / "data"),
        # A container's first start is slower than a process's (and the machine is shared).
        "resourcemanager.taskmanager-registration.timeout": "3 min",
    }
    try:
        with StandaloneCluster(tmp_path_factory.mktemp("docker-rm"), properties=properties) as started:
            started.start_jobmanager()
            yield started
        # The JobManager stopped (SIGTERM): it removed every container it started.
        left = [container.name for container in engine.containers.list(all=True, filters=LABELLED, ignore_removed=True)]
        assert left == [], f"containers left after the JobManager stopped: {left}"
    finally:
        for container in engine.containers.list(all=True, filters=LABELLED, ignore_removed=True):
            container.remove(force=True)


def containers(engine: Any) -> dict[str, Any]:
    """This cluster's TaskManager containers, by worker id."""
    return {c.labels[LABEL_WORKER]: c for c in engine.containers.list(all=True, filters=LABELLED, ignore_removed=True)}


@pytest.mark.timeout(420)
def test_an_empty_cluster_runs_a_three_slot_job_in_taskmanager_containers_and_removes_them_idle(
    cluster: StandaloneCluster, engine: Any, shared: Path
) -> None:
    assert cluster.jobmanager is not None
    assert registered(cluster) == set() and containers(engine) == {}
    out = shared / "first"
    with JobClient(cluster.rest_url, timeout=60) as client:
        submitted = time.monotonic()
        job_id = client.submit(three_slot_job(out))
        first_registered = None
        while first_registered is None:
            if registered(cluster):
                first_registered = time.monotonic() - submitted
            assert time.monotonic() - submitted < 240, "no TaskManager container registered within 240 s"
            time.sleep(0.05)
        running = containers(engine)
        assert client.wait(job_id, timeout=300) is JobStatus.FINISHED
        finished = time.monotonic() - submitted
        assert client.exceptions(job_id)["exceptionHistory"]["entries"] == []
    assert_exact_output(out)
    log = cluster.jobmanager.log()
    started = log.count("as container ")
    print(
        f"\ndocker driver, start on demand: first TaskManager container registered {first_registered:.1f} s "
        f"after the submission, job FINISHED after {finished:.1f} s; {started} containers started"
    )
    assert started == 3 and "Starting TaskManager tm-active-4" not in log, log[-3000:]
    # Containers of the image, labelled with the cluster and the worker, sized by the
    # slot sharing group's profile (source + sum: 2 cores for the one slot).
    assert set(running) <= {"tm-active-1", "tm-active-2", "tm-active-3"} and running
    attrs = next(iter(running.values())).attrs
    assert attrs["Config"]["Image"] == IMAGE
    assert attrs["HostConfig"]["NanoCpus"] == min(2, engine.info()["NCPU"]) * 1_000_000_000
    assert "Starting TaskManager tm-active-3 (1 slots, 2 cores)" in log

    # Idle for resourcemanager.taskmanager-timeout (3 s): unregistered, containers removed.
    idle = time.monotonic()
    eventually(lambda: registered(cluster) == set(), timeout=60, what="the idle TaskManager containers unregistered")
    eventually(lambda: containers(engine) == {}, timeout=60, what="the idle TaskManager containers removed")
    print(f"docker driver: the 3 idle containers were removed {time.monotonic() - idle:.1f} s after the job ended")
    assert "Stopping TaskManager tm-active-1: idle for" in cluster.jobmanager.log()


@pytest.mark.timeout(420)
def test_a_taskmanager_container_killed_mid_job_is_replaced_and_the_output_is_exact(
    cluster: StandaloneCluster, engine: Any, shared: Path
) -> None:
    assert cluster.jobmanager is not None
    out = shared / "killed"
    with JobClient(cluster.rest_url, timeout=60) as client:
        # 12 splits of 1 s over 3 subtasks: about 4 s of source work to kill into.
        job_id = client.submit(three_slot_job(out, seconds_per_split=1.0, name="killed"))
        eventually(lambda: len(registered(cluster)) == 3, timeout=240, what="three TaskManager containers registered")
        victim_id, victim = sorted(containers(engine).items())[0]
        starts_before = cluster.jobmanager.log().count("Starting TaskManager")
        assert client.status(job_id) is JobStatus.RUNNING
        victim.kill()  # SIGKILL to the TaskManager, the container's first process
        assert client.wait(job_id, timeout=300) is JobStatus.FINISHED
        history = client.exceptions(job_id)["exceptionHistory"]["entries"]
    assert_exact_output(out)
    # The kill hit the job: its tasks on the victim failed, with the driver's reason.
    assert victim_id in json.dumps(history), history
    log = cluster.jobmanager.log()
    assert f"TaskManager {victim_id} ended unexpectedly: container {victim.short_id} exited with status 137" in log
    # A replacement container was started for the restarted tasks' slot requests.
    assert log.count("Starting TaskManager") > starts_before, log[-3000:]
    assert victim_id not in registered(cluster) and victim_id not in containers(engine)


@pytest.mark.timeout(120)
def test_a_job_needing_more_slots_than_max_taskmanagers_allow_fails_with_the_numbers(
    cluster: StandaloneCluster, shared: Path
) -> None:
    assert cluster.jobmanager is not None
    graph = three_slot_job(shared / "too-big")
    graph.config = {"restart-strategy.type": "none"}
    for vertex in graph.vertices:
        if vertex.id in ("src", "sum"):
            vertex.parallelism = 4
    starts_before = cluster.jobmanager.log().count("Starting TaskManager")
    with JobClient(cluster.rest_url, timeout=60) as client:
        job_id = client.submit(graph)
        assert client.wait(job_id, timeout=60) is JobStatus.FAILED
        root = client.exceptions(job_id)["root-exception"]
    assert "needs 4 slots at once" in root, root
    assert "at most 3 (resourcemanager.max-taskmanagers 3 x taskmanager.numberOfTaskSlots 1)" in root, root
    # It failed at once, without starting containers it could not use all of.
    assert cluster.jobmanager.log().count("Starting TaskManager") == starts_before
