"""The log endpoints against a stub JobManager: statuses, headers and JSON errors."""

from __future__ import annotations

import logging.handlers
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobmanager.restful_gateway import RestfulGateway
from flink_runtime.logs import service
from flink_runtime.logs.files import ProcessLogs
from flink_runtime.rest.errors import install_error_handlers
from flink_runtime.rest.log_routes import log_routes
from flink_runtime.rpc.messages import RequestLogFile, RequestLogFiles, RequestTaskLog
from flink_runtime.rpc.service import AskTimeoutError, RpcException

JOB = "0123456789abcdef0123456789abcdef"
PREFIX = "flink-runtime-minicluster-pid1-host"
CONTENT = "".join(
    f"2026-11-23 10:31:0{n},000 INFO  flink_runtime.taskmanager.task "
    f"[job={JOB} vertex=sum subtask={n % 2} attempt=0] line {n}\n"
    for n in range(6)
)


class StubRpc:
    """TaskManagers that answer from this process's files, as a MiniCluster's do."""

    async def ask(self, address: str, message: Any, timeout: float) -> Any:
        if address == "tcp://slow":
            raise AskTimeoutError("no answer")
        if address == "tcp://gone":
            raise RpcException("cannot send: queue full")
        if isinstance(message, RequestLogFiles):
            return service.log_files()
        if isinstance(message, RequestLogFile):
            return service.log_file(message)
        if isinstance(message, RequestTaskLog):
            return service.task_log(message)
        raise AssertionError(message)


@pytest.fixture
def rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, SimpleNamespace]]:
    handler = logging.handlers.RotatingFileHandler(tmp_path / f"{PREFIX}.log", delay=True)
    process_logs = ProcessLogs(tmp_path, PREFIX, max_bytes=1 << 20, max_files=3, handler=handler)
    (tmp_path / f"{PREFIX}.log").write_text(CONTENT)
    (tmp_path / f"{PREFIX}.out").write_text("ready\n")
    monkeypatch.setattr(service, "active", lambda: process_logs)
    job = SimpleNamespace(graph=SimpleNamespace(vertices={"sum": SimpleNamespace(id="sum", parallelism=2)}))
    job.status = JobStatus.RUNNING
    jobmanager = SimpleNamespace(
        rpc=StubRpc(),
        ask_timeout=1.0,
        jobs={JOB: job},
        archived={},
        task_managers={
            "tm-0": SimpleNamespace(task_manager_id="tm-0", address="tcp://tm-0"),
            "tm-1": SimpleNamespace(task_manager_id="tm-1", address="tcp://tm-1"),
        },
    )
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(log_routes(RestfulGateway(jobmanager, None)))  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, jobmanager
    handler.close()


def test_file_lists_as_flinks_log_list_info(rest: tuple[TestClient, Any]) -> None:
    client, _ = rest
    for path in ("/jobmanager/logs", "/taskmanagers/tm-0/logs"):
        logs = client.get(path).json()["logs"]
        assert [entry["name"] for entry in logs] == [f"{PREFIX}.log", f"{PREFIX}.out"]
        assert logs[0]["size"] == len(CONTENT) and logs[0]["mtime"] > 0


@pytest.mark.parametrize("base", ["/jobmanager", "/taskmanagers/tm-1"])
def test_files_whole_and_by_range(rest: tuple[TestClient, Any], base: str) -> None:
    client, _ = rest
    whole = client.get(f"{base}/log")
    assert whole.status_code == 200 and whole.text == CONTENT
    assert whole.headers["content-type"].startswith("text/plain") and whole.headers["accept-ranges"] == "bytes"
    assert client.get(f"{base}/stdout").text == "ready\n"
    assert client.get(f"{base}/logs/{PREFIX}.out").text == "ready\n"
    part = client.get(f"{base}/log", headers={"Range": "bytes=5-9"})
    assert part.status_code == 206 and part.content == CONTENT.encode()[5:10]
    assert part.headers["content-range"] == f"bytes 5-9/{len(CONTENT)}"
    suffix = client.get(f"{base}/log", headers={"Range": "bytes=-7"})
    assert suffix.status_code == 206 and suffix.text == CONTENT[-7:]
    beyond = client.get(f"{base}/log", headers={"Range": f"bytes={len(CONTENT)}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{len(CONTENT)}"
    assert "the file has" in beyond.json()["errors"][0]
    malformed = client.get(f"{base}/log", headers={"Range": "lines=1-2"})
    assert malformed.status_code == 400 and "bytes=first-last" in malformed.json()["errors"][0]


@pytest.mark.parametrize("base", ["/jobmanager", "/taskmanagers/tm-0"])
@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("..%2f..%2fetc%2fpasswd", 404),  # %2f is a separator to the router: no such path
        ("%2Fetc%2Fpasswd", 404),
        ("..", 404),  # the client resolves the dot segment: GET /jobmanager, no such path
        ("%2E%2E", 400),
        ("..%5Cx", 400),
        ("%00", 400),
        (".bashrc", 400),
        ("flink-runtime-jobmanager-1-other.log", 404),
        (f"{PREFIX}.log.9", 404),
    ],
)
def test_hostile_names_are_json_errors(rest: tuple[TestClient, Any], base: str, name: str, status: int) -> None:
    client, _ = rest
    answer = client.get(f"{base}/logs/{name}")
    assert answer.status_code == status, answer.text
    assert answer.json()["errors"]


