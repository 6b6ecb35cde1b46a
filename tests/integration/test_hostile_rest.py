"""Hostile input against every REST endpoint of a real JobManager.

Hypothesis generates JobGraphs, job configs, savepoint bodies, path segments and query
parameters, mostly almost-right (the shapes a confused or malicious client sends); each
goes over HTTP to the session's MiniCluster. Every answer must be a success or a 4xx
with `{"errors": [...]}`, never a 5xx, never a hang; the JobManager answers afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph import JobGraph
from flink_runtime.jobmanager.jobstore import JobStore
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True
)
JSON_HEADERS = {"Content-Type": "application/json"}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
config_keys = st.sampled_from(
    [
        "parallelism.default",
        "state.checkpoints.num-retained",
        "state.backend.type",
        "execution.checkpointing.interval",
        "execution.checkpointing.timeout",
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "jobmanager.execution.failover-strategy",
        "execution.savepoint.path",
        "execution.savepoint.ignore-unclaimed-state",
        "slot.request.timeout",
        "rest.port",
        "security.rest.token",
        "state.savepoints.dir",
    ]
) | st.text(max_size=30)
vertices = st.fixed_dictionaries(
    {
        "id": st.text(max_size=6) | st.sampled_from(["a", "b"]),
        "name": st.text(max_size=6),
        # noop runs at once: an accepted job ends by itself.
        "invokable": st.sampled_from(["noop", "no-such-thing", "pkg.mod:Cls", "sys:exit", ""]) | st.text(max_size=12),
        "parallelism": st.integers(min_value=-3, max_value=2) | st.integers(min_value=2**31) | scalars,
        "config": st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values,
    },
    optional={"max_parallelism": scalars, "slot_sharing_group": scalars},
)
job_graphs = st.fixed_dictionaries(
    {"name": st.text(max_size=10) | scalars, "vertices": st.lists(vertices, max_size=3) | json_values},
    optional={
        "config": st.dictionaries(config_keys, scalars | json_values, max_size=4) | json_values,
        "job_id": st.text(max_size=40) | st.sampled_from(["0" * 32]),
        "edges": json_values,
        "intermediate_datasets": json_values,
        "libraries": st.lists(st.text(max_size=20), max_size=2) | json_values,
    },
)
segments = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="/?#"), min_size=1, max_size=40
) | st.sampled_from(["0" * 32, "..", "%2e%2e", "00000000000000000000000000000000/../x"])


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'jobstore.db'}"


@pytest.fixture(scope="module")
def minicluster(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[MiniCluster]:
    """This module's own cluster, with a job store: it must stay readable afterwards."""
    config = fast_config(**{"io.tmp.dirs": str(tmp_path_factory.mktemp("hostile-data")), "jobstore.url": store_url})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def http(minicluster: MiniCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=minicluster.rest_url, timeout=30) as client:
        yield client


def assert_answered_well(answer: httpx.Response) -> Any:
    assert answer.status_code < 500, (answer.request.method, str(answer.request.url), answer.text[:500])
    if answer.status_code >= 400:
        body = answer.json()
        assert isinstance(body["errors"], list) and body["errors"], answer.text[:500]
        assert all(isinstance(error, str) and error for error in body["errors"])
    return answer


def cancel_if_accepted(http: httpx.Client, answer: httpx.Response) -> None:
    if answer.status_code == 202 and "jobid" in answer.json():
        http.patch(f"/jobs/{answer.json()['jobid']}", params={"mode": "cancel"})


@SETTINGS
@given(graph=job_graphs)
def test_generated_job_graphs(http: httpx.Client, graph: dict[str, Any]) -> None:
    answer = assert_answered_well(http.post("/jobs", content=json.dumps(graph), headers=JSON_HEADERS))
    cancel_if_accepted(http, answer)


@SETTINGS
@given(body=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_generated_bodies_that_are_barely_json(http: httpx.Client, body: bytes) -> None:
    for path in ("/jobs", f"/jobs/{'0' * 32}/savepoints", f"/jobs/{'0' * 32}/stop"):
        cancel_if_accepted(http, assert_answered_well(http.post(path, content=body, headers=JSON_HEADERS)))


@SETTINGS
@given(job_id=segments, other=segments, body=json_values)
def test_generated_path_segments_and_savepoint_bodies(http: httpx.Client, job_id: str, other: str, body: Any) -> None:
    quoted, other_quoted = quote(job_id, safe=""), quote(other, safe="")
    for method, path in (
        ("GET", f"/jobs/{quoted}"),
        ("GET", f"/jobs/{quoted}/plan"),
        ("GET", f"/jobs/{quoted}/exceptions"),
        ("GET", f"/jobs/{quoted}/checkpoints"),
        ("GET", f"/jobs/{quoted}/vertices/{other_quoted}"),
        ("GET", f"/jobs/{quoted}/savepoints/{other_quoted}"),
        ("GET", f"/taskmanagers/{quoted}"),
        ("GET", f"/blobs/{quoted}/{other_quoted}"),
        ("PATCH", f"/jobs/{quoted}?mode=cancel"),
    ):
        assert_answered_well(http.request(method, path))
    for path in (f"/jobs/{quoted}/savepoints", f"/jobs/{quoted}/stop"):
        assert_answered_well(http.post(path, content=json.dumps(body), headers=JSON_HEADERS))


@SETTINGS
@given(since=st.text(max_size=30) | st.integers().map(str), timeout=st.text(max_size=10), count=st.text(max_size=25))
def test_generated_query_parameters(http: httpx.Client, since: str, timeout: str, count: str) -> None:
    job_id = "0" * 32
    assert_answered_well(http.get(f"/jobs/{job_id}/events", params={"since": since, "timeout": timeout}))
    assert_answered_well(http.get(f"/jobs/{job_id}/exceptions", params={"maxExceptions": count}))
    assert_answered_well(http.patch(f"/jobs/{job_id}", params={"mode": since}))
    assert_answered_well(http.post("/blobs", params={"name": since}, content=b"x = 1\n",
                                   headers={"Content-Type": "application/octet-stream"}))  # fmt: skip


def test_the_jobmanager_still_answers_afterwards(http: httpx.Client, minicluster: MiniCluster) -> None:
    overview = http.get("/overview")
    assert overview.status_code == 200
    assert overview.json()["taskmanagers"] == len(minicluster.taskmanagers)
    with JobClient(minicluster.rest_url) as client:  # and still runs jobs
        assert client.wait(client.submit(sleep_job(0.1, name="after the storm")), timeout=60).value == "FINISHED"


def test_the_job_store_is_readable_afterwards(http: httpx.Client, store_url: str) -> None:
    store = JobStore.from_config(Configuration({"jobstore.url": store_url}))
    try:
        records = store.recoverable_jobs() + store.archived_jobs()
        assert any(record.name == "after the storm" for record in records)
        for record in records:  # every stored graph decodes: nothing half-written
            assert JobGraph.from_json(record.job_graph_json).job_id == record.job_id
    finally:
        store.close()
