"""`flink-runtime savepoint`, `stop` and `run -s`, in-process through `cli.main([...])`.

The CLI's JobClient talks to a scripted REST API (httpx.MockTransport); what goes over
the wire and what the user sees are under test, not the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient, cli
from flink_runtime.jobgraph import JobGraph, JobVertex

JOB_ID = "0123456789abcdef0123456789abcdef"
REQUEST_ID = "5a1b2c3d4e5f60718293a4b5c6d7e8f9"
LOCATION = "file:///savepoints/savepoint-012345-6789abcdef01"
ADDRESS = "jm.example:8081"


class FakeRest:
    """The REST API of a JobManager with one RUNNING job whose savepoint completes on the 2nd poll."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.polls = 0
        self.outcome: dict[str, Any] = {"location": LOCATION}
        self.trigger_answer: httpx.Response = httpx.Response(202, json={"request-id": REQUEST_ID})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.method == "POST" and path in (f"/jobs/{JOB_ID}/savepoints", f"/jobs/{JOB_ID}/stop"):
            return self.trigger_answer
        if request.method == "GET" and path == f"/jobs/{JOB_ID}/savepoints/{REQUEST_ID}":
            self.polls += 1
            if self.polls < 2:
                return httpx.Response(200, json={"status": {"id": "IN_PROGRESS"}})
            return httpx.Response(200, json={"status": {"id": "COMPLETED"}, "operation": self.outcome})
        if request.method == "POST" and path == "/jobs":
            job_id = json.loads(request.content)["job_id"]
            return httpx.Response(202, json={"jobid": job_id, "jobUrl": f"/jobs/{job_id}"})
        return httpx.Response(404, json={"errors": [f"Not found: {path}"]})

    def bodies(self, method: str, path: str) -> list[dict[str, Any]]:
        """The JSON bodies sent, without the triggerId the client makes up for each trigger."""
        sent = [json.loads(r.content) for r in self.requests if r.method == method and r.url.path == path]
        for body in sent:
            if isinstance(body, dict) and "triggerId" in body:
                assert len(body.pop("triggerId")) == 32
        return sent


