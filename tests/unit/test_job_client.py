"""JobClient's error mapping, retry policy and input handling, against httpx.MockTransport.

These test the client layer alone; tests/integration/test_client_minicluster.py runs
the same client against a real cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import (
    ClusterUnreachable,
    JobClient,
    JobClientError,
    JobNotFound,
    JobStatusEvent,
    RestClientError,
    SavepointFailed,
    normalize_rest_url,
)
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex

URL = "http://jm.example:8081"
JOB_ID = "0123456789abcdef0123456789abcdef"

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers from a script."""

    def __init__(self, *answers: httpx.Response | Exception | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        # The last answer repeats, so "always fails" needs one entry.
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


def client_for(recorder: Recorder, retries: int = 3) -> JobClient:
    return JobClient(URL, retries=retries, backoff=0.0, transport=httpx.MockTransport(recorder))


def errors(status: int, *messages: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"errors": list(messages)}, headers=headers)


def job_details(state: str = "RUNNING") -> httpx.Response:
    return httpx.Response(200, json={"jid": JOB_ID, "name": "j", "state": state, "vertices": []})


def small_graph() -> JobGraph:
    return JobGraph(name="noop", vertices=[JobVertex(id="v", name="V", invokable="noop")])


# -- error mapping --------------------------------------------------------------------------------


def test_404_is_job_not_found_with_the_servers_message_and_not_retried() -> None:
    recorder = Recorder(errors(404, f"Job {JOB_ID} not found."))
    with client_for(recorder) as client, pytest.raises(JobNotFound) as raised:
        client.status(JOB_ID)
    assert raised.value.status_code == 404
    assert f"Job {JOB_ID} not found." in str(raised.value)
    assert len(recorder.requests) == 1


def test_400_keeps_every_error_and_is_not_retried() -> None:
    recorder = Recorder(errors(400, "vertex 'a': bad", "vertex 'b': worse"))
    with client_for(recorder) as client, pytest.raises(RestClientError) as raised:
        client.submit(small_graph())
    assert not isinstance(raised.value, JobNotFound)
    assert raised.value.status_code == 400
    assert raised.value.errors == ["vertex 'a': bad", "vertex 'b': worse"]
    assert "vertex 'a': bad" in str(raised.value) and "vertex 'b': worse" in str(raised.value)
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 413, 422])
def test_no_4xx_is_retried(status: int) -> None:
    recorder = Recorder(errors(status, "no"))
    with client_for(recorder) as client, pytest.raises(RestClientError):
        client.overview()
    assert len(recorder.requests) == 1


def test_non_json_error_body_still_gives_a_message() -> None:
    recorder = Recorder(httpx.Response(418, text="I'm a teapot"))
    with client_for(recorder) as client, pytest.raises(RestClientError) as raised:
        client.overview()
    assert "418" in str(raised.value) and "teapot" in str(raised.value)


def test_html_error_page_is_reduced_to_its_status() -> None:
    recorder = Recorder(httpx.Response(404, html="<html><body>nope</body></html>"))
    with client_for(recorder) as client, pytest.raises(JobNotFound) as raised:
        client.details(JOB_ID)
    assert str(raised.value) == "HTTP 404 Not Found"


def test_job_id_cannot_escape_its_path_segment() -> None:
    recorder = Recorder(job_details())
    with client_for(recorder) as client:
        client.details("../overview")
    assert recorder.requests[0].url.raw_path == b"/jobs/..%2Foverview"


# -- retry policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_5xx_and_429_are_retried_until_success(status: int) -> None:
    recorder = Recorder(errors(status, "busy"), errors(status, "busy"), httpx.Response(200, json={"taskmanagers": 2}))
    with client_for(recorder) as client:
        assert client.overview() == {"taskmanagers": 2}
    assert len(recorder.requests) == 3


def test_persistent_5xx_gives_up_after_the_retries_with_the_servers_error() -> None:
    recorder = Recorder(errors(503, "The JobManager did not accept the job in time; retry the submission."))
    with client_for(recorder, retries=2) as client, pytest.raises(RestClientError) as raised:
        client.overview()
    assert raised.value.status_code == 503
    assert "did not accept the job in time" in str(raised.value)
    assert len(recorder.requests) == 3  # the first attempt and two retries


