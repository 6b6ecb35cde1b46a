"""How workers are started: the ResourceManagerDriver interface and the process driver.

Flink's ResourceManagerDriver (KubernetesResourceManagerDriver, YarnResourceManagerDriver)
requests a worker of a TaskExecutorProcessSpec, releases one, and tells the resource
manager when one terminated. Ours is the same three calls, synchronous: the shell
(active.py) runs them on one thread of its own, never in the JobManager's mailbox.

ProcessDriver starts `flink-runtime taskmanager` processes on this host. Each gets the
JobManager's configuration (through FLINK_PROPERTIES, so the cluster secret and the REST
token are in no command line), its id, slot count and the JobManager's actual RPC
address as -D options, and FLINK_RUNTIME_PARENT_PID: the TaskManager binds itself to the
JobManager's process (entrypoints.py), so none outlives a JobManager killed with SIGKILL.
The kernel's parent-death signal is tied to the thread that started the child, which is
why the shell starts workers from one thread that lives as long as the driver.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import yaml

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.resourcemanager.policy import WorkerSpec

log = logging.getLogger(__name__)

# Read by entrypoints.run_taskmanager: the pid whose death ends the TaskManager.
PARENT_PID_ENV = "FLINK_RUNTIME_PARENT_PID"
STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything a driver needs to start one TaskManager."""

    worker_id: str
    spec: WorkerSpec
    jobmanager_host: str
    jobmanager_port: int
    # The JobManager's configuration, handed to the TaskManager whole (FLINK_PROPERTIES).
    properties: dict[str, Any]

    def dynamic_properties(self) -> dict[str, Any]:
        """What differs per worker: given as -D, which wins over FLINK_PROPERTIES."""
        properties: dict[str, Any] = {
            cfg.JOBMANAGER_RPC_ADDRESS.key: self.jobmanager_host,
            cfg.JOBMANAGER_RPC_PORT.key: self.jobmanager_port,
            cfg.TASKMANAGER_RESOURCE_ID.key: self.worker_id,
            cfg.TASKMANAGER_SLOTS.key: self.spec.slots,
            # Several TaskManagers on one host: each picks a free port.
            cfg.TASKMANAGER_RPC_PORT.key: 0,
        }
        # Sized for the requests it was started for: it registers these totals, so the
        # slot pool carves their slots from it (unknown sizes: the TaskManager's defaults).
        if self.spec.cpu_cores > 0:
            properties[cfg.TASKMANAGER_CPU_CORES.key] = self.spec.cpu_cores
        if self.spec.task_heap_memory_mb > 0:
            # At least Spark's own floor (its JVM refuses to start below ~450 MB).
            properties[cfg.TASKMANAGER_TASK_HEAP.key] = f"{max(int(self.spec.task_heap_memory_mb), 1024)}m"
        return properties

    def arguments(self) -> list[str]:
        arguments = ["taskmanager"]
        for key, value in self.dynamic_properties().items():
            arguments += ["-D", f"{key}={value}"]
        return arguments

    def flink_properties(self) -> str:
        """The JobManager's configuration as the FLINK_PROPERTIES YAML (flat keys)."""
        return yaml.safe_dump({key: str(value) for key, value in self.properties.items()}, sort_keys=True)


class ResourceManagerDriver(Protocol):
    """Starts and stops workers; every call may block (the shell runs them off the mailbox)."""

    def start_worker(self, launch: WorkerLaunch) -> None:
        """Start a TaskManager; it registers with the JobManager by itself."""

    def stop_worker(self, worker_id: str) -> None:
        """Stop it (gracefully first); nothing if it is gone already."""

    def terminated_workers(self) -> list[tuple[str, str]]:
        """Workers that ended since the last call, each with why (exit status, signal)."""

    def stop_all(self) -> None:
        """Stop every worker this driver started (the JobManager is stopping)."""


@dataclass
class _Process:
    process: subprocess.Popen[bytes]
    stopping: bool = False


class ProcessDriver:
    """TaskManagers as processes of this host, children of the JobManager."""

    def __init__(self, config: Configuration) -> None:
        self.log_dir = Path(config.get(cfg.LOG_DIR) or os.path.join(tempfile.gettempdir(), "flink-runtime", "log"))
        self._processes: dict[str, _Process] = {}

    def pid_of(self, worker_id: str) -> int | None:
        started = self._processes.get(worker_id)
        return started.process.pid if started is not None else None

    def start_worker(self, launch: WorkerLaunch) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "flink_runtime.client.cli", *launch.arguments()]
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "FLINK_PROPERTIES": launch.flink_properties(),
            PARENT_PID_ENV: str(os.getpid()),
        }
        # What the process prints before its own log files open (an import error, a bad option).
        output: IO[bytes] = open(self.log_dir / f"{launch.worker_id}.launch.out", "wb")  # noqa: SIM115
        with output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self._processes[launch.worker_id] = _Process(process)
        log.info("Started TaskManager %s as process %d (%d slots)", launch.worker_id, process.pid, launch.spec.slots)

    def stop_worker(self, worker_id: str) -> None:
        started = self._processes.get(worker_id)
        if started is None:
            return
        started.stopping = True
        _terminate(started.process)

    def terminated_workers(self) -> list[tuple[str, str]]:
        ended: list[tuple[str, str]] = []
        for worker_id, started in list(self._processes.items()):
            code = started.process.poll()
            if code is None:
                continue
            del self._processes[worker_id]
            ended.append((worker_id, _exit_reason(started.process.pid, code)))
        return ended

    def stop_all(self) -> None:
        for started in self._processes.values():
            started.stopping = True
            with contextlib.suppress(ProcessLookupError):
                started.process.terminate()
        for started in self._processes.values():
            _terminate(started.process)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(STOP_GRACE_SECONDS)


def _exit_reason(pid: int, code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"process {pid} was killed by {signal.Signals(-code).name}"
    return f"process {pid} exited with status {code}"
