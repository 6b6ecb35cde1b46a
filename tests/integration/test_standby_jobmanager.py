"""Two JobManagers on one PostgreSQL job store, one leader (high-availability.type:
database), one job through two failovers:

1. the leader freezes (SIGSTOP, as a long GC pause or a partition from the database):
   the standby takes over once the lease expired; the frozen one, thawed, finds it
   lost the lease, steps down (its job SUSPENDED locally, its writes refused by the
   store's fencing) and stands by;
2. the new leader is killed (kill -9) mid-job: the first one takes over again;
3. the killed one, started again, comes back as a standby and writes nothing;
4. a JobManager without HA pointed at the same store is refused at its start;

and the job finishes with exact output, FINISHED in the store. On the way, a standby's
REST API at its edges: a foreign Host refused by the standby itself, a raw path passed
on byte for byte (answered as the leader answers it), an empty bearer token a 401.

Real processes, a real PostgreSQL server (tests/helpers/postgres.py), the TaskManagers
finding the leader through the lease row, clients (ours and Flink's CLI) answered by the
standby through the leader.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster, free_ports
from flink_runtime.jobmanager.jobstore import JobStore
from tests.flink_tools import flink_cli, flink_home
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.postgres import PostgresServer
from tests.integration.test_jobmanager_failover import recovering

pytestmark = pytest.mark.integration

LEASE = {
    "high-availability.database.leader-election.lease-duration": "3 s",
    "high-availability.database.leader-election.renew-deadline": "2 s",
    "high-availability.database.leader-election.retry-period": "300 ms",
}


REST_TOKEN = "standby-test-token"


def leader_of(process: ClusterProcess) -> dict[str, Any]:
    answer = httpx.get(f"{process.rest_url}/leader", timeout=5, headers={"Authorization": f"Bearer {REST_TOKEN}"})
    return answer.raise_for_status().json()


def leads(process: ClusterProcess) -> str | None:
    """The leader's REST URL as `process` knows it (None: nobody, or not known yet)."""
    leader = leader_of(process)["leader"]
    return leader["rest-url"] if leader else None


