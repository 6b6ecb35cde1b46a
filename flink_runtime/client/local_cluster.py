"""Start a standalone cluster as local processes, as Flink's bin/start-cluster.sh does.

`StandaloneCluster` launches `flink-runtime jobmanager` and N `flink-runtime
taskmanager` processes on this host, each a real OS process talking over loopback,
and waits until they are ready. Integration tests and benchmarks use it; so can a
user who wants a cluster that outlives a Python session.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.security import bearer, client_verify, rest_token

_READY = re.compile(r"ready rpc=(?P<rpc>\S+)(?: rest=(?P<rest>\S+))?")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports. Their sockets stay open until all are
    picked: the kernel may hand a just-closed port out again, and two services given the
    same port was seen (a Spark master's RPC and web UI)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _cli() -> list[str]:
    return [sys.executable, "-m", "flink_runtime.client.cli"]


@dataclass
class ClusterProcess:
    name: str
    process: subprocess.Popen[str]
    log_path: Path
    rpc_address: str = ""
    rest_url: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no goodbye to the JobManager, as a crashed machine."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class StandaloneCluster:
    """A JobManager and TaskManagers as separate processes on this host."""

    work_dir: Path
    properties: dict[str, Any] = field(default_factory=dict)
    jobmanager: ClusterProcess | None = None
    taskmanagers: list[ClusterProcess] = field(default_factory=list)
    # JobManagers started under another name: standbys (high-availability.type: database).
    other_jobmanagers: list[ClusterProcess] = field(default_factory=list)
    rpc_port: int = 0
    rest_port: int = 0
    # Where this process reaches the REST API (the JobManager's rest.bind-address when it
    # runs on another host or in a network namespace).
    rest_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        rpc_port, rest_port = free_ports(2)
        self.rpc_port = self.rpc_port or rpc_port
        self.rest_port = self.rest_port or rest_port
        self.properties = {
            "jobmanager.rpc.port": self.rpc_port,
            "rest.port": self.rest_port,
            "io.tmp.dirs": str(self.work_dir / "data"),
            "jobstore.url": f"sqlite:///{self.work_dir / 'jobstore.db'}",
            "env.log.dir": str(self.work_dir / "log"),
            **self.properties,
        }

    @property
    def rest_url(self) -> str:
        scheme = "https" if self._config().get(cfg.SSL_REST_ENABLED) else "http"
        return f"{scheme}://{self.rest_host}:{self.rest_port}"

    def _config(self) -> Configuration:
        return Configuration(self.properties)

    def http_options(self) -> dict[str, Any]:
        """httpx keyword arguments for this cluster's REST API: its token and TLS trust."""
        config = self._config()
        return {"headers": bearer(rest_token(config)), "verify": client_verify(config)}

    def _spawn(
        self,
        name: str,
        args: list[str],
        extra: dict[str, Any],
        timeout: float,
        cwd: Path | None = None,
        prefix: list[str] | None = None,
    ) -> ClusterProcess:
        properties = {**self.properties, **extra}
        # `prefix` runs the process elsewhere, e.g. `ip netns exec <ns>`, which execs the
        # command in place (the pid stays the command's own).
        command = [*(prefix or []), *_cli(), *args]
        for key, value in properties.items():
            command += ["-D", f"{key}={value}"]
        log_path = self.work_dir / f"{name}.log"
        log_file: IO[str] = open(log_path, "w")  # noqa: SIM115 - owned by the child's lifetime
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
        log_file.close()
        started = ClusterProcess(name, process, log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = _READY.search(started.log())
            if match:
                started.rpc_address = match.group("rpc")
                started.rest_url = match.group("rest") or ""
                return started
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{started.log()}")
            time.sleep(0.05)
        started.kill()
        raise TimeoutError(f"{name} not ready within {timeout} s:\n{started.log()}")

    def start_jobmanager(
        self, timeout: float = 60.0, name: str = "jobmanager", prefix: list[str] | None = None, **extra: Any
    ) -> ClusterProcess:
        """`name` other than "jobmanager": one more JobManager (give it its own rpc and REST
        ports in `extra`); `self.jobmanager` stays the first. `prefix`: see _spawn."""
        process = self._spawn(name, ["jobmanager"], extra, timeout, prefix=prefix)
        if name == "jobmanager":
            self.jobmanager = process
        else:
            self.other_jobmanagers.append(process)
        return process

    def start_taskmanager(
        self,
        resource_id: str | None = None,
        wait: bool = True,
        cwd: Path | None = None,
        prefix: list[str] | None = None,
        **extra: Any,
    ) -> ClusterProcess:
        """`cwd`: the process's working directory (relative paths in its settings resolve there)."""
        resource_id = resource_id or f"tm-{len(self.taskmanagers)}"
        extra = {"taskmanager.resource-id": resource_id, **extra}
        taskmanager = self._spawn(f"taskmanager-{resource_id}", ["taskmanager"], extra, 30.0, cwd, prefix)
        self.taskmanagers.append(taskmanager)
        if wait:
            self.wait_for_taskmanagers(lambda ids: resource_id in ids)
        return taskmanager

    def wait_for_taskmanagers(self, condition: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(f"{self.rest_url}/taskmanagers", timeout=5, **self.http_options())
            registered = answer.raise_for_status().json()["taskmanagers"]
            if condition({tm["id"] for tm in registered}):
                return registered
            if time.monotonic() > deadline:
                raise TimeoutError(f"TaskManagers not as expected within {timeout} s: {registered}")
            time.sleep(0.05)

    def start(self, taskmanagers: int = 2, slots: int = 2) -> StandaloneCluster:
        self.start_jobmanager()
        for index in range(taskmanagers):
            self.start_taskmanager(f"tm-{index}", wait=False, **{"taskmanager.numberOfTaskSlots": slots})
        expected = {f"tm-{index}" for index in range(taskmanagers)}
        self.wait_for_taskmanagers(lambda ids: expected <= ids)
        return self

    def stop(self) -> None:
        for process in [*self.taskmanagers, *([self.jobmanager] if self.jobmanager else []), *self.other_jobmanagers]:
            process.terminate()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
