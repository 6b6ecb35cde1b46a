"""A JobManager and two TaskManagers as real processes started through the CLI."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner
from flink_runtime.rpc.messages import (
    AlreadyRegistered,
    RefuseRegistration,
    RegisterTaskManager,
)
from flink_runtime.rpc.service import AskTimeoutError, RpcService

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}

FAST = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "2 s",
    "security.cluster.secret": "s3cret",
    "slot.request.timeout": "3 s",
    "task.cancellation.interval": "300 ms",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), properties=dict(FAST)) as started:
        started.start(taskmanagers=2, slots=2)
        yield started


def wait_for_state(rest_url: str, job_id: str, states: set[str], timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        details = httpx.get(f"{rest_url}/jobs/{job_id}").json()
        if details["state"] in states:
            return details
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {details['state']} after {timeout} s")
        time.sleep(0.05)


def submit(rest_url: str, graph: JobGraph) -> str:
    response = httpx.post(f"{rest_url}/jobs", content=graph.to_json(), headers=JSON, timeout=30)
    assert response.status_code == 202, response.text
    return response.json()["jobid"]


def sum_job(output: Path, count: int = 10_000) -> JobGraph:
    graph = JobGraph(
        name="modulo sum",
        vertices=[
            JobVertex(
                id="numbers", name="Numbers", invokable="number-source", parallelism=2,
                config={"count": count, "splits": 8, "modulo": 7},
            ),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=3),
            JobVertex(id="sink", name="Sink", invokable="collect-sink", parallelism=1, config={"path": str(output)}),
        ],
    )  # fmt: skip
    graph.connect("numbers", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    return graph


async def register(rpc_address: str, rpc_secret: str = FAST["security.cluster.secret"], **fields) -> object:
    rpc = RpcService(cluster_secret=rpc_secret)
    await rpc.start(lambda message, reply: None)
    try:
        request = RegisterTaskManager(
            **{"task_manager_id": "probe", "address": rpc.address, "host": "127.0.0.1", "slots": 1, **fields}
        )
        return await rpc.ask(rpc_address, request, 5.0)
    finally:
        await rpc.close()


def test_two_taskmanagers_register_with_their_slots(cluster: StandaloneCluster) -> None:
    overview = httpx.get(f"{cluster.rest_url}/overview").json()
    assert overview["taskmanagers"] == 2
    assert overview["slots-total"] == 4
    ids = {tm["id"] for tm in httpx.get(f"{cluster.rest_url}/taskmanagers").json()["taskmanagers"]}
    assert ids == {"tm-0", "tm-1"}


def test_same_taskmanager_again_is_already_registered(cluster: StandaloneCluster) -> None:
    registered = httpx.get(f"{cluster.rest_url}/taskmanagers/tm-0").json()
    answer = asyncio.run(
        register(
            cluster.jobmanager.rpc_address,
            task_manager_id="tm-0",
            address=registered["path"],
            secret="s3cret",
        )
    )
    assert isinstance(answer, AlreadyRegistered)
    assert httpx.get(f"{cluster.rest_url}/overview").json()["taskmanagers"] == 2


def test_wrong_secret_is_refused(cluster: StandaloneCluster) -> None:
    # Over CURVE keyed by the right secret, a registration naming another is refused...
    answer = asyncio.run(register(cluster.jobmanager.rpc_address, secret="wrong"))
    assert isinstance(answer, RefuseRegistration)
    assert "security.cluster.secret" in answer.reason
    # ...and with the wrong secret's keys the JobManager never hears it at all.
    with pytest.raises(AskTimeoutError):
        asyncio.run(register(cluster.jobmanager.rpc_address, rpc_secret="wrong", secret="wrong"))


def test_incompatible_protocol_version_is_refused(cluster: StandaloneCluster) -> None:
    answer = asyncio.run(register(cluster.jobmanager.rpc_address, secret="s3cret", protocol_version=999))
    assert isinstance(answer, RefuseRegistration)
    assert "protocol version 999" in answer.reason


def test_taskmanager_process_with_wrong_secret_never_joins(cluster: StandaloneCluster) -> None:
    intruder = cluster.start_taskmanager("intruder", wait=False, **{"security.cluster.secret": "nope"})
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and "security.cluster.secret" not in intruder.log():
            time.sleep(0.05)
        assert "RPC handshake with" in intruder.log() and "security.cluster.secret" in intruder.log()
        ids = {tm["id"] for tm in httpx.get(f"{cluster.rest_url}/taskmanagers").json()["taskmanagers"]}
        assert "intruder" not in ids
    finally:
        intruder.terminate()
        cluster.taskmanagers.remove(intruder)


def test_multi_vertex_job_finishes_with_correct_output(cluster: StandaloneCluster, tmp_path: Path) -> None:
    job_id = submit(cluster.rest_url, sum_job(tmp_path / "out"))
    details = wait_for_state(cluster.rest_url, job_id, {"FINISHED", "FAILED", "CANCELED"})
    assert details["state"] == "FINISHED", httpx.get(f"{cluster.rest_url}/jobs/{job_id}/exceptions").text
    assert [v["status"] for v in details["vertices"]] == ["FINISHED"] * 3
    records = json.loads((tmp_path / "out" / "part-0.json").read_text())
    expected = {key: sum(n for n in range(10_000) if n % 7 == key) for key in range(7)}
    assert {r["key"]: r["sum"] for r in records} == expected
    events = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/events").json()["events"]
    assert [e["new-state"] for e in events] == ["CREATED", "RUNNING", "FINISHED"]


def test_cancel_mid_run(cluster: StandaloneCluster) -> None:
    graph = JobGraph(
        name="sleepy",
        vertices=[JobVertex(id="sleep", name="Sleep", invokable="sleep", parallelism=3, config={"seconds": 60})],
    )
    job_id = submit(cluster.rest_url, graph)
    wait_for_state(cluster.rest_url, job_id, {"RUNNING"})
    response = httpx.patch(f"{cluster.rest_url}/jobs/{job_id}", params={"mode": "cancel"})
    assert response.status_code == 202
    details = wait_for_state(cluster.rest_url, job_id, {"CANCELED", "FAILED", "FINISHED"}, timeout=10)
    assert details["state"] == "CANCELED"
    assert details["vertices"][0]["tasks"]["CANCELED"] == 3
    # The slots are free again.
    assert httpx.get(f"{cluster.rest_url}/overview").json()["slots-available"] == 4


def test_task_ignoring_cancel_is_interrupted(cluster: StandaloneCluster) -> None:
    graph = JobGraph(
        name="stubborn",
        vertices=[
            JobVertex(
                id="sleep", name="Stubborn", invokable="sleep", parallelism=1,
                config={"seconds": 60, "ignore_cancel": True},
            )
        ],
    )  # fmt: skip
    job_id = submit(cluster.rest_url, graph)
    wait_for_state(cluster.rest_url, job_id, {"RUNNING"})
    started = time.monotonic()
    httpx.patch(f"{cluster.rest_url}/jobs/{job_id}", params={"mode": "cancel"})
    details = wait_for_state(cluster.rest_url, job_id, {"CANCELED"}, timeout=10)
    assert details["state"] == "CANCELED"
    assert time.monotonic() - started < 5


def test_failure_reaches_the_exceptions_endpoint(cluster: StandaloneCluster) -> None:
    graph = JobGraph(
        name="failing",
        vertices=[JobVertex(id="f", name="Fail", invokable="fail", config={"message": "bad record 42"})],
    )
    job_id = submit(cluster.rest_url, graph)
    assert wait_for_state(cluster.rest_url, job_id, {"FAILED", "FINISHED"})["state"] == "FAILED"
    exceptions = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/exceptions").json()
    assert "bad record 42" in exceptions["root-exception"]
    assert exceptions["exceptionHistory"]["entries"][0]["taskName"] == "Fail (1/1)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"name": "x", "vertices": [', "not valid JSON"),
        (
            b'{"name": "x", "vertices": [{"id": "a", "name": "A", "invokable": "noop", "parallelism": 0}]}',
            "parallelism",
        ),
        (b'{"name": "x", "vertices": [{"id": "a", "name": "A", "invokable": "nope"}]}', "unknown invokable"),
        (
            b'{"name": "x", "vertices": [{"id": "a", "name": "A", "invokable": "noop"},'
            b' {"id": "b", "name": "B", "invokable": "noop"}],'
            b' "intermediate_datasets": [{"id": "ab", "producer": "a"}, {"id": "ba", "producer": "b"}],'
            b' "edges": [{"source": "ab", "target": "b"}, {"source": "ba", "target": "a"}]}',
            "cycle",
        ),
    ],
)
def test_bad_job_graphs_get_400_and_the_jobmanager_keeps_serving(
    cluster: StandaloneCluster, body: bytes, expected: str
) -> None:
    response = httpx.post(f"{cluster.rest_url}/jobs", content=body, headers=JSON)
    assert response.status_code == 400
    assert expected in " ".join(response.json()["errors"])
    assert httpx.get(f"{cluster.rest_url}/overview").status_code == 200


def test_unknown_job_is_404(cluster: StandaloneCluster) -> None:
    response = httpx.get(f"{cluster.rest_url}/jobs/{'0' * 32}")
    assert response.status_code == 404
    assert response.json()["errors"]


def test_more_subtasks_than_slots_run_in_waves(cluster: StandaloneCluster) -> None:
    # 6 subtasks of 4 s on 4 slots: two wait for a slot, well past slot.request.timeout (3 s).
    graph = JobGraph(
        name="wider than the cluster",
        vertices=[JobVertex(id="sleep", name="Sleep", invokable="sleep", parallelism=6, config={"seconds": 4})],
    )
    job_id = submit(cluster.rest_url, graph)
    details = wait_for_state(cluster.rest_url, job_id, {"FAILED", "FINISHED", "CANCELED"}, timeout=60)
    assert details["state"] == "FINISHED"


def test_slots_that_never_arrive_fail_the_job(tmp_path: Path) -> None:
    with StandaloneCluster(tmp_path, properties=dict(FAST)) as no_taskmanagers:
        no_taskmanagers.start_jobmanager()
        graph = JobGraph(name="nowhere to run", vertices=[JobVertex(id="noop", name="NoOp", invokable="noop")])
        response = httpx.post(f"{no_taskmanagers.rest_url}/jobs", content=graph.to_json(), headers=JSON, timeout=30)
        job_id = response.json()["jobid"]
        details = wait_for_state(no_taskmanagers.rest_url, job_id, {"FAILED", "FINISHED", "CANCELED"}, timeout=20)
        root = httpx.get(f"{no_taskmanagers.rest_url}/jobs/{job_id}/exceptions").json()["root-exception"]
    assert details["state"] == "FAILED"
    assert "NoResourceAvailableException" in root and "slot.request.timeout (3 s)" in root


def test_killed_taskmanager_is_detected_and_fails_the_job(cluster: StandaloneCluster) -> None:
    """Runs last in this module: it takes a TaskManager away."""
    graph = JobGraph(
        name="victim",
        vertices=[JobVertex(id="sleep", name="Sleep", invokable="sleep", parallelism=4, config={"seconds": 60})],
    )
    job_id = submit(cluster.rest_url, graph)
    wait_for_state(cluster.rest_url, job_id, {"RUNNING"})
    victim = cluster.taskmanagers[0]
    killed_at = time.monotonic()
    victim.kill()
    details = wait_for_state(cluster.rest_url, job_id, {"FAILED", "CANCELED", "FINISHED"}, timeout=15)
    detected_after = time.monotonic() - killed_at
    assert details["state"] == "FAILED"
    assert detected_after < 2.0 + 2.0  # heartbeat.timeout plus scheduling slack
    root = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/exceptions").json()["root-exception"]
    assert "TaskManager tm-0" in root and "lost" in root
    ids = {tm["id"] for tm in httpx.get(f"{cluster.rest_url}/taskmanagers").json()["taskmanagers"]}
    assert ids == {"tm-1"}


def test_closed_connection_is_noticed_long_before_the_heartbeat_timeout(tmp_path: Path) -> None:
    properties = {"heartbeat.interval": "10 s", "heartbeat.timeout": "60 s"}
    with StandaloneCluster(tmp_path, properties=properties) as slow_heartbeats:
        slow_heartbeats.start(taskmanagers=1, slots=1)
        killed_at = time.monotonic()
        slow_heartbeats.taskmanagers[0].kill()
        slow_heartbeats.wait_for_taskmanagers(lambda ids: not ids, timeout=10)
        assert time.monotonic() - killed_at < 5
        assert "connection closed" in slow_heartbeats.jobmanager.log()
