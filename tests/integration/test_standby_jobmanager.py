"""Two JobManagers on one PostgreSQL job store, one leader (high-availability.type:
database): kill -9 the leader mid-job, the standby takes over within the lease
timeouts and the job finishes with exact output; the killed JobManager, started again,
comes back as a standby and writes nothing over its successor's results.

Real processes, a real PostgreSQL server (tests/helpers/postgres.py), the TaskManagers
finding the leader through the lease row, the client following the standby's redirect.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster, free_port
from flink_runtime.jobmanager.jobstore import JobStore
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.postgres import PostgresServer
from tests.integration.test_jobmanager_failover import recovering

pytestmark = pytest.mark.integration

LEASE = {
    "high-availability.database.leader-election.lease-duration": "3 s",
    "high-availability.database.leader-election.renew-deadline": "2 s",
    "high-availability.database.leader-election.retry-period": "300 ms",
}


def leader_of(rest_url: str) -> dict[str, Any]:
    return httpx.get(f"{rest_url}/leader", timeout=5).raise_for_status().json()


def wait_until(condition: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"{what} not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def another_jobmanager(cluster: StandaloneCluster, name: str, rest_port: int | None = None) -> ClusterProcess:
    return cluster.start_jobmanager(
        name=name, **{"jobmanager.rpc.port": free_port(), "rest.port": rest_port or free_port()}
    )


def test_the_standby_takes_over_a_killed_leader_and_the_job_finishes_exactly(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    store_url = postgres.new_database("ha")
    properties = {
        "jobstore.url": store_url,
        "high-availability.type": "database",
        "high-availability.cluster-id": "standby-test",
        **LEASE,
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": "20 s",  # the TaskManagers follow the lease, not a heartbeat timeout
        "cluster.registration.refused-registration-delay": "300 ms",
        "slot.request.timeout": "60 s",
        "execution.checkpointing.min-interval": "100 ms",
    }
    count = 120_000
    graph = modulo_sum_job(tmp_path / "out", count=count, modulo=7, name="survives its leader")
    graph.vertices[0].config.update({"splits": 24, "seconds_per_split": 0.5})
    graph.config.update(recovering("500 ms", tmp_path / "checkpoints"))

    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        first = cluster.start_jobmanager()
        wait_until(lambda: leader_of(first.rest_url)["is-leader"], 20, "the first JobManager leading")
        standby = another_jobmanager(cluster, "jobmanager-b")
        for index in range(2):
            cluster.start_taskmanager(f"tm-{index}", wait=False, **{"taskmanager.numberOfTaskSlots": 2})
        cluster.wait_for_taskmanagers(lambda ids: {"tm-0", "tm-1"} <= ids)

        # The standby names the leader and redirects job calls to it; it runs nothing.
        assert leader_of(standby.rest_url)["is-leader"] is False
        redirect = httpx.get(f"{standby.rest_url}/jobs/overview?x=1", timeout=5)
        assert redirect.status_code == 307, redirect.text
        assert redirect.headers["location"] == f"{first.rest_url}/jobs/overview?x=1"
        assert first.rest_url in redirect.json()["errors"][0]

        with JobClient(standby.rest_url, timeout=30) as client:  # follows the redirect
            job_id = client.submit(graph)
        with JobClient(first.rest_url, timeout=30) as client:
            wait_until(lambda: client.checkpoints(job_id)["counts"]["completed"] >= 2, 90, "two checkpoints")

        cluster.jobmanager.kill()
        killed_at = time.monotonic()
        takeover = wait_until(lambda: leader_of(standby.rest_url)["is-leader"], 20, "the standby leading")
        with JobClient(standby.rest_url, timeout=30) as client:
            running_again = wait_until(lambda: client.status(job_id).value == "RUNNING", 30, "the job RUNNING again")
            status = client.wait(job_id, timeout=90)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            failover = takeover + running_again
            registered = {tm["id"] for tm in client.taskmanagers()}
        standby_log = standby.log()

        # The killed JobManager comes back (same ports) as a standby and writes nothing.
        returned = another_jobmanager(cluster, "jobmanager-a-again", rest_port=cluster.rest_port)
        time.sleep(1.5)  # several retry periods: time to (wrongly) take the lease or write
        view = leader_of(returned.rest_url)
        assert view["is-leader"] is False and view["leader"]["rest-url"] == standby.rest_url, view
        returned_log = returned.log()

    with JobStore(store_url) as store:
        record = store.job(job_id)
        assert record is not None and record.status == "FINISHED", record
    records = [r for part in (tmp_path / "out").glob("part-*.json") for r in json.loads(part.read_text())]
    assert sum(r["count"] for r in records) == count
    assert sum(r["sum"] for r in records) == count * (count - 1) // 2
    assert {"tm-0", "tm-1"} <= registered  # both TaskManagers found the new leader
    assert "Recovering job" in standby_log and "fencing token 2" in standby_log
    assert "Recovering job" not in returned_log
    assert not re.search(r"switched from \w+ to RUNNING", returned_log)
    # Within the lease duration (3 s) plus a few retry periods, on a loaded 2-core machine.
    assert time.monotonic() - killed_at > 0 and takeover < 10, takeover
    print(f"failover: standby leading after {takeover:.2f} s, job RUNNING again after {failover:.2f} s")