def test_taskmanagers_unknown_or_silent(rest: tuple[TestClient, Any]) -> None:
    client, jobmanager = rest
    assert client.get("/taskmanagers/nope/log").status_code == 404
    jobmanager.task_managers["tm-slow"] = SimpleNamespace(task_manager_id="tm-slow", address="tcp://slow")
    jobmanager.task_managers["tm-gone"] = SimpleNamespace(task_manager_id="tm-gone", address="tcp://gone")
    slow = client.get("/taskmanagers/tm-slow/log")
    assert slow.status_code == 504 and "did not answer within 1 s" in slow.json()["errors"][0]
    gone = client.get("/taskmanagers/tm-gone/logs")
    assert gone.status_code == 503 and "queue full" in gone.json()["errors"][0]
    # A job's lines still come from those that answer, and the answer names the others.
    answer = client.get(f"/jobs/{JOB}/log").json()
    assert len(answer["lines"]) == 6
    assert [item["taskmanager"] for item in answer["unreachable"]] == ["tm-gone", "tm-slow"]
    # None answering is an error, not an empty log.
    del jobmanager.task_managers["tm-0"], jobmanager.task_managers["tm-1"]
    nobody = client.get(f"/jobs/{JOB}/vertices/sum/subtasks/0/log")
    assert nobody.status_code == 503 and "No TaskManager answered" in nobody.json()["errors"][0]
    assert "tm-slow: TaskManager tm-slow did not answer" in nobody.json()["errors"][0]


def test_a_jobs_lines_merged_once_and_filtered(rest: tuple[TestClient, Any]) -> None:
    client, _ = rest
    answer = client.get(f"/jobs/{JOB}/log").json()
    # Both TaskManagers read the same (shared) file: every line once, in order.
    assert [line.rsplit(" ", 1)[1] for line in answer["lines"]] == ["0", "1", "2", "3", "4", "5"]
    assert not answer["truncated"] and answer["unreachable"] == []
    # The next poll starts a few seconds before the newest line, never before its own start.
    assert answer["state"] == "RUNNING" and answer["next"] == "2026-11-23 10:31:00,000"
    later = client.get(f"/jobs/{JOB}/log", params={"since": "2026-11-23 10:31:04,500", "subtask": 1}).json()
    assert [line.rsplit(" ", 1)[1] for line in later["lines"]] == ["5"]
    assert later["next"] == "2026-11-23 10:31:04,500"
    subtask = client.get(f"/jobs/{JOB}/vertices/sum/subtasks/0/log")
    assert subtask.status_code == 200 and subtask.headers["content-type"].startswith("text/plain")
    assert [line.rsplit(" ", 1)[1] for line in subtask.text.splitlines()] == ["0", "2", "4"]


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/jobs/ffffffffffffffffffffffffffffffff/log", 404, "not found"),
        (f"/jobs/{JOB}/log?vertex=nope", 404, "has no vertex 'nope'"),
        (f"/jobs/{JOB}/vertices/sum/subtasks/2/log", 404, "has 2 subtasks"),
        (f"/jobs/{JOB}/vertices/sum/subtasks/x/log", 400, "subtask_index"),
        (f"/jobs/{JOB}/vertices/sum/subtasks/{2**70}/log", 400, "subtask_index"),
        (f"/jobs/{JOB}/vertices/sum/subtasks/-1/log", 400, "subtask_index"),
        (f"/jobs/{JOB}/log?vertex={'v' * 200}", 400, "vertex"),
        (f"/jobs/{JOB}/log?subtask=-1", 400, "subtask"),
        (f"/jobs/{JOB}/log?since=yesterday", 400, "since='yesterday'"),
    ],
)
def test_a_jobs_lines_refused_clearly(rest: tuple[TestClient, Any], path: str, status: int, message: str) -> None:
    client, _ = rest
    answer = client.get(path)
    assert answer.status_code == status
    assert message in " ".join(answer.json()["errors"])
