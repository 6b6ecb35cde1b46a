"""FlinkRuntimeHook: connections, retries and error mapping (mocked HTTP), and the real REST API."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.airflow.exceptions import (
    FlinkRuntimeApiError,
    FlinkRuntimeClusterUnreachable,
    FlinkRuntimeException,
    FlinkRuntimeInvalidInput,
    FlinkRuntimeJobNotFound,
    FlinkRuntimeSavepointFailed,
    FlinkRuntimeTimeout,
)
from flink_runtime.airflow.hooks import connection as connection_module
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.job_states import decisive_state
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex

JOB_ID = "0123456789abcdef0123456789abcdef"
CONN_ID = "flink_runtime_test"


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``connection(host=..., port=..., extra={...})`` defines CONN_ID through the environment."""

    def define(**fields: Any) -> str:
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({"conn_type": "flink_runtime", **fields}))
        return CONN_ID

    return define


class Recorder:
    """An httpx handler answering from a list (the last answer repeats) and keeping the requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def mocked_hook(connection: Callable[..., str], recorder: Recorder, **conn_fields: Any) -> FlinkRuntimeHook:
    conn_id = connection(**({"host": "jm.example.com", "port": 8081} | conn_fields))
    transport = httpx.MockTransport(recorder)
    return FlinkRuntimeHook(conn_id, retry_delay=0, transport=transport, async_transport=transport)


def job(state: str) -> httpx.Response:
    return httpx.Response(200, json={"jid": JOB_ID, "name": "j", "state": state})


def errors(status: int, *messages: str) -> httpx.Response:
    return httpx.Response(status, json={"errors": list(messages)})


# -- the connection --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "rest_url"),
    [
        ({"host": "jm.example.com", "port": 8081}, "http://jm.example.com:8081"),
        ({"host": "jm"}, "http://jm:8081"),
        ({"host": "jm", "port": 443, "schema": "https"}, "https://jm:443"),
        ({"host": "jm", "port": 9000, "extra": {"https": True}}, "https://jm:9000"),
        ({"host": "jm", "port": 9000, "extra": {"https": "false"}}, "http://jm:9000"),
        ({"host": "https://flink.example.com/api/"}, "https://flink.example.com/api"),
        ({"host": "http://jm", "port": 8082}, "http://jm:8082"),
    ],
)
def test_the_rest_url_comes_from_host_port_and_scheme(
    connection: Callable[..., str], fields: dict[str, Any], rest_url: str
) -> None:
    assert FlinkRuntimeHook(connection(**fields)).rest_url == rest_url


def test_token_tls_and_timeout_come_from_the_connection(connection: Callable[..., str]) -> None:
    conn_id = connection(host="jm", password="s3cret", extra={"verify_tls": False, "timeout": 7})
    settings = FlinkRuntimeHook(conn_id)._get_settings()
    assert (settings.token, settings.verify, settings.timeout) == ("s3cret", False, 7.0)
    assert FlinkRuntimeHook(conn_id, timeout=2)._get_settings().timeout == 2


def test_form_fields_stored_under_their_prefixed_names_are_read(connection: Callable[..., str]) -> None:
    conn_id = connection(host="jm", extra={"extra__flink_runtime__verify_tls": "false", "timeout": ""})
    settings = FlinkRuntimeHook(conn_id)._get_settings()
    assert (settings.verify, settings.timeout) == (False, 30.0)


def test_a_connection_without_host_says_what_to_set(connection: Callable[..., str]) -> None:
    with pytest.raises(FlinkRuntimeException, match="has no host.*'embedded'"):
        _ = FlinkRuntimeHook(connection(port=8081)).rest_url


@pytest.mark.parametrize(
    "fields",
    [
        {"host": "embedded"},
        {
            "port": 18555,
            "extra": {
                "embedded": True,
                "taskmanagers": 3,
                "slots": 4,
                "state_dir": "/s",
                "embedded_idle_timeout": "90",
            },
        },
    ],
)
def test_an_embedded_connection_starts_the_shared_cluster(
    connection: Callable[..., str], monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any]
) -> None:
    calls: list[dict[str, Any]] = []

    def ensure(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "http://127.0.0.1:40404"

    monkeypatch.setattr(connection_module, "ensure_embedded_cluster", ensure)
    assert FlinkRuntimeHook(connection(**fields)).rest_url == "http://127.0.0.1:40404"
    expected = {"taskmanagers": 2, "slots": 2, "state_dir": None, "port": None, "idle_timeout": None}
    if "extra" in fields:
        expected = {"taskmanagers": 3, "slots": 4, "state_dir": "/s", "port": 18555, "idle_timeout": 90.0}
    assert calls == [expected]


@pytest.mark.parametrize("value", ["soon", -1, "nan"])
def test_a_malformed_embedded_idle_timeout_is_named(connection: Callable[..., str], value: Any) -> None:
    conn_id = connection(host="embedded", extra={"embedded_idle_timeout": value})
    with pytest.raises(FlinkRuntimeException, match=r"embedded_idle_timeout must be a number of seconds .*got"):
        _ = FlinkRuntimeHook(conn_id).rest_url


def test_an_embedded_port_out_of_range_is_named(connection: Callable[..., str], tmp_path: Path) -> None:
    conn_id = connection(host="embedded", port=70000, extra={"state_dir": str(tmp_path)})
    with pytest.raises(FlinkRuntimeException, match=r"embedded cluster.*port must be 1..65535, got 70000"):
        _ = FlinkRuntimeHook(conn_id).rest_url


def import_string(path: str) -> Any:
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def test_provider_info_is_valid_and_names_what_exists() -> None:
    import airflow
    import jsonschema

    from flink_runtime.airflow import get_provider_info

    info = get_provider_info()
    schemas = Path(airflow.__file__).parent
    jsonschema.validate(info, json.loads((schemas / "provider_info.schema.json").read_text()))
    # The stricter provider.yaml schema checks the declarative connection form too.
    yaml_schema = json.loads((schemas / "provider.yaml.schema.json").read_text())
    jsonschema.validate(info["connection-types"], yaml_schema["properties"]["connection-types"])
    assert info["package-name"] == "flink-runtime"
    for kind in ("hooks", "operators", "sensors", "triggers"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)
    (connection_type,) = info["connection-types"]
    assert import_string(connection_type["hook-class-name"]) is FlinkRuntimeHook
    assert connection_type["connection-type"] == FlinkRuntimeHook.conn_type
    assert [import_string(name).name for name in info["extra-links"]] == ["Flink Runtime Job"]


# -- retries and errors (mocked HTTP) ---------------------------------------------------------------


def test_5xx_and_429_are_retried_then_answered(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.Response(503), httpx.Response(429), httpx.Response(502), job("RUNNING"))
    hook = mocked_hook(connection, recorder)
    assert hook.get_job_status(JOB_ID) == "RUNNING"
    assert len(recorder.requests) == 4


def test_retries_are_bounded_and_the_last_answer_is_reported(connection: Callable[..., str]) -> None:
    recorder = Recorder(errors(503, "JobManager is restarting"))
    hook = mocked_hook(connection, recorder)
    with pytest.raises(FlinkRuntimeApiError, match="JobManager is restarting") as failure:
        hook.get_job_status(JOB_ID)
    assert failure.value.status_code == 503
    assert len(recorder.requests) == hook.retry_limit + 1


def test_a_4xx_is_not_retried_and_carries_the_jobmanagers_messages(connection: Callable[..., str]) -> None:
    recorder = Recorder(errors(400, "vertex #0 ('a'): parallelism must be an integer from 1 to 32768 (got 0)"))
    hook = mocked_hook(connection, recorder)
    with pytest.raises(FlinkRuntimeApiError) as failure:
        hook.submit_job({"name": "bad", "vertices": [{"id": "a", "name": "A", "invokable": "noop", "parallelism": 0}]})
    assert failure.value.status_code == 400
    assert failure.value.errors == ["vertex #0 ('a'): parallelism must be an integer from 1 to 32768 (got 0)"]
    assert "POST /jobs answered 400: vertex #0 ('a')" in str(failure.value)
    assert len(recorder.requests) == 1


def test_an_unknown_job_is_none_for_get_job_and_an_error_otherwise(connection: Callable[..., str]) -> None:
    hook = mocked_hook(connection, Recorder(errors(404, f"Job {JOB_ID} not found")))
    assert hook.get_job(JOB_ID) is None
    with pytest.raises(FlinkRuntimeJobNotFound, match="not found"):
        hook.get_job_status(JOB_ID)


def test_an_unreachable_cluster_is_reported_after_the_retries(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.ConnectError("connection refused"))
    hook = mocked_hook(connection, recorder)
    with pytest.raises(FlinkRuntimeClusterUnreachable, match="cannot reach .*jm.example.com:8081"):
        hook.get_job(JOB_ID)
    assert len(recorder.requests) == hook.retry_limit + 1


def test_the_token_is_sent_as_a_bearer_header(connection: Callable[..., str]) -> None:
    recorder = Recorder(job("RUNNING"))
    hook = mocked_hook(connection, recorder, password="s3cret")
    hook.get_job_status(JOB_ID)
    assert recorder.requests[0].headers["Authorization"] == "Bearer s3cret"


def test_submit_takes_json_text_and_sets_the_job_id(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.Response(202, json={"jobid": JOB_ID, "jobUrl": f"/jobs/{JOB_ID}"}))
    hook = mocked_hook(connection, recorder)
    text = json.dumps({"name": "n", "vertices": [{"id": "n", "name": "N", "invokable": "noop"}]})

    assert hook.submit_job(text, job_id=JOB_ID, savepoint_path="/sp/savepoint-1") == JOB_ID

    body = json.loads(recorder.requests[0].content)
    assert body["job_id"] == JOB_ID
    assert body["config"]["execution.savepoint.path"] == "/sp/savepoint-1"


def test_config_defaults_fill_only_what_the_graph_leaves_unset(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.Response(202, json={"jobid": JOB_ID, "jobUrl": f"/jobs/{JOB_ID}"}))
    hook = mocked_hook(connection, recorder)
    graph = {"name": "n", "vertices": [{"id": "n", "name": "N", "invokable": "noop"}], "config": {"a": "mine"}}

    hook.submit_job(graph, job_id=JOB_ID, config_defaults={"a": "default", "b": "default"})

    assert json.loads(recorder.requests[0].content)["config"] == {"a": "mine", "b": "default"}
    assert graph["config"] == {"a": "mine"}  # the caller's graph is left alone


def test_config_defaults_with_a_config_that_is_no_object_is_a_clear_error(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.Response(500))
    hook = mocked_hook(connection, recorder)
    with pytest.raises(FlinkRuntimeInvalidInput, match="config must be an object, not str"):
        hook.submit_job({"name": "n", "vertices": [], "config": "nope"}, config_defaults={"b": "default"})
    assert recorder.requests == []


def test_a_failed_savepoint_raises_with_the_cause(connection: Callable[..., str]) -> None:
    cause = {"class": "java.io.IOException", "stack-trace": "java.io.IOException: disk full\n\nat ..."}
    recorder = Recorder(
        httpx.Response(202, json={"request-id": "r1"}),
        httpx.Response(200, json={"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}),
    )
    hook = mocked_hook(connection, recorder)
    request_id = hook.trigger_savepoint(JOB_ID, "/savepoints")
    with pytest.raises(FlinkRuntimeSavepointFailed, match="disk full"):
        hook.wait_for_savepoint(JOB_ID, request_id)


def test_job_failure_carries_the_root_exception(connection: Callable[..., str]) -> None:
    root = "RuntimeError: kaboom\n\nF (1/1) failed:\nTraceback (most recent call last):\n  ..."
    hook = mocked_hook(connection, Recorder(httpx.Response(200, json={"root-exception": root})))
    failure = hook.job_failure(JOB_ID, "FAILED")
    assert str(failure) == f"Flink Runtime job {JOB_ID} ended FAILED: RuntimeError: kaboom"
    assert failure.root_exception == root


def test_job_failure_without_exceptions_still_names_the_job(connection: Callable[..., str]) -> None:
    hook = mocked_hook(connection, Recorder(httpx.ConnectError("refused")))
    failure = hook.job_failure(JOB_ID, "CANCELED")
    assert str(failure) == f"Flink Runtime job {JOB_ID} ended CANCELED"
    assert failure.root_exception is None


# -- waiting ------------------------------------------------------------------------------------------


def page(next_id: int, state: str, *transitions: tuple[str, str]) -> httpx.Response:
    events = [
        {"id": next_id - len(transitions) + i, "job-id": JOB_ID, "old-state": old, "new-state": new, "timestamp": 0}
        for i, (old, new) in enumerate(transitions)
    ]
    return httpx.Response(200, json={"events": events, "next": next_id, "state": state})


@pytest.mark.parametrize(
    ("new_states", "current", "watched", "decided"),
    [
        (["CREATED", "RUNNING"], "RUNNING", {"FINISHED"}, None),
        (["RUNNING", "FINISHED"], "FINISHED", {"RUNNING"}, "RUNNING"),  # a short RUNNING is not missed
        (["RUNNING", "FAILED"], "FAILED", {"FINISHED"}, "FAILED"),  # terminal, though not watched
        (["FAILING", "RESTARTING", "RUNNING"], "RUNNING", {"FINISHED", "FAILED"}, None),
        ([], "RUNNING", {"RUNNING"}, "RUNNING"),
        ([], "CANCELED", {"FINISHED"}, "CANCELED"),  # its event left the bounded log
        ([], "SUSPENDED", {"FINISHED"}, None),  # another JobManager may recover it
    ],
)
def test_decisive_state(new_states: list[str], current: str, watched: set[str], decided: str | None) -> None:
    assert decisive_state(new_states, current, watched) == decided


def test_wait_for_job_follows_the_event_pages(connection: Callable[..., str]) -> None:
    recorder = Recorder(
        page(2, "RUNNING", ("INITIALIZING", "CREATED"), ("CREATED", "RUNNING")),
        page(2, "RUNNING"),
        page(3, "FINISHED", ("RUNNING", "FINISHED")),
    )
    hook = mocked_hook(connection, recorder)
    assert hook.wait_for_job(JOB_ID, ["FINISHED"], poll_timeout=5) == "FINISHED"
    assert [request.url.params["since"] for request in recorder.requests] == ["0", "2", "2"]
    assert {float(request.url.params["timeout"]) for request in recorder.requests} == {5.0}


def test_wait_for_job_times_out_naming_the_last_state(connection: Callable[..., str]) -> None:
    hook = mocked_hook(connection, Recorder(page(0, "RUNNING")))
    with pytest.raises(FlinkRuntimeTimeout, match="did not reach FINISHED within 0.2 s; its last state was RUNNING"):
        hook.wait_for_job(JOB_ID, ["FINISHED"], timeout=0.2, poll_timeout=0.05)


# -- async ----------------------------------------------------------------------------------------------


async def test_async_polls_retry_and_pass_since_and_timeout(connection: Callable[..., str]) -> None:
    recorder = Recorder(httpx.Response(502), httpx.ReadTimeout("slow"), page(5, "RUNNING", ("CREATED", "RUNNING")))
    async with mocked_hook(connection, recorder, password="t0ken") as hook:
        answer = await hook.a_poll_events(JOB_ID, since=4, timeout=90)
    assert answer.state == JobStatus.RUNNING and answer.next == 5
    assert len(recorder.requests) == 3
    last = recorder.requests[-1]
    assert last.url.path == f"/jobs/{JOB_ID}/events"
    assert (last.url.params["since"], last.url.params["timeout"]) == ("4", "60.0")  # the REST API's limit
    assert last.headers["Authorization"] == "Bearer t0ken"


async def test_async_errors_map_like_the_sync_ones(connection: Callable[..., str]) -> None:
    async with mocked_hook(connection, Recorder(errors(404, f"Job {JOB_ID} not found"))) as hook:
        with pytest.raises(FlinkRuntimeJobNotFound, match="not found"):
            await hook.a_get_job_status(JOB_ID)
    async with mocked_hook(connection, Recorder(httpx.ConnectError("refused"))) as hook:
        with pytest.raises(FlinkRuntimeClusterUnreachable):
            await hook.a_poll_events(JOB_ID, 0, 1)


def routed(answers: dict[str, Any], seen: list[httpx.Request]) -> httpx.MockTransport:
    """A JobManager answering each path with its JSON (404 for any other), keeping the requests."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path not in answers:
            return errors(404, f"no {request.url.path}")
        return httpx.Response(200, json=answers[request.url.path])

    return httpx.MockTransport(handle)


