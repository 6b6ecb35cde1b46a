"""TaskManagers find a restarted JobManager again on their own."""

from __future__ import annotations

import time

import httpx
import pytest

from flink_runtime.client.local_cluster import StandaloneCluster

pytestmark = pytest.mark.integration


def test_taskmanagers_register_again_after_the_jobmanager_comes_back(tmp_path) -> None:
    properties = {"heartbeat.interval": "200 ms", "heartbeat.timeout": "1 s"}
    with StandaloneCluster(tmp_path, properties=properties) as cluster:
        cluster.start(taskmanagers=2, slots=1)
        first_jobmanager = httpx.get(f"{cluster.rest_url}/jobmanager/config").status_code
        assert first_jobmanager == 200

        cluster.jobmanager.kill()
        restarted_at = time.monotonic()
        cluster.start_jobmanager()  # same RPC and REST ports
        registered = cluster.wait_for_taskmanagers(lambda ids: ids == {"tm-0", "tm-1"}, timeout=15)
        took = time.monotonic() - restarted_at

        assert {tm["id"] for tm in registered} == {"tm-0", "tm-1"}
        assert took < 10
        assert "registering again" in cluster.taskmanagers[0].log()