def test_connection_errors_are_retried_then_cluster_unreachable_names_the_url() -> None:
    recorder = Recorder(httpx.ConnectError("Connection refused"))
    with client_for(recorder, retries=4) as client, pytest.raises(ClusterUnreachable) as raised:
        client.list_jobs()
    assert len(recorder.requests) == 5
    message = str(raised.value)
    assert URL in message and "-m" in message and "minicluster" in message
    assert isinstance(raised.value, ConnectionError)


def test_a_connection_error_then_success_is_transparent() -> None:
    recorder = Recorder(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), job_details("FINISHED"))
    with client_for(recorder) as client:
        assert client.status(JOB_ID) is JobStatus.FINISHED
    assert len(recorder.requests) == 3


def test_retries_zero_means_one_attempt() -> None:
    recorder = Recorder(httpx.ConnectError("refused"))
    with client_for(recorder, retries=0) as client, pytest.raises(ClusterUnreachable):
        client.overview()
    assert len(recorder.requests) == 1


# -- submit: input handling --------------------------------------------------------------------------


def accepted(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    return httpx.Response(202, json={"jobid": body["job_id"], "jobUrl": f"/jobs/{body['job_id']}"})


def test_submit_a_job_graph_assigns_a_job_id_on_the_client() -> None:
    recorder = Recorder(accepted)
    graph = small_graph()
    with client_for(recorder) as client:
        job_id = client.submit(graph)
    body = json.loads(recorder.requests[0].content)
    assert body["job_id"] == job_id and len(job_id) == 32
    assert body["vertices"][0]["invokable"] == "noop"
    assert recorder.requests[0].method == "POST" and recorder.requests[0].url.path == "/jobs"
    assert graph.job_id is None  # the caller's graph is not modified


@pytest.mark.parametrize("kind", ["dict", "bytes", "str-path", "pathlike"])
def test_submit_accepts_dicts_bytes_and_paths(kind: str, tmp_path: Path) -> None:
    document = {"name": "n", "vertices": [{"id": "v", "name": "V", "invokable": "noop"}], "job_id": JOB_ID}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(document))
    source: Any = {
        "dict": document,
        "bytes": json.dumps(document).encode(),
        "str-path": str(path),
        "pathlike": path,
    }[kind]
    recorder = Recorder(accepted)
    with client_for(recorder) as client:
        assert client.submit(source) == JOB_ID
    assert json.loads(recorder.requests[0].content) == document