def both_sides(connection: Callable[..., str], answers: dict[str, Any]) -> tuple[Any, Any, list, list]:
    """A hook whose blocking side and one whose async side talk to the same answers."""
    conn_id = connection(host="jm.example.com", port=8081)
    sync_seen: list[httpx.Request] = []
    async_seen: list[httpx.Request] = []
    sync_hook = FlinkRuntimeHook(conn_id, retry_delay=0, transport=routed(answers, sync_seen))
    async_hook = FlinkRuntimeHook(conn_id, retry_delay=0, async_transport=routed(answers, async_seen))
    return sync_hook, async_hook, sync_seen, async_seen


def requests_of(seen: list[httpx.Request]) -> list[tuple[str, str, str]]:
    return [(request.method, request.url.path, str(request.url.params)) for request in seen]


async def test_the_failure_report_is_the_same_request_for_request_on_both_sides(
    connection: Callable[..., str],
) -> None:
    root = "RuntimeError: kaboom\n\nFail (1/1) failed:\nTraceback (most recent call last):\n  ..."
    answers = {
        f"/jobs/{JOB_ID}/exceptions": {
            "root-exception": root,
            "exceptionHistory": {"entries": [{"taskName": "Fail (1/1)"}]},
        },
        f"/jobs/{JOB_ID}": {"jid": JOB_ID, "state": "FAILED", "vertices": [{"id": "v1", "name": "Fail"}]},
        f"/jobs/{JOB_ID}/log": {"lines": [f"line {n}" for n in range(30)]},
    }
    sync_hook, async_hook, sync_seen, async_seen = both_sides(connection, answers)
    failure = sync_hook.job_failure(JOB_ID, "FAILED")
    async with async_hook:
        awaited = await async_hook.a_job_failure(JOB_ID, "FAILED")
    assert str(failure) == str(awaited) == f"Flink Runtime job {JOB_ID} ended FAILED: RuntimeError: kaboom"
    assert failure.root_exception == awaited.root_exception == root
    assert failure.log_lines == awaited.log_lines == [f"line {n}" for n in range(10, 30)]
    assert requests_of(sync_seen) == requests_of(async_seen)
    assert requests_of(sync_seen)[-1] == ("GET", f"/jobs/{JOB_ID}/log", "vertex=v1&subtask=0")


