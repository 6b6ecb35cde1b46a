"""TaskManagers find a restarted JobManager again on their own."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster, free_ports
from flink_runtime.jobgraph.jobgraph import new_job_id
from flink_runtime.jobmanager.jobstore import JobStore
from tests.flink_tools import flink_cli, flink_home
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration


def test_taskmanagers_register_again_after_the_jobmanager_comes_back(tmp_path) -> None:
    properties = {"heartbeat.interval": "200 ms", "heartbeat.timeout": "1 s"}
    with StandaloneCluster(tmp_path, properties=properties) as cluster:
        cluster.start(taskmanagers=2, slots=1)
        first_jobmanager = httpx.get(f"{cluster.rest_url}/jobmanager/config").status_code
        assert first_jobmanager == 200

        cluster.jobmanager.kill()
        cluster.start_jobmanager()  # same RPC and REST ports; returns once its REST answers
        restarted_at = time.monotonic()
        registered = cluster.wait_for_taskmanagers(lambda ids: ids == {"tm-0", "tm-1"}, timeout=15)
        took = time.monotonic() - restarted_at

        assert {tm["id"] for tm in registered} == {"tm-0", "tm-1"}
        # Counted from when the new JobManager answers (its start time depends on the
        # machine's load): without the registration probe this waits out the
        # TaskManagers' registration back-off.
        assert took < 10
        assert "registering again" in cluster.taskmanagers[0].log()


def test_finished_jobs_stay_pruned_after_a_restart(tmp_path: Path) -> None:
    """Jobs pruned (jobstore.max-capacity) or expired in memory leave the store too: a
    store that kept every finished job would grow without bound and bring them back with
    the next JobManager."""
    # The expiration must outlast a JobManager restart and a Flink CLI call on a loaded
    # machine (both come before the jobs may expire), hence 20 s, not less.
    properties = {"jobstore.max-capacity": "3", "jobstore.expiration-time": "20 s"}
    database = tmp_path / "cluster" / "jobstore.db"

    def stored_jobs() -> int:
        with sqlite3.connect(database) as connection:
            return connection.execute("SELECT count(*) FROM jobs").fetchone()[0]

    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            for index in range(6):
                job_id = client.submit(sleep_job(0.05, name=f"short {index}"))
                assert client.wait(job_id, timeout=30).value == "FINISHED"
        ended = time.monotonic()
        deadline = time.monotonic() + 5
        while stored_jobs() > 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stored_jobs() == 3

        cluster.jobmanager.kill()
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=30) as client:
            jobs = client.list_jobs()
        assert sorted(job["name"] for job in jobs) == ["short 3", "short 4", "short 5"]
        # Jobs of the earlier JobManager answer as live ones do: task counts (Flink's CLI
        # fails on `tasks: {}`), status, execution result, and no second end.
        assert all(job["tasks"]["finished"] == job["tasks"]["total"] == 1 for job in jobs)
        archived = jobs[0]["jid"]
        assert httpx.get(f"{cluster.rest_url}/v1/jobs/{archived}/status").json() == {"status": "FINISHED"}
        result = httpx.get(f"{cluster.rest_url}/jobs/{archived}/execution-result").json()
        assert result["job-execution-result"]["application-status"] == "SUCCEEDED"
        assert httpx.patch(f"{cluster.rest_url}/jobs/{archived}", params={"mode": "cancel"}).status_code == 409
        listing = flink_cli(flink_home(), ["list", "-a"], cluster.rest_url.removeprefix("http://"), timeout=90)
        assert listing.returncode == 0, listing.stdout + listing.stderr
        assert archived in listing.stdout and "(FINISHED)" in listing.stdout

        # Past jobstore.expiration-time they are gone from the store, and stay gone.
        time.sleep(max(0.0, 20.5 - (time.monotonic() - ended)))
        cluster.jobmanager.kill()
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert client.list_jobs() == []
        assert stored_jobs() == 0


def test_a_job_whose_recovery_keeps_killing_the_jobmanager_is_given_up(tmp_path: Path) -> None:
    """A job whose recovery crashes the JobManager would otherwise be recovered by every
    restarted JobManager, each crashing again. The store counts recoveries that never
    reached RUNNING (as three JobManager deaths during recovery leave it here); the next
    JobManager marks the job FAILED with the reason and comes up."""
    database = tmp_path / "cluster" / "jobstore.db"
    graph = sleep_job(60, name="crashes every JobManager")
    graph.job_id = new_job_id()
    with JobStore(f"sqlite:///{database}") as store:
        store.add_job(graph.job_id, graph.name, graph.to_json(), time.time())
        store.update_status(graph.job_id, "RUNNING", time.time())
        for _ in range(3):  # three JobManagers died recovering it
            store.begin_recovery(graph.job_id)

    with StandaloneCluster(tmp_path / "cluster") as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert client.wait(graph.job_id, timeout=30).value == "FAILED"
            root = client.exceptions(graph.job_id)["root-exception"]
            assert "never reached RUNNING" in root and "jobmanager.recovery.max-attempts" in root
            assert client.overview()["jobs-running"] == 0

        cluster.jobmanager.kill()  # and it stays given up
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert client.status(graph.job_id).value == "FAILED"
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT status FROM jobs").fetchall() == [("FAILED",)]


def test_a_recovered_job_that_runs_starts_its_count_again(tmp_path: Path) -> None:
    database = tmp_path / "cluster" / "jobstore.db"
    # One attempt allowed, two recoveries: the second is refused unless the first one's
    # attempt was forgotten when its job reached RUNNING (a JobManager start costs seconds).
    properties = {"jobmanager.recovery.max-attempts": 1}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=2)
        graph = sleep_job(60, name="survives restarts")
        # The killed JobManager's task may still hold its slot when the recovered job
        # deploys again; a restart covers that race, which is not what is tested here.
        graph.config.update({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "200 ms"})
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(graph)
        for _ in range(2):  # more restarts than jobmanager.recovery.max-attempts
            cluster.jobmanager.kill()
            cluster.start_jobmanager()
            with JobClient(cluster.rest_url, timeout=30) as client:
                deadline = time.monotonic() + 30
                while client.status(job_id).value != "RUNNING" and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert client.status(job_id).value == "RUNNING", client.exceptions(job_id)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with sqlite3.connect(database) as connection:
                if connection.execute("SELECT count(*) FROM recovery_attempts").fetchone()[0] == 0:
                    break
            time.sleep(0.1)
        with sqlite3.connect(database) as connection:
            assert connection.execute("SELECT count(*) FROM recovery_attempts").fetchone()[0] == 0


def test_a_second_jobmanager_on_the_same_store_refuses_to_start(tmp_path: Path) -> None:
    """Without standbys (high-availability.type: NONE) one JobManager holds its job store:
    a second one started on it would recover the first's jobs and run them beside it. It
    exits with the holder named instead; the holder's kill -9 frees the store at once."""
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(sleep_job(60, name="owned by the first JobManager"))
        rpc_port, rest_port = free_ports(2)
        with pytest.raises(RuntimeError) as refused:
            cluster.start_jobmanager(name="jobmanager-2", **{"jobmanager.rpc.port": rpc_port, "rest.port": rest_port})
        message = str(refused.value)
        assert "exited with 1" in message, message
        assert f"is in use by the JobManager with pid {cluster.jobmanager.pid}" in message, message
        assert "high-availability.type: database" in message  # what to do instead
        assert "Traceback" not in message
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert job_id in {job["jid"] for job in client.list_jobs()}  # the first one runs on

        cluster.jobmanager.kill()  # SIGKILL: nothing released the lock but the kernel
        cluster.start_jobmanager(timeout=30)
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert job_id in {job["jid"] for job in client.list_jobs()}  # recovered by the new one