@pytest.fixture
def rest(monkeypatch: pytest.MonkeyPatch) -> FakeRest:
    fake = FakeRest()
    seen_urls: list[str] = []

    def client_factory(rest_url: str, **kwargs: Any) -> JobClient:
        seen_urls.append(rest_url)
        return JobClient(rest_url, backoff=0.0, transport=httpx.MockTransport(fake), **kwargs)

    monkeypatch.setattr(cli, "JobClient", client_factory)
    monkeypatch.setattr(cli, "_SAVEPOINT_POLL_SECONDS", 0.0)
    fake.seen_urls = seen_urls  # type: ignore[attr-defined]
    return fake


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def invoke(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def assert_one_clean_error(err: str) -> None:
    assert err.startswith("error: ")
    assert "Traceback" not in err


# -- savepoint -------------------------------------------------------------------------------------


def test_savepoint_prints_the_path(rest: FakeRest, run: Run) -> None:
    code, out, err = run("savepoint", "-m", ADDRESS, JOB_ID, "/savepoints")
    assert code == 0, err
    assert f"Triggering savepoint for job {JOB_ID}." in out
    assert f"Savepoint completed. Path: {LOCATION}" in out.splitlines()
    assert rest.bodies("POST", f"/jobs/{JOB_ID}/savepoints") == [
        {"target-directory": "/savepoints", "cancel-job": False}
    ]
    assert rest.polls == 2
    assert rest.seen_urls == [f"http://{ADDRESS}"]  # type: ignore[attr-defined]


def test_savepoint_without_a_directory_leaves_it_to_the_jobmanager(rest: FakeRest, run: Run) -> None:
    code, out, _ = run("savepoint", "-m", ADDRESS, JOB_ID)
    assert code == 0
    assert rest.bodies("POST", f"/jobs/{JOB_ID}/savepoints") == [{"target-directory": None, "cancel-job": False}]


def test_a_failed_savepoint_exits_1_with_the_cause(rest: FakeRest, run: Run) -> None:
    rest.outcome = {
        "failure-cause": {
            "class": "OSError",
            "stack-trace": "OSError: No space left on device\n\nTraceback (most recent call last):\n  ...\n",
        }
    }
    code, out, err = run("savepoint", "-m", ADDRESS, JOB_ID)
    assert code == 1
    assert_one_clean_error(err)
    assert "OSError: No space left on device" in err.splitlines()[0]
    assert "Savepoint completed" not in out


def test_a_refused_savepoint_exits_1_with_the_jobmanagers_message(rest: FakeRest, run: Run) -> None:
    rest.trigger_answer = httpx.Response(409, json={"errors": [f"Job {JOB_ID} is FINISHED, not RUNNING."]})
    code, _, err = run("savepoint", "-m", ADDRESS, JOB_ID)
    assert code == 1
    assert err == f"error: Job {JOB_ID} is FINISHED, not RUNNING.\n"
    assert rest.polls == 0


def test_savepoint_timeout_exits_1_naming_the_request(rest: FakeRest, run: Run) -> None:
    rest.polls = -(10**6)  # stays IN_PROGRESS
    code, _, err = run("savepoint", "-m", ADDRESS, "--timeout", "0.05", JOB_ID)
    assert code == 1
    assert_one_clean_error(err)
    assert REQUEST_ID in err and "0.05 s" in err


def test_interrupting_the_wait_says_the_savepoint_goes_on(
    rest: FakeRest, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(JobClient, "wait_for_savepoint", interrupted)
    code, _, err = run("savepoint", "-m", ADDRESS, JOB_ID)
    assert code == cli.EXIT_INTERRUPTED
    assert f"savepoint request {REQUEST_ID} of job {JOB_ID} goes on" in err
    assert err.splitlines()[-1] == "error: interrupted"


@pytest.mark.parametrize(
    "argv", [["savepoint"], ["savepoint", JOB_ID, "/a", "/b"], ["savepoint", "--timeout", "0", JOB_ID]]
)
def test_savepoint_usage_errors_exit_2(rest: FakeRest, run: Run, argv: list[str]) -> None:
    code, _, err = run(*argv)
    assert code == cli.EXIT_USAGE
    assert "error:" in err
    assert rest.requests == []


# -- stop --------------------------------------------------------------------------------------------


def test_stop_suspends_with_a_savepoint_and_prints_the_path(rest: FakeRest, run: Run) -> None:
    code, out, err = run("stop", "-m", ADDRESS, "--savepointPath", "/savepoints", JOB_ID)
    assert code == 0, err
    assert f'Suspending job "{JOB_ID}" with a savepoint.' in out
    assert f"Savepoint completed. Path: {LOCATION}" in out.splitlines()
    assert rest.bodies("POST", f"/jobs/{JOB_ID}/stop") == [{"targetDirectory": "/savepoints", "drain": False}]


def test_stop_with_drain_and_short_options(rest: FakeRest, run: Run) -> None:
    code, out, _ = run("stop", "-m", ADDRESS, "-p", "/sp", "-d", JOB_ID)
    assert code == 0
    assert f'Draining job "{JOB_ID}" with a savepoint.' in out
    assert rest.bodies("POST", f"/jobs/{JOB_ID}/stop") == [{"targetDirectory": "/sp", "drain": True}]


def test_stop_of_an_unknown_job_exits_1(rest: FakeRest, run: Run) -> None:
    rest.trigger_answer = httpx.Response(404, json={"errors": [f"Job {JOB_ID} not found."]})
    code, out, err = run("stop", "-m", ADDRESS, JOB_ID)
    assert code == 1
    assert err == f"error: Job {JOB_ID} not found.\n"
    assert "Savepoint completed" not in out


# -- run -s ---------------------------------------------------------------------------------------------


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    graph = JobGraph(name="noop", vertices=[JobVertex(id="v", name="V", invokable="noop")], config={"k": "v"})
    path = tmp_path / "job.json"
    path.write_bytes(graph.to_json())
    return path


def test_run_from_savepoint_submits_the_savepoint_path(rest: FakeRest, run: Run, job_file: Path) -> None:
    code, out, err = run("run", "-m", ADDRESS, "-d", "-s", "/savepoints/sp-1", "-n", str(job_file))
    assert code == 0, err
    (body,) = rest.bodies("POST", "/jobs")
    assert out.strip() == body["job_id"]
    assert body["config"] == {
        "k": "v",
        "execution.savepoint.path": "/savepoints/sp-1",
        "execution.savepoint.ignore-unclaimed-state": True,
    }
    assert json.loads(job_file.read_text())["config"] == {"k": "v"}  # the file is left alone


def test_run_long_options(rest: FakeRest, run: Run, job_file: Path) -> None:
    code, _, err = run("run", "-m", ADDRESS, "-d", "--fromSavepoint", "/sp", str(job_file))
    assert code == 0, err
    (body,) = rest.bodies("POST", "/jobs")
    assert body["config"] == {"k": "v", "execution.savepoint.path": "/sp"}


def test_allow_non_restored_state_without_a_savepoint_is_a_usage_error(
    rest: FakeRest, run: Run, job_file: Path
) -> None:
    code, _, err = run("run", "-m", ADDRESS, "-d", "--allowNonRestoredState", str(job_file))
    assert code == cli.EXIT_USAGE
    assert err == "error: -n/--allowNonRestoredState needs -s/--fromSavepoint PATH\n"
    assert rest.requests == []


def test_every_subcommand_has_a_command_to_run() -> None:
    import argparse

    from flink_runtime.client import cli
    from flink_runtime.client.cli_arguments import build_parser

    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    assert set(subcommands.choices) == set(cli._COMMANDS)  # noqa: SLF001