async def test_the_wait_for_a_job_is_the_same_on_both_sides_archived_job_included(
    connection: Callable[..., str],
) -> None:
    # Its events are gone (404: the job left the live jobs); its state is still answered.
    answers = {f"/jobs/{JOB_ID}": {"jid": JOB_ID, "state": "CANCELED"}}
    sync_hook, async_hook, sync_seen, async_seen = both_sides(connection, answers)
    assert sync_hook.wait_for_job(JOB_ID, ["FINISHED"]) == "CANCELED"
    async with async_hook:
        assert await async_hook.a_wait_for_job(JOB_ID, ["FINISHED"]) == "CANCELED"
        assert await async_hook.a_get_job(JOB_ID) == sync_hook.get_job(JOB_ID)
        assert await async_hook.a_get_job("f" * 32) is sync_hook.get_job("f" * 32) is None
    assert requests_of(sync_seen) == requests_of(async_seen)


# -- against a MiniCluster ----------------------------------------------------------------------------


@pytest.fixture
def hook(minicluster_conn_id: str) -> Iterator[FlinkRuntimeHook]:
    hook = FlinkRuntimeHook(minicluster_conn_id)
    yield hook
    hook.close()


def graph(invokable: str, **config: Any) -> JobGraph:
    return JobGraph(
        name=invokable, vertices=[JobVertex(id="v", name=invokable.title(), invokable=invokable, config=config)]
    )