def test_submit_job_id_argument_overrides_the_documents() -> None:
    recorder = Recorder(accepted)
    with client_for(recorder) as client:
        assert client.submit(small_graph(), job_id=JOB_ID) == JOB_ID


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_bad_files_raise_value_error_naming_the_file_before_any_request(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "job.json"
    if content is not None:
        path.write_text(content)
    recorder = Recorder(accepted)
    with client_for(recorder) as client, pytest.raises(ValueError) as raised:
        client.submit(path)
    assert expected in str(raised.value) and str(path) in str(raised.value)
    assert recorder.requests == []


def test_bad_in_memory_input_raises_value_error_before_any_request(tmp_path: Path) -> None:
    recorder = Recorder(accepted)
    with client_for(recorder) as client:
        with pytest.raises(ValueError, match="is a directory"):
            client.submit(tmp_path)
        with pytest.raises(ValueError, match="JSON"):
            client.submit(b"\xff\xfe")
        with pytest.raises(ValueError, match="file path"):
            client.submit('{"name": "inline"}')
        with pytest.raises(ValueError, match="cannot be encoded"):
            client.submit({"name": object()})
        with pytest.raises(ValueError, match="cannot submit a int"):
            client.submit(42)  # type: ignore[arg-type]
    assert recorder.requests == []


def test_a_retried_submission_that_already_got_through_is_accepted() -> None:
    # The first POST reached the JobManager but its answer was lost; the retry is told
    # "already submitted", which for the same client-assigned id means success.
    recorder = Recorder(httpx.ReadError("connection reset"), errors(409, "already submitted"))
    with client_for(recorder) as client:
        job_id = client.submit(small_graph(), job_id=JOB_ID)
    assert job_id == JOB_ID
    assert len(recorder.requests) == 2
    assert recorder.requests[0].content == recorder.requests[1].content


def test_a_duplicate_on_the_first_attempt_is_an_error() -> None:
    recorder = Recorder(errors(409, f"Job {JOB_ID} was already submitted"))
    with client_for(recorder) as client, pytest.raises(RestClientError) as raised:
        client.submit(small_graph(), job_id=JOB_ID)
    assert raised.value.status_code == 409


# -- queries and cancel --------------------------------------------------------------------------


def test_queries_hit_the_flink_paths() -> None:
    recorder = Recorder(
        lambda request: {
            "/jobs/overview": httpx.Response(200, json={"jobs": [{"jid": JOB_ID}]}),
            "/overview": httpx.Response(200, json={"taskmanagers": 1}),
            "/taskmanagers": httpx.Response(200, json={"taskmanagers": [{"id": "tm"}]}),
            f"/jobs/{JOB_ID}/exceptions": httpx.Response(200, json={"root-exception": None}),
            f"/jobs/{JOB_ID}": httpx.Response(202, json={}),
        }[request.url.path]
    )
    with client_for(recorder) as client:
        assert client.list_jobs() == [{"jid": JOB_ID}]
        assert client.overview() == {"taskmanagers": 1}
        assert client.taskmanagers() == [{"id": "tm"}]
        assert client.exceptions(JOB_ID) == {"root-exception": None}
        client.cancel(JOB_ID)
    cancel = recorder.requests[-1]
    assert cancel.method == "PATCH" and cancel.url.params["mode"] == "cancel"


def test_cancel_of_a_finished_job_reports_the_conflict() -> None:
    recorder = Recorder(errors(409, f"job {JOB_ID} is already FINISHED"))
    with client_for(recorder) as client, pytest.raises(RestClientError, match="already FINISHED"):
        client.cancel(JOB_ID)


# -- events and wait ------------------------------------------------------------------------------


def event(number: int, old: str, new: str) -> dict[str, Any]:
    return {
        "id": number,
        "job-id": JOB_ID,
        "old-state": old,
        "new-state": new,
        "timestamp": 1_700_000_000_500,
    }


def events_page(events: list[dict[str, Any]], next_id: int, state: str) -> httpx.Response:
    return httpx.Response(200, json={"events": events, "next": next_id, "state": state})


def test_events_follow_next_and_end_after_the_terminal_state() -> None:
    recorder = Recorder(
        events_page([event(0, "INITIALIZING", "CREATED"), event(1, "CREATED", "RUNNING")], 2, "RUNNING"),
        events_page([], 2, "RUNNING"),
        events_page([event(7, "RUNNING", "FINISHED")], 8, "FINISHED"),
        errors(500, "must not be asked again"),
    )
    with client_for(recorder) as client:
        received = list(client.events(JOB_ID, poll_timeout=5))
    assert [e.new_state for e in received] == [JobStatus.CREATED, JobStatus.RUNNING, JobStatus.FINISHED]
    assert received[0] == JobStatusEvent(0, JOB_ID, JobStatus.INITIALIZING, JobStatus.CREATED, 1_700_000_000.5)
    assert [r.url.params["since"] for r in recorder.requests] == ["0", "2", "2"]
    assert recorder.requests[0].url.params["timeout"] == "5"
    assert len(recorder.requests) == 3


def test_long_polls_are_capped_at_the_servers_limit() -> None:
    recorder = Recorder(events_page([event(0, "RUNNING", "CANCELED")], 1, "CANCELED"))
    with client_for(recorder) as client:
        list(client.events(JOB_ID, poll_timeout=3600))
    assert float(recorder.requests[0].url.params["timeout"]) == 60.0


def test_wait_returns_the_final_state_and_reports_each_event() -> None:
    recorder = Recorder(
        events_page([event(0, "INITIALIZING", "CREATED")], 1, "CREATED"),
        events_page([event(1, "CREATED", "RUNNING"), event(2, "RUNNING", "FAILING")], 3, "FAILING"),
        events_page([event(3, "FAILING", "FAILED")], 4, "FAILED"),
    )
    seen: list[JobStatusEvent] = []
    with client_for(recorder) as client:
        assert client.wait(JOB_ID, timeout=10, on_event=seen.append) is JobStatus.FAILED
    assert [e.new_state.value for e in seen] == ["CREATED", "RUNNING", "FAILING", "FAILED"]


def test_wait_uses_the_reported_state_when_the_terminal_event_was_evicted() -> None:
    recorder = Recorder(events_page([], 5, "CANCELED"))
    with client_for(recorder) as client:
        assert client.wait(JOB_ID, timeout=5) is JobStatus.CANCELED
        assert list(client.events(JOB_ID)) == []


def test_wait_timeout_names_the_job_and_its_last_state() -> None:
    recorder = Recorder(events_page([], 3, "RUNNING"))
    with client_for(recorder) as client, pytest.raises(TimeoutError) as raised:
        client.wait(JOB_ID, timeout=0.05)
    assert JOB_ID in str(raised.value) and "RUNNING" in str(raised.value)
    # Each long poll waits no longer than what is left of the timeout.
    assert all(float(r.url.params["timeout"]) <= 0.05 for r in recorder.requests)


def test_wait_on_an_unknown_job_raises_job_not_found() -> None:
    recorder = Recorder(errors(404, f"Job {JOB_ID} not found."))
    with client_for(recorder) as client, pytest.raises(JobNotFound):
        client.wait(JOB_ID, timeout=1)


# -- addresses ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("localhost:8081", "http://localhost:8081"),
        ("http://10.0.0.1:8081/", "http://10.0.0.1:8081"),
        ("https://flink.example.com", "https://flink.example.com"),
        (" 127.0.0.1:9 ", "http://127.0.0.1:9"),
    ],
)
def test_normalize_rest_url(address: str, expected: str) -> None:
    assert normalize_rest_url(address) == expected


