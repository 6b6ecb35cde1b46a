"""Stress: TaskManager processes come and go, SIGKILLed or stopped, against one JobManager.

After many TaskManagers have come and gone, a JobManager must still accept connections
on its RPC port: were its ZeroMQ I/O thread blocked in a socket-monitor send
(rpc/service.py, `disconnect`), new TaskManagers would say ready and never register. Here rounds of TaskManager
processes register and leave (half SIGKILL, half SIGTERM, all at once), and then the
JobManager must still do everything a fresh one does: notice each leaving TaskManager
without waiting for the heartbeat timeout, register a new one within seconds, run a
job, and hold no sockets for the TaskManagers that left.

The in-process version (many more cycles, and the one that reproduces the hang
reliably) is tests/unit/test_rpc_stress.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster
from flink_runtime.executiongraph.states import JobStatus
from tests.helpers.jobs import modulo_sum_job

pytestmark = pytest.mark.integration

ROUNDS = 3
TASKMANAGERS_PER_ROUND = 6
PROPERTIES = {
    # A heartbeat timeout far above the waits below: a TaskManager that leaves must be
    # noticed through its connection (or its goodbye), the path a blocked I/O thread breaks.
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "60 s",
    "slot.request.timeout": "10 s",
}


def registered_ids(cluster: StandaloneCluster) -> set[str]:
    answer = httpx.get(f"{cluster.rest_url}/taskmanagers", timeout=5).json()
    return {tm["id"] for tm in answer["taskmanagers"]}


def start_taskmanagers(cluster: StandaloneCluster, ids: list[str], slots: int = 1) -> list[ClusterProcess]:
    """Start processes in parallel (each takes about a second to import and bind)."""
    with ThreadPoolExecutor(len(ids)) as pool:
        started = pool.map(
            lambda tm_id: cluster.start_taskmanager(tm_id, wait=False, **{"taskmanager.numberOfTaskSlots": slots}),
            ids,
        )
        return list(started)


def wait_for_ids(cluster: StandaloneCluster, condition: Callable[[set[str]], bool], what: str, timeout: float) -> float:
    """Seconds until the JobManager's registered TaskManagers satisfy `condition`."""
    began = time.monotonic()
    try:
        cluster.wait_for_taskmanagers(condition, timeout=timeout)
    except TimeoutError:
        raise AssertionError(
            f"{what} within {timeout} s; JobManager log:\n{cluster.jobmanager.log()[-3000:]}"
        ) from None
    return time.monotonic() - began


def churn_round(cluster: StandaloneCluster, round_number: int) -> None:
    ids = {f"churn-{round_number}-{index}" for index in range(TASKMANAGERS_PER_ROUND)}
    processes = start_taskmanagers(cluster, sorted(ids))
    wait_for_ids(cluster, lambda registered: ids <= registered, f"round {round_number}: not all registered", 20)
    # Half crash, half shut down cleanly, all at the same moment.
    for index, process in enumerate(processes):
        if index % 2:
            process.process.terminate()
        else:
            process.kill()
    for process in processes:
        process.terminate()  # waits for the SIGTERMed ones to exit
    wait_for_ids(cluster, lambda registered: not ids & registered, f"round {round_number}: not all removed", 10)


def test_jobmanager_keeps_accepting_after_taskmanagers_churn(tmp_path: Path) -> None:
    with StandaloneCluster(tmp_path, properties=dict(PROPERTIES)) as cluster:
        jobmanager = psutil.Process(cluster.start_jobmanager().pid)
        # One job first, so the JobManager's planner process (and its pipes) exists
        # before the descriptors are counted.
        first = start_taskmanagers(cluster, ["first"], slots=2)[0]
        wait_for_ids(cluster, lambda registered: registered == {"first"}, "the first TaskManager did not come", 10)
        with JobClient(cluster.rest_url) as client:
            job_id = client.submit(modulo_sum_job(tmp_path / "first-out"))
            assert client.wait(job_id, timeout=60) is JobStatus.FINISHED, client.exceptions(job_id)
        first.terminate()
        wait_for_ids(cluster, lambda registered: not registered, "the first TaskManager was not removed", 10)
        time.sleep(1.0)  # ZeroMQ reaps the closed sockets in the background
        descriptors_at_start = jobmanager.num_fds()
        began = time.monotonic()
        for round_number in range(ROUNDS):
            churn_round(cluster, round_number)
        churned = ROUNDS * TASKMANAGERS_PER_ROUND
        churn_seconds = time.monotonic() - began

        # A newcomer registers within seconds (with a blocked I/O thread: never), and a job runs on it.
        newcomer = start_taskmanagers(cluster, ["newcomer"], slots=2)[0]
        registration = wait_for_ids(
            cluster, lambda registered: registered == {"newcomer"}, f"after {churned} TaskManagers: no newcomer", 5
        )
        output = tmp_path / "out"
        with JobClient(cluster.rest_url) as client:
            job_id = client.submit(modulo_sum_job(output))
            assert client.wait(job_id, timeout=30) is JobStatus.FINISHED, client.exceptions(job_id)
        records = json.loads((output / "part-0.json").read_text())
        assert {r["key"]: r["sum"] for r in records} == {k: sum(n for n in range(1000) if n % 3 == k) for k in range(3)}

        newcomer.terminate()
        wait_for_ids(cluster, lambda registered: not registered, "the newcomer was not removed", 10)
        log = cluster.jobmanager.log()
        assert log.count("removed:") == churned + 2, log[-3000:]  # and the first and the newcomer

        # Nothing is held for the TaskManagers that left, now all of them. A connection costs
        # the JobManager five descriptors (DEALER, TCP socket, both monitor PAIRs, the
        # ROUTER's side), so a leak would add dozens; ZeroMQ reaps closed sockets in the
        # background, hence the wait.
        deadline = time.monotonic() + 5
        while (descriptors_now := jobmanager.num_fds()) > descriptors_at_start + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert descriptors_now <= descriptors_at_start + 3, (descriptors_at_start, descriptors_now)

        print(
            f"{churned} TaskManager processes churned in {churn_seconds:.1f} s "
            f"({churned / churn_seconds:.2f}/s); newcomer registered {registration * 1e3:.0f} ms after ready; "
            f"JobManager descriptors {descriptors_at_start} -> {descriptors_now}"
        )
