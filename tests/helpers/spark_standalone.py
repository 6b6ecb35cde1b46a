"""A real Spark standalone cluster (one master, one worker) from the pyspark wheel's
SPARK_HOME, for tests that need `spark://` rather than `local[N]`."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from pyspark.find_spark_home import _find_spark_home

from flink_runtime.client.local_cluster import free_ports

# For the master, the worker and (through spark.executor.extraJavaOptions) executors.
QUICK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


class SparkStandalone:
    def __init__(self, master_url: str, web_url: str, work: Path, processes: list[subprocess.Popen[bytes]]) -> None:
        self.master_url = master_url
        self.web_url = web_url
        self._work = work
        self._processes = processes

    def state(self) -> dict[str, Any]:
        """The master's JSON status: workers, active applications and their cores."""
        return httpx.get(f"{self.web_url}/json/", timeout=10).json()

    def wait_until_ready(self, timeout: float = 60.0) -> None:
        """Until the worker has registered with the master."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.state().get("aliveworkers") == 1:
                    return
            except (httpx.HTTPError, ValueError):
                pass  # not listening yet, or its web UI answers 404 HTML until /json/ is mounted
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._processes):
                logs = "\n".join((self._work / f"{n}.log").read_text()[-2000:] for n in ("master", "worker"))
                raise RuntimeError(f"the Spark standalone master and worker did not start:\n{logs}")
            time.sleep(0.5)


@contextmanager
def spark_standalone(work: Path, cores: int, memory: str, wait: bool = True) -> Iterator[SparkStandalone]:
    """Start a master and a worker with `cores` and `memory`; stop both at exit.
    wait=False: yield at once (the master URL is known before they run), so a test can
    start other processes meanwhile and call `wait_until_ready` when it needs Spark."""
    home = _find_spark_home()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    # The master and the worker serve a few test applications: the quick-start flags the
    # tests give every Spark driver (tests/conftest.py) spare their JVMs' JIT and GC work.
    env["SPARK_DAEMON_JAVA_OPTS"] = QUICK_JVM
    port, web, worker_web = free_ports(3)
    master_url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
    work.mkdir(parents=True, exist_ok=True)
    spark_class = os.path.join(home, "bin", "spark-class")
    commands = {
        "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        + ["--port", str(port), "--webui-port", str(web)],
        "worker": [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--cores", str(cores)]
        + ["--memory", memory, "--webui-port", str(worker_web), "--work-dir", str(work / "worker")],
    }
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in commands.items():
            with open(work / f"{name}.log", "wb") as log:
                processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        cluster = SparkStandalone(master_url, web_url, work, processes)
        if wait:
            cluster.wait_until_ready()
        yield cluster
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
