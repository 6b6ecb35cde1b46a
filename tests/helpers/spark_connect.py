"""A real Spark Connect server in a process of its own, from the pyspark wheel's
`sbin/start-connect-server.sh`, for tests that need `spark.remote: sc://...`.

`hidden` folders are covered, for the server only, by empty tmpfs mounts in a mount
namespace of its own (`unshare --mount`, as root): the server then sees a different
folder at the same path, as a Connect server on another host without the shared
volume would.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from pyspark.find_spark_home import _find_spark_home

from flink_runtime.client.local_cluster import free_ports


class SparkConnectServer:
    def __init__(self, url: str, ui_url: str, log: Path, process: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.ui_url = ui_url
        self.log = log
        self.process = process

    def completed_tasks(self) -> int:
        """Spark tasks the server's application has completed (its REST API)."""
        applications = httpx.get(f"{self.ui_url}/api/v1/applications", timeout=10).json()
        stages = httpx.get(f"{self.ui_url}/api/v1/applications/{applications[0]['id']}/stages", timeout=10).json()
        return sum(stage.get("numCompleteTasks", 0) for stage in stages)

    def wait_until_ready(self, timeout: float = 180.0) -> None:
        """Until the server's REST API lists its application's stages (it opens gRPC
        before, and answers /applications before the stages): a JVM start."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.completed_tasks()
                return
            except (httpx.HTTPError, ValueError, LookupError):
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the Spark Connect server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)


@contextmanager
def spark_connect_server(
    work: Path, cores: int = 2, hidden: Sequence[Path] = (), java_options: str = "", wait: bool = True
) -> Iterator[SparkConnectServer]:
    """Start a Connect server on `local[cores]` at a free port; stop it at exit."""
    home = _find_spark_home()
    port, ui_port = free_ports(2)
    work.mkdir(parents=True, exist_ok=True)
    env: dict[str, Any] = {
        **os.environ,
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOG_DIR": str(work),
        "SPARK_PID_DIR": str(work),
    }
    command = [
        os.path.join(home, "sbin", "start-connect-server.sh"),
        "--master", f"local[{cores}]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=true",
        "--conf", f"spark.ui.port={ui_port}",
        "--conf", f"spark.driver.extraJavaOptions=-XX:+UseSerialGC {java_options}".strip(),
    ]  # fmt: skip
    if hidden:
        mounts = " && ".join(f"mount -t tmpfs flink-runtime-hidden {shlex.quote(str(folder))}" for folder in hidden)
        script = f"{mounts} && exec {shlex.join(command)}"
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    log = work / "connect-server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = SparkConnectServer(f"sc://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", log, process)
    try:
        if wait:
            server.wait_until_ready()
        yield server
    finally:
        try:
            os.killpg(process.pid, 15)
            process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