@pytest.mark.integration
def test_submit_and_wait_on_a_real_cluster(hook: FlinkRuntimeHook) -> None:
    ok, message = hook.test_connection()
    assert ok, message
    job_id = hook.submit_job(graph("noop"))
    assert hook.wait_for_job(job_id, ["FINISHED"], timeout=60) == "FINISHED"
    assert hook.get_job(job_id)["state"] == "FINISHED"
    # job_url is the job's page on the dashboard; its JSON is GET /jobs/:id.
    assert hook.job_url(job_id) == f"{hook.rest_url}/#/jobs/{job_id}"
    assert httpx.get(hook.job_url(job_id)).headers["content-type"].startswith("text/html")
    assert httpx.get(f"{hook.rest_url}/jobs/{job_id}").json()["jid"] == job_id


@pytest.mark.integration
def test_a_failed_job_reports_its_root_exception(hook: FlinkRuntimeHook) -> None:
    job_id = hook.submit_job(graph("fail", message="kaboom 42"))
    assert hook.wait_for_job(job_id, ["FINISHED"], timeout=60) == "FAILED"
    assert "RuntimeError: kaboom 42" in str(hook.job_failure(job_id, "FAILED"))


@pytest.mark.integration
def test_an_invalid_graph_is_refused_naming_the_vertex(hook: FlinkRuntimeHook) -> None:
    with pytest.raises(FlinkRuntimeApiError, match="broken-vertex") as failure:
        hook.submit_job({"name": "b", "vertices": [{"id": "broken-vertex", "name": "B", "invokable": "no-such-thing"}]})
    assert failure.value.status_code == 400


