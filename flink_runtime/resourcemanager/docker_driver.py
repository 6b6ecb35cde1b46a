"""The docker driver: TaskManagers as containers of the project's image (docker/Dockerfile),
started through the Docker Engine API with the `docker` Python package
(`pip install 'flink-runtime[docker]'`).

Each container runs `flink-runtime taskmanager` with the same -D options and
FLINK_PROPERTIES as a process of the process driver, on `resourcemanager.docker.network`
(host by default: it reaches the JobManager at the address this host does), limited to
the worker's cores (NanoCpus) and, when its slots name a heap, that much memory plus a
fixed overhead for the Python process and Spark's JVM. Containers carry labels naming
the JobManager that started them and their worker id, so a JobManager stopping removes
exactly its own; one killed with SIGKILL cannot, and the next start of a JobManager with
the same cluster id removes what its predecessor left (Kubernetes does this with owner
references: docs/resource-management.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.resourcemanager.driver import STOP_GRACE_SECONDS, WorkerLaunch

log = logging.getLogger(__name__)

LABEL_CLUSTER = "org.flink-runtime.cluster-id"
LABEL_WORKER = "org.flink-runtime.worker-id"
# Memory a container gets beyond its slots' heap: the Python process and Spark's JVM.
MEMORY_OVERHEAD_MB = 1024
# Keys naming a folder of the JobManager's host that a container does not have: the
# JobManager's log folder (a container's TaskManager logs into its own file system, and
# to its stdout, which `docker logs` and this driver's warning on an unexpected exit show;
# its REST /taskmanagers/:id/logs works as for any TaskManager). Folders it must share
# (io.tmp.dirs, sink paths) are mounted at the same path: resourcemanager.docker.volumes.
HOST_ONLY_KEYS = frozenset({cfg.LOG_DIR.key})


def docker_engine() -> tuple[Any, type[Exception], type[Exception]]:
    """A client of the local Docker Engine (DOCKER_HOST or the default socket) and the
    package's NotFound and APIError; ImportError without the docker package."""
    from docker import errors, from_env  # type: ignore[import-not-found]

    return from_env(), errors.NotFound, errors.APIError


class DockerDriver:
    def __init__(
        self, config: Configuration, engine: tuple[Any, type[Exception], type[Exception]] | None = None
    ) -> None:
        """engine: (client, NotFound, APIError), by default `docker_engine()`."""
        self.client, self._not_found, self._api_error = engine or docker_engine()
        self.image = config.get(cfg.ResourceManagerOptions.DOCKER_IMAGE)
        self.network = config.get(cfg.ResourceManagerOptions.DOCKER_NETWORK)
        self.volumes = _volumes(config.get(cfg.ResourceManagerOptions.DOCKER_VOLUMES))
        self.cluster_id = config.get(cfg.HA_CLUSTER_ID).strip("/") or "default"
        self._containers: dict[str, Any] = {}
        self._stopping: set[str] = set()
        # The engine refuses a container more cores than its machine has ("Range of CPUs
        # is from 0.01 to N"): a worker sized above that gets the whole machine instead.
        self.host_cpus = float(self.client.info().get("NCPU") or 0) or None
        self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """Containers an earlier JobManager of this cluster started and could not stop."""
        # ignore_removed: one removed between the engine's list and its inspection is no error.
        labelled = {"label": f"{LABEL_CLUSTER}={self.cluster_id}"}
        for container in self.client.containers.list(all=True, filters=labelled, ignore_removed=True):
            log.warning("Removing TaskManager container %s left by an earlier JobManager", container.name)
            with contextlib.suppress(self._api_error):
                container.remove(force=True)

    def start_worker(self, launch: WorkerLaunch) -> None:
        properties = {key: value for key, value in launch.properties.items() if key not in HOST_ONLY_KEYS}
        launch = dataclasses.replace(launch, properties=properties)
        memory_mb = launch.spec.task_heap_memory_mb
        container = self.client.containers.run(
            self.image,
            command=launch.arguments(),
            name=f"flink-runtime-{self.cluster_id}-{launch.worker_id}",
            detach=True,
            network_mode=self.network,
            environment={"FLINK_PROPERTIES": launch.flink_properties(), "PYTHONUNBUFFERED": "1"},
            labels={LABEL_CLUSTER: self.cluster_id, LABEL_WORKER: launch.worker_id},
            nano_cpus=int(self._cpu_limit(launch) * 1e9),
            mem_limit=f"{memory_mb + MEMORY_OVERHEAD_MB}m" if memory_mb else None,
            volumes=self.volumes,
        )
        self._containers[launch.worker_id] = container
        log.info("Started TaskManager %s as container %s", launch.worker_id, container.short_id)

    def _cpu_limit(self, launch: WorkerLaunch) -> float:
        cores = launch.spec.cpu_cores
        if self.host_cpus is not None and cores > self.host_cpus:
            log.info(
                "TaskManager %s is sized for %g cores; the Docker host has %g: it may use all of them",
                launch.worker_id,
                cores,
                self.host_cpus,
            )
            return self.host_cpus
        return cores

    def stop_worker(self, worker_id: str) -> None:
        container = self._containers.get(worker_id)
        if container is None:
            return
        self._stopping.add(worker_id)
        with contextlib.suppress(self._not_found):
            container.stop(timeout=int(STOP_GRACE_SECONDS))

    def terminated_workers(self) -> list[tuple[str, str]]:
        ended: list[tuple[str, str]] = []
        for worker_id, container in list(self._containers.items()):
            try:
                container.reload()
                state = container.attrs["State"]
            except self._not_found:
                state = {"Status": "removed", "ExitCode": -1}
            if state["Status"] not in ("exited", "dead", "removed"):
                continue
            del self._containers[worker_id]
            reason = f"container {container.short_id} {state['Status']} with status {state.get('ExitCode')}"
            if state.get("OOMKilled"):
                reason += " (killed: out of memory)"
            if worker_id not in self._stopping:
                # What it printed is gone with the container: keep its last lines in our log.
                log.warning(
                    "TaskManager %s's container %s ended; its last output:\n%s",
                    worker_id,
                    container.short_id,
                    self._tail(container),
                )
            self._stopping.discard(worker_id)
            with contextlib.suppress(self._api_error):
                container.remove(force=True)
            ended.append((worker_id, reason))
        return ended

    def _tail(self, container: Any, lines: int = 30) -> str:
        try:
            output: bytes = container.logs(tail=lines)
        except self._api_error as exc:
            return f"(its log could not be read: {exc})"
        return output.decode(errors="replace").rstrip() or "(nothing)"

    def stop_all(self) -> None:
        for container in self._containers.values():
            with contextlib.suppress(self._api_error):
                container.remove(force=True)
        self._containers.clear()


def _volumes(entries: list[str]) -> dict[str, dict[str, str]]:
    """host:container entries as the Engine API's binds (read-write)."""
    volumes: dict[str, dict[str, str]] = {}
    for entry in entries:
        host, sep, container = entry.partition(":")
        if not sep or not host.startswith("/") or not container.startswith("/"):
            raise ConfigurationError(
                f"resourcemanager.docker.volumes: {entry!r} is not host-path:container-path (two absolute paths)"
            )
        volumes[host] = {"bind": container, "mode": "rw"}
    return volumes