@pytest.mark.parametrize("address", ["", "ftp://host:21", "http://"])
def test_invalid_addresses_are_rejected(address: str) -> None:
    with pytest.raises(ValueError):
        normalize_rest_url(address)


# -- savepoints and checkpoints --------------------------------------------------------------------

REQUEST_ID = "5a1b2c3d4e5f60718293a4b5c6d7e8f9"
LOCATION = "file:///savepoints/savepoint-012345-6789abcdef01"


def triggered(request: httpx.Request) -> httpx.Response:
    return httpx.Response(202, json={"request-id": REQUEST_ID})


def in_progress() -> httpx.Response:
    return httpx.Response(200, json={"status": {"id": "IN_PROGRESS"}})


def completed(location: str = LOCATION) -> httpx.Response:
    return httpx.Response(200, json={"status": {"id": "COMPLETED"}, "operation": {"location": location}})


def failed(cause_class: str, stack_trace: str) -> httpx.Response:
    cause = {"class": cause_class, "stack-trace": stack_trace}
    return httpx.Response(200, json={"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}})


def test_savepoint_round_trip_uses_flinks_paths_and_fields() -> None:
    recorder = Recorder(triggered, in_progress(), in_progress(), completed())
    with client_for(recorder) as client:
        assert client.savepoint(JOB_ID, "/savepoints", cancel_job=True, timeout=5) == LOCATION
    trigger, *polls = recorder.requests
    assert trigger.method == "POST" and trigger.url.path == f"/jobs/{JOB_ID}/savepoints"
    sent = json.loads(trigger.content)
    assert re.fullmatch("[0-9a-f]{32}", sent.pop("triggerId"))
    assert sent == {"target-directory": "/savepoints", "cancel-job": True}
    assert [(r.method, r.url.path) for r in polls] == [("GET", f"/jobs/{JOB_ID}/savepoints/{REQUEST_ID}")] * 3


def test_savepoint_defaults_leave_the_directory_to_the_jobmanager() -> None:
    recorder = Recorder(triggered)
    with client_for(recorder) as client:
        assert client.trigger_savepoint(JOB_ID) == REQUEST_ID
    sent = json.loads(recorder.requests[0].content)
    assert sent.pop("triggerId")
    assert sent == {"target-directory": None, "cancel-job": False}


def test_stop_posts_the_stop_body_and_waits_for_the_location() -> None:
    recorder = Recorder(triggered, completed())
    with client_for(recorder) as client:
        assert client.stop(JOB_ID, "/savepoints", drain=True, timeout=5) == LOCATION
    stop = recorder.requests[0]
    assert stop.method == "POST" and stop.url.path == f"/jobs/{JOB_ID}/stop"
    sent = json.loads(stop.content)
    assert sent.pop("triggerId")
    assert sent == {"targetDirectory": "/savepoints", "drain": True}
    assert recorder.requests[1].url.path == f"/jobs/{JOB_ID}/savepoints/{REQUEST_ID}"


def test_a_failed_savepoint_raises_savepoint_failed_with_the_cause() -> None:
    trace = (
        "OSError: [Errno 28] No space left on device: '/savepoints'\n\n"
        "Traceback (most recent call last):\n"
        '  File "checkpoint/storage.py", line 10, in write\n'
        "OSError: [Errno 28] No space left on device: '/savepoints'\n"
    )
    recorder = Recorder(triggered, failed("OSError", trace))
    with client_for(recorder) as client, pytest.raises(SavepointFailed) as raised:
        client.savepoint(JOB_ID, timeout=5)
    message = str(raised.value)
    assert JOB_ID in message and REQUEST_ID in message
    assert "OSError: [Errno 28] No space left on device" in message
    assert "Traceback" not in message  # the summary, not the whole trace
    assert raised.value.cause_class == "OSError" and raised.value.stack_trace == trace
    assert isinstance(raised.value, JobClientError)


@pytest.mark.parametrize(
    ("cause_class", "trace", "expected"),
    [
        # Java-style: the first line is "Class: message"; the frames are cut.
        (
            "java.io.IOException",
            "java.io.IOException: boom\n\tat A.b(A.java:1)\n\tat C.d(C.java:2)",
            "java.io.IOException: boom",
        ),
        # The JobManager's own: "Class: message", then the Python traceback repeating it.
        (
            "CheckpointFailure",
            'CheckpointFailure: no room\nTraceback (most recent call last):\n  File "c.py", line 3, in w\n'
            "    write()\nCheckpointFailure: no room\n",
            "CheckpointFailure: no room",
        ),
        # A bare Python traceback: the message is its last line.
        ("ValueError", 'Traceback (most recent call last):\n  File "x.py"\nValueError: bad\n', "ValueError: bad"),
        # A trace that does not name the class gets it prepended; none at all is the class.
        ("TimeoutError", "took too long", "TimeoutError: took too long"),
        ("TimeoutError", "", "TimeoutError"),
    ],
)
def test_savepoint_failed_message_shapes(cause_class: str, trace: str, expected: str) -> None:
    error = SavepointFailed(JOB_ID, REQUEST_ID, cause_class, trace)
    assert str(error) == f"savepoint of job {JOB_ID} failed (request {REQUEST_ID}): {expected}"


def test_savepoint_failed_message_keeps_only_the_first_lines() -> None:
    trace = "RuntimeError: x\n" + "".join(f"  line {n}\n" for n in range(50))
    error = SavepointFailed(JOB_ID, REQUEST_ID, "RuntimeError", trace)
    assert "line 3" in str(error) and "line 4" not in str(error)


def test_wait_for_savepoint_times_out_naming_job_and_request() -> None:
    recorder = Recorder(in_progress())
    with client_for(recorder) as client, pytest.raises(TimeoutError) as raised:
        client.wait_for_savepoint(JOB_ID, REQUEST_ID, timeout=0.05, poll_interval=0.01)
    assert JOB_ID in str(raised.value) and REQUEST_ID in str(raised.value)
    assert len(recorder.requests) >= 2  # polled until the deadline, not once


def test_wait_for_an_unknown_request_raises_job_not_found() -> None:
    recorder = Recorder(errors(404, f"no savepoint request {REQUEST_ID} for job {JOB_ID}"))
    with client_for(recorder) as client, pytest.raises(JobNotFound, match="no savepoint request"):
        client.wait_for_savepoint(JOB_ID, REQUEST_ID, timeout=1)


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"status": {"id": "WHATEVER"}},
        {"status": {"id": "COMPLETED"}},
        {"status": {"id": "COMPLETED"}, "operation": {}},
    ],
)
def test_an_unexpected_savepoint_status_is_an_error_not_a_hang(answer: dict[str, Any]) -> None:
    recorder = Recorder(httpx.Response(200, json=answer))
    with client_for(recorder) as client, pytest.raises(RestClientError, match="unexpected savepoint status"):
        client.wait_for_savepoint(JOB_ID, REQUEST_ID, timeout=1)


