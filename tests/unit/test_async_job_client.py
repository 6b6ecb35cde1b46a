"""AsyncJobClient, JobClient's twin on an event loop: the same methods, and the same
answers and errors from a real REST API (the session's MiniCluster, a JobManager with a
REST token, a port nobody listens on). Both clients send the calls of client/calls.py
and run the plans of client/plans.py; tests/unit/test_job_client.py covers those in
detail through JobClient (retries, bodies, savepoint failures)."""

from __future__ import annotations

import inspect
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import (
    AsyncJobClient,
    ClusterUnreachable,
    JobClient,
    JobNotFound,
    RestClientError,
)
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config
from tests.helpers.jobs import sleep_job

TOKEN = "async-client-s3cret"
UNKNOWN_JOB = "0123456789abcdef0123456789abcdef"


def noop_graph() -> JobGraph:
    return JobGraph(name="noop", vertices=[JobVertex(id="n", name="N", invokable="noop")])


class CountingTransport(httpx.AsyncBaseTransport):
    """The real network transport, counting the requests that go through it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def client(minicluster: MiniCluster) -> AsyncIterator[AsyncJobClient]:
    async with AsyncJobClient(minicluster.rest_url, timeout=10) as async_client:
        yield async_client


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[MiniCluster]:
    """A JobManager whose REST API asks for a token (no TaskManagers: no job runs here)."""
    with MiniCluster(fast_config(**{"security.rest.token": TOKEN}), num_taskmanagers=0) as cluster:
        yield cluster


# -- the twin ------------------------------------------------------------------------------------------


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in ("close", "aclose")
    }


def test_the_async_client_has_every_method_of_the_blocking_one_with_the_same_arguments() -> None:
    blocking, awaiting = _public_methods(JobClient), _public_methods(AsyncJobClient)
    assert sorted(awaiting) == sorted(blocking)
    for name, signature in blocking.items():
        assert list(awaiting[name].parameters) == list(signature.parameters), name
        assert [p.default for p in awaiting[name].parameters.values()] == [
            p.default for p in signature.parameters.values()
        ], name
        method = getattr(AsyncJobClient, name)
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name
    constructor = list(inspect.signature(AsyncJobClient.__init__).parameters)
    assert constructor == list(inspect.signature(JobClient.__init__).parameters)


# -- against a real cluster -------------------------------------------------------------------------------


@pytest.mark.integration
async def test_a_job_submitted_and_followed_asynchronously_reads_as_the_blocking_client_reads_it(
    client: AsyncJobClient, minicluster: MiniCluster
) -> None:
    job_id = await client.submit(noop_graph())
    transitions: list[JobStatus] = []
    assert await client.wait(job_id, timeout=60, on_event=lambda event: transitions.append(event.new_state)) == (
        JobStatus.FINISHED
    )
    assert transitions == [JobStatus.CREATED, JobStatus.RUNNING, JobStatus.FINISHED]
    assert [event.new_state async for event in client.events(job_id, poll_timeout=1)] == transitions

    with JobClient(minicluster.rest_url, timeout=10) as blocking:
        assert await client.status(job_id) is blocking.status(job_id) is JobStatus.FINISHED
        details = await client.details(job_id)
        assert (details["jid"], details["state"]) == (job_id, "FINISHED")
        assert [v["name"] for v in details["vertices"]] == [v["name"] for v in blocking.details(job_id)["vertices"]]
        assert await client.exceptions(job_id) == blocking.exceptions(job_id)
        assert await client.accumulators(job_id) == blocking.accumulators(job_id)
        assert await client.poll_events(job_id) == blocking.poll_events(job_id)
    assert any(job["jid"] == job_id for job in await client.list_jobs())
    overview = await client.overview()
    assert overview["taskmanagers"] == len(await client.taskmanagers()) == 2


@pytest.mark.integration
async def test_savepoint_wait_for_a_state_and_cancel_asynchronously(client: AsyncJobClient, tmp_path: Path) -> None:
    job_id = await client.submit(sleep_job(30))
    assert await client.wait_for_state(job_id, ["RUNNING"], timeout=30) is JobStatus.RUNNING
    location = await client.savepoint(job_id, str(tmp_path / "savepoints"), timeout=30)
    assert Path(location, "_metadata").exists()

    await client.cancel(job_id)
    assert await client.wait_for_state(job_id, ["CANCELED"], timeout=30) is JobStatus.CANCELED
    await client.cancel(job_id)  # acknowledged again, as Flink does


@pytest.mark.integration
async def test_the_jobmanagers_refusals_are_the_blocking_clients_errors(client: AsyncJobClient) -> None:
    with pytest.raises(JobNotFound) as unknown:
        await client.details(UNKNOWN_JOB)
    assert unknown.value.status_code == 404 and UNKNOWN_JOB in str(unknown.value)
    assert (unknown.value.method, unknown.value.path) == ("GET", f"/jobs/{UNKNOWN_JOB}")
    with pytest.raises(JobNotFound):  # no events, and no archived job either
        await client.wait(UNKNOWN_JOB, timeout=5)

    job_id = await client.submit(noop_graph())
    await client.wait(job_id, timeout=60)
    with pytest.raises(RestClientError) as ended:
        await client.cancel(job_id)
    assert ended.value.status_code == 409 and "FINISHED" in str(ended.value)
    with pytest.raises(RestClientError) as invalid:
        await client.submit({"name": "b", "vertices": [{"id": "broken-vertex", "name": "B", "invokable": "nope"}]})
    assert invalid.value.status_code == 400 and "broken-vertex" in str(invalid.value)
    with pytest.raises(ValueError, match="no-such-file.json"):  # before any request
        await client.submit(str(Path("no-such-file.json")))


async def test_without_the_token_the_answer_is_401_naming_the_setting_and_is_not_retried(
    token_cluster: MiniCluster,
) -> None:
    transport = CountingTransport()
    async with AsyncJobClient(token_cluster.rest_url, retries=3, backoff=0, transport=transport) as anonymous:
        with pytest.raises(RestClientError) as refused:
            await anonymous.overview()
    assert refused.value.status_code == 401 and "security.rest.token" in str(refused.value)
    assert len(transport.requests) == 1
    async with AsyncJobClient(token_cluster.rest_url, token=TOKEN) as trusted:
        assert (await trusted.overview())["taskmanagers"] == 0
        with pytest.raises(JobNotFound):
            await trusted.status(UNKNOWN_JOB)


async def test_a_refused_connection_is_cluster_unreachable_naming_the_address_after_the_retries() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = CountingTransport()
    async with AsyncJobClient(f"127.0.0.1:{port}", retries=2, backoff=0, transport=transport) as nowhere:
        with pytest.raises(ClusterUnreachable) as unreachable:
            await nowhere.wait(UNKNOWN_JOB, timeout=5)
    assert f"http://127.0.0.1:{port}" in str(unreachable.value) and "ConnectError" in str(unreachable.value)
    assert len(transport.requests) == 3


# -- a job that left the live jobs ----------------------------------------------------------------------


def archived_answers(request: httpx.Request) -> httpx.Response:
    """A JobManager that archived the job: no events (404), its final state at GET /jobs/:id."""
    if request.url.path.endswith("/events"):
        return httpx.Response(404, json={"errors": [f"Job {UNKNOWN_JOB} not found"]})
    return httpx.Response(200, json={"jid": UNKNOWN_JOB, "state": "FAILED"})


def test_a_blocking_wait_on_an_archived_job_answers_its_state() -> None:
    with JobClient("jm:8081", transport=httpx.MockTransport(archived_answers)) as blocking:
        assert blocking.wait(UNKNOWN_JOB, timeout=5) is JobStatus.FAILED
        assert blocking.wait_for_state(UNKNOWN_JOB, ["RUNNING"], timeout=5) is JobStatus.FAILED


async def test_an_async_wait_on_an_archived_job_answers_its_state() -> None:
    async with AsyncJobClient("jm:8081", transport=httpx.MockTransport(archived_answers)) as awaiting:
        assert await awaiting.wait(UNKNOWN_JOB, timeout=5) is JobStatus.FAILED


def test_a_plan_resumes_with_each_answer_and_sees_the_errors_where_it_asked() -> None:
    from flink_runtime.client import calls
    from flink_runtime.client.plans import Plan

    def plan() -> Plan[list[Any]]:
        seen: list[Any] = []
        try:
            yield calls.job_details(UNKNOWN_JOB)
        except JobNotFound as exc:
            seen.append(exc.status_code)
        seen.append((yield calls.cluster_overview())["taskmanagers"])
        return seen

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/overview":
            return httpx.Response(200, json={"taskmanagers": 7})
        return httpx.Response(404, json={"errors": ["unknown"]})

    with JobClient("jm:8081", transport=httpx.MockTransport(answer)) as blocking:
        assert blocking.run(plan()) == [404, 7]