@pytest.mark.integration
def test_savepoint_stop_and_cancel_on_a_real_cluster(hook: FlinkRuntimeHook, tmp_path: Path) -> None:
    job_id = hook.submit_job(graph("sleep", seconds=1.5))
    assert hook.wait_for_job(job_id, ["RUNNING"], timeout=30) == "RUNNING"
    request_id = hook.trigger_savepoint(job_id, str(tmp_path / "sp"))
    assert Path(hook.wait_for_savepoint(job_id, request_id, timeout=30), "_metadata").exists()
    location = hook.stop_job(job_id, str(tmp_path / "sp"), timeout=30)
    assert Path(location, "_metadata").exists()
    assert hook.get_job_status(job_id) == "FINISHED"
    with pytest.raises(FlinkRuntimeApiError) as failure:
        hook.cancel_job(job_id)  # a FINISHED job cannot be cancelled
    assert failure.value.status_code == 409

    job_id = hook.submit_job(graph("sleep", seconds=30))
    hook.cancel_job(job_id)
    assert hook.wait_for_job(job_id, ["CANCELED"], timeout=30) == "CANCELED"
    hook.cancel_job(job_id)  # cancelling again is acknowledged, as Flink does (an Airflow retry of on_kill)
    assert hook.get_job_status(job_id) == "CANCELED"


@pytest.mark.integration
async def test_async_long_poll_on_a_real_cluster(minicluster_conn_id: str) -> None:
    with FlinkRuntimeHook(minicluster_conn_id) as sync_hook:
        job_id = sync_hook.submit_job(graph("noop"))
        sync_hook.wait_for_job(job_id, ["FINISHED"], timeout=60)
    async with FlinkRuntimeHook(minicluster_conn_id) as hook:
        answer = await hook.a_poll_events(job_id, 0, 1)
        assert await hook.a_get_job_status(job_id) == "FINISHED"
    assert [event.new_state for event in answer.events][-1] == JobStatus.FINISHED
    assert answer.state == JobStatus.FINISHED