def test_a_trigger_refused_by_the_jobmanager_is_reported_and_not_retried() -> None:
    recorder = Recorder(errors(409, f"Job {JOB_ID} is FINISHED, not RUNNING."))
    with client_for(recorder) as client, pytest.raises(RestClientError, match="not RUNNING") as raised:
        client.stop(JOB_ID)
    assert raised.value.status_code == 409
    assert len(recorder.requests) == 1


def test_a_trigger_is_retried_even_after_it_may_have_reached_the_jobmanager() -> None:
    """A read timeout or a 500 may come after the savepoint was triggered; the retry
    carries the same triggerId, so the JobManager answers with the same request."""
    for answer in (httpx.ReadTimeout("slow"), errors(500, "boom")):
        recorder = Recorder(answer, triggered)
        with client_for(recorder) as client:
            assert client.trigger_savepoint(JOB_ID) == REQUEST_ID
        first, retry = (json.loads(request.content)["triggerId"] for request in recorder.requests)
        assert first == retry


def test_a_trigger_is_retried_when_it_cannot_have_been_handled() -> None:
    recorder = Recorder(httpx.ConnectError("refused"), errors(503, "busy"), errors(429, "slow down"), triggered)
    with client_for(recorder) as client:
        assert client.stop_with_savepoint(JOB_ID) == REQUEST_ID
    assert len(recorder.requests) == 4