def wait_until(condition: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"{what} not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def another_jobmanager(cluster: StandaloneCluster, name: str, rest_port: int | None = None) -> ClusterProcess:
    rpc_port, free_rest_port = free_ports(2)
    return cluster.start_jobmanager(
        name=name, **{"jobmanager.rpc.port": rpc_port, "rest.port": rest_port or free_rest_port}
    )


def completed_checkpoints(process: ClusterProcess, job_id: str) -> int:
    with JobClient(process.rest_url, timeout=30, token=REST_TOKEN) as client:
        return client.checkpoints(job_id)["counts"]["completed"]


def raw_get(rest_url: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """GET `target` as it is: httpx would resolve its dot segments before sending it."""
    host, port = rest_url.split("://", 1)[1].rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", target, headers=headers)
        answer = connection.getresponse()
        return answer.status, {name.lower(): value for name, value in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def check_a_standbys_edges(standby: ClusterProcess, leader: ClusterProcess, taskmanager_id: str) -> None:
    """A foreign Host is refused by the standby itself; a raw path goes on byte for byte
    (answered as the leader answers it, not as the path with its `..` resolved); an empty
    bearer token is refused as any wrong one, not a 503."""
    wait_until(lambda: leads(standby) == leader.rest_url, 10, "the standby naming the leader")
    auth = {"Authorization": f"Bearer {REST_TOKEN}"}
    # The TaskManager is there: a path collapsed to /taskmanagers/<id> would answer 200.
    status, headers, _ = raw_get(standby.rest_url, f"/taskmanagers/{taskmanager_id}", auth)
    assert status == 200 and headers["x-flink-runtime-leader"] == leader.rest_url
    for target in (
        f"/taskmanagers/{taskmanager_id}/logs/..",
        f"/v1/taskmanagers/{taskmanager_id}/logs/..",
        "/jobs/overview/..",
    ):
        through = raw_get(standby.rest_url, target, auth)
        direct = raw_get(leader.rest_url, target, auth)
        assert through[0] == direct[0] and through[2] == direct[2], (target, through, direct)
        assert through[0] in (400, 404), (target, through)
        assert through[1]["x-flink-runtime-leader"] == leader.rest_url

    port = standby.rest_url.rsplit(":", 1)[1]
    rebound = {**auth, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    status, headers, body = raw_get(standby.rest_url, "/jobs/overview", rebound)
    assert status == 403 and "rest.allowed-hosts" in json.loads(body)["errors"][0]
    assert "x-flink-runtime-leader" not in headers  # refused by the standby itself

    status, headers, body = raw_get(standby.rest_url, "/jobs/overview", {"Authorization": "Bearer "})
    assert status == 401, body
    assert headers["www-authenticate"].startswith("Bearer")
    assert "empty bearer token" in json.loads(body)["errors"][0]


def test_one_job_survives_a_frozen_and_a_killed_leader_with_exact_output(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    store_url = postgres.new_database("ha")
    properties = {
        "jobstore.url": store_url,
        "high-availability.type": "database",
        "high-availability.cluster-id": "standby-test",
        **LEASE,
        "security.rest.token": REST_TOKEN,  # the client's redirect must keep it
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": "20 s",  # the TaskManagers follow the lease, not a heartbeat timeout
        "cluster.registration.refused-registration-delay": "300 ms",
        "slot.request.timeout": "60 s",
        "execution.checkpointing.min-interval": "100 ms",
    }
    count = 120_000
    graph = modulo_sum_job(tmp_path / "out", count=count, modulo=7, name="survives its leaders")
    graph.vertices[0].config.update({"splits": 32, "seconds_per_split": 0.5})
    graph.config.update(recovering("500 ms", tmp_path / "checkpoints"))

    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        first = cluster.start_jobmanager()
        wait_until(lambda: leader_of(first)["is-leader"], 20, "the first JobManager leading")
        second = another_jobmanager(cluster, "jobmanager-b")
        for index in range(2):
            cluster.start_taskmanager(f"tm-{index}", wait=False, **{"taskmanager.numberOfTaskSlots": 2})
        cluster.wait_for_taskmanagers(lambda ids: {"tm-0", "tm-1"} <= ids)

        # The standby names the leader and answers through it; it runs nothing.
        assert leader_of(second)["is-leader"] is False
        check_a_standbys_edges(second, first, "tm-0")  # before the job: its timing must not depend on this
        with JobClient(second.rest_url, timeout=30, token=REST_TOKEN) as client:  # submitted through the standby
            job_id = client.submit(graph)
        through = httpx.get(
            f"{second.rest_url}/jobs/overview?x=1", timeout=5, headers={"Authorization": f"Bearer {REST_TOKEN}"}
        )
        assert through.status_code == 200, through.text
        assert through.headers["x-flink-runtime-leader"] == first.rest_url
        assert [job["jid"] for job in through.json()["jobs"]] == [job_id]
        unauthenticated = httpx.get(f"{second.rest_url}/jobs/overview", timeout=5)
        assert unauthenticated.status_code == 401  # the standby's own guard first
        wait_until(lambda: completed_checkpoints(first, job_id) >= 2, 90, "two checkpoints by the first leader")

        # 1. The leader freezes; the standby takes over; the thawed one stands by.
        first.process.send_signal(signal.SIGSTOP)
        frozen_takeover = wait_until(lambda: leader_of(second)["is-leader"], 20, "the standby leading")
        first.process.send_signal(signal.SIGCONT)
        wait_until(lambda: not leader_of(first)["is-leader"], 20, "the thawed leader standing by")
        wait_until(lambda: leads(first) == second.rest_url, 10, "the thawed leader naming its successor")
        wait_until(lambda: completed_checkpoints(second, job_id) >= 2, 60, "two checkpoints by the second leader")

        # 2. The new leader is killed mid-job: the first one leads again and finishes the job.
        second.kill()
        killed_takeover = wait_until(lambda: leader_of(first)["is-leader"], 20, "the first leading again")
        with JobClient(first.rest_url, timeout=30, token=REST_TOKEN) as client:
            status = client.wait(job_id, timeout=90)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            registered = {tm["id"] for tm in client.taskmanagers()}

        # 3. The killed one comes back (same REST port) as a standby and writes nothing.
        returned = another_jobmanager(cluster, "jobmanager-b-again", rest_port=int(second.rest_url.rsplit(":", 1)[1]))
        time.sleep(1.5)  # several retry periods: time to (wrongly) take the lease or write
        wait_until(lambda: leads(returned) == first.rest_url, 10, "the returned JobManager naming the leader")
        assert leader_of(returned)["is-leader"] is False
        # Flink's own CLI, which follows no redirect, pointed at a standby. Asked once the job
        # has ended: its JVM start (~20 s under load) must not eat into the job's run time,
        # which the freeze and the kill above need.
        listed = flink_cli(
            flink_home(),
            ["list", "-a"],
            rest_address=returned.rest_url.split("://", 1)[1],
            env={"FLINK_REST_CLIENT_HEADERS": f"Authorization:Bearer {REST_TOKEN}"},
        )
        assert listed.returncode == 0 and job_id in listed.stdout, listed.stdout + listed.stderr
        # 4. A JobManager without HA on the cluster's store is refused, and told how to join.
        rpc_port, rest_port = free_ports(2)
        with pytest.raises(RuntimeError) as alone:
            cluster.start_jobmanager(
                name="jobmanager-alone",
                **{"high-availability.type": "NONE", "jobmanager.rpc.port": rpc_port, "rest.port": rest_port},
            )
        assert "the JobManagers of a high-availability cluster use it" in str(alone.value), alone.value
        first_log, second_log, returned_log = first.log(), second.log(), returned.log()

    with JobStore(store_url) as store:
        record = store.job(job_id)
        assert record is not None and record.status == "FINISHED", record
    records = [r for part in (tmp_path / "out").glob("part-*.json") for r in json.loads(part.read_text())]
    assert sum(r["count"] for r in records) == count
    assert sum(r["sum"] for r in records) == count * (count - 1) // 2
    assert {"tm-0", "tm-1"} <= registered  # both TaskManagers followed the leader
    # The frozen leader stepped down: its job SUSPENDED, what it still wrote refused.
    assert "lost the leadership (fencing token 1)" in first_log, first_log[-3000:]
    assert "switched from RUNNING to SUSPENDED" in first_log
    assert "Recovering job" in second_log and "fencing token 2" in second_log
    assert "fencing token 3" in first_log
    assert "Recovering job" not in returned_log
    assert not re.search(r"switched from \w+ to RUNNING", returned_log)
    # Within the lease duration (3 s) plus a few retry periods, on a loaded 2-core machine.
    assert frozen_takeover < 10 and killed_takeover < 10, (frozen_takeover, killed_takeover)
    print(f"standby leading {frozen_takeover:.2f} s after the freeze, {killed_takeover:.2f} s after the kill")
