"""The runtime containers' healthcheck (docker-compose.yaml runs it every few seconds).

    python /opt/flink-runtime/healthcheck.py jobmanager
    python /opt/flink-runtime/healthcheck.py taskmanager TASKMANAGER_ID

jobmanager: its REST API answers /overview on this container's rest.port.
taskmanager: the JobManager knows this TaskManager (`/taskmanagers/<id>` answers 200, so
it registered and its heartbeats have not timed out), which is what a TaskManager is
healthy for; a TaskManager process that runs but never registered is unhealthy.

The configuration is read as the container's `flink-runtime` reads it (FLINK_PROPERTIES,
$FLINK_CONF_DIR/config.yaml), so the REST address, port and token are those of the
cluster. Exit 0 healthy, 1 not (with the reason on stdout, which `docker inspect` keeps).
"""

from __future__ import annotations

import os
import sys

import httpx

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.security import rest_token

USAGE = "usage: healthcheck.py jobmanager | taskmanager TASKMANAGER_ID"


def check(argv: list[str], environ: dict[str, str]) -> str:
    """What is healthy, or raise RuntimeError saying what is not."""
    if argv[:1] == ["jobmanager"] and len(argv) == 1:
        role, path = "jobmanager", "/overview"
    elif argv[:1] == ["taskmanager"] and len(argv) == 2:
        role, path = "taskmanager", f"/taskmanagers/{argv[1]}"
    else:
        raise ValueError(USAGE)
    config = Configuration.load(None, [], environ=environ)
    # The JobManager checks its own REST API; a TaskManager asks the JobManager about itself.
    host = "127.0.0.1" if role == "jobmanager" else config.get(cfg.REST_ADDRESS)
    url = f"http://{host}:{config.get(cfg.REST_PORT)}{path}"
    token = rest_token(config)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, headers=headers, timeout=3)
    except httpx.HTTPError as exc:
        raise RuntimeError(f"{url}: {exc or type(exc).__name__}") from exc
    if response.status_code == 404 and role == "taskmanager":
        raise RuntimeError(f"the JobManager at {host} does not know TaskManager {argv[1]} (not registered yet)")
    if response.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
    return f"{role} healthy: {url} answered 200"


def main(argv: list[str]) -> int:
    try:
        print(check(argv, dict(os.environ)))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1  # Docker reserves 2
    except Exception as exc:  # any failure is "unhealthy" with its reason, never a traceback
        print(f"unhealthy: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