def test_not_implemented_is_never_retried() -> None:
    recorder = Recorder(errors(501, "savepoints are not implemented yet"))
    with client_for(recorder) as client:
        with pytest.raises(RestClientError, match="not implemented") as raised:
            client.trigger_savepoint(JOB_ID)
        assert raised.value.status_code == 501
        with pytest.raises(RestClientError):
            client.checkpoints(JOB_ID)
    assert len(recorder.requests) == 2


def test_checkpoints_is_the_checkpoint_statistics() -> None:
    stats = {"counts": {"completed": 3, "failed": 0}, "latest": {"completed": None}}
    recorder = Recorder(httpx.Response(200, json=stats))
    with client_for(recorder) as client:
        assert client.checkpoints(JOB_ID) == stats
    assert recorder.requests[0].url.path == f"/jobs/{JOB_ID}/checkpoints"


def test_submit_from_a_savepoint_sets_the_config_of_the_submitted_copy() -> None:
    recorder = Recorder(accepted)
    graph = small_graph()
    graph.config["restart-strategy.type"] = "none"
    with client_for(recorder) as client:
        client.submit(graph, savepoint_path="/savepoints/savepoint-1", allow_non_restored_state=True)
        client.submit(graph, savepoint_path=Path("/savepoints/savepoint-2"))
    first, second = (json.loads(r.content)["config"] for r in recorder.requests)
    assert first == {
        "restart-strategy.type": "none",
        "execution.savepoint.path": "/savepoints/savepoint-1",
        "execution.savepoint.ignore-unclaimed-state": True,
    }
    assert second == {"restart-strategy.type": "none", "execution.savepoint.path": "/savepoints/savepoint-2"}
    assert graph.config == {"restart-strategy.type": "none"}  # the caller's graph is not modified


def test_submit_from_a_savepoint_leaves_a_callers_dict_alone() -> None:
    document = {"name": "n", "vertices": [{"id": "v", "name": "V", "invokable": "noop"}]}
    recorder = Recorder(accepted)
    with client_for(recorder) as client:
        client.submit(document, savepoint_path="/sp")
    assert json.loads(recorder.requests[0].content)["config"] == {"execution.savepoint.path": "/sp"}
    assert "config" not in document and "job_id" not in document


def test_submit_without_a_savepoint_sends_no_savepoint_config() -> None:
    recorder = Recorder(accepted)
    with client_for(recorder) as client:
        client.submit(small_graph())
    assert "execution.savepoint.path" not in json.loads(recorder.requests[0].content).get("config", {})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"allow_non_restored_state": True}, "pass savepoint_path too"),
        ({"savepoint_path": " "}, "non-empty path"),
    ],
)
def test_bad_savepoint_arguments_raise_before_any_request(kwargs: dict[str, Any], message: str) -> None:
    recorder = Recorder(accepted)
    with client_for(recorder) as client, pytest.raises(ValueError, match=message):
        client.submit(small_graph(), **kwargs)
    assert recorder.requests == []
