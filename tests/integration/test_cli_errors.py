"""A failing `flink-runtime` command prints one `error: ...` line naming the problem (and
at most a one-line hint), never a traceback: neither its own nor the one a JobManager
sends with an error. FLINK_RUNTIME_CLI_VERBOSE=1 shows the server's.

The CLI runs as a subprocess, as a user runs it: against the session MiniCluster, and
against a server replaying answers recorded from a real Flink 2 JobManager, whose errors
carry Java stack traces (tests/flink_reference/recorded).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

RECORDED = Path(__file__).parents[1] / "flink_reference" / "recorded"
ROOT = Path(__file__).parents[2]


def run_cli(*args: str, verbose: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLINK_RUNTIME_CLI_VERBOSE"}
    if verbose:
        env["FLINK_RUNTIME_CLI_VERBOSE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "flink_runtime.client.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


def assert_one_clean_error(result: subprocess.CompletedProcess[str], *names: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    assert len(lines) <= 2, result.stderr  # the error and at most a hint
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr and 'File "' not in result.stderr
    for name in names:
        assert name in lines[0], result.stderr


@pytest.fixture(scope="module")
def finished_job(minicluster: MiniCluster) -> str:
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(sleep_job(0.1, name="finished for the CLI"))
        assert client.wait(job_id, timeout=60).value == "FINISHED"
    return job_id


def test_errors_from_the_cluster_are_one_line(minicluster: MiniCluster, finished_job: str, tmp_path: Path) -> None:
    rest = minicluster.rest_url
    unknown = "0123456789abcdef0123456789abcdef"
    assert_one_clean_error(run_cli("savepoint", "-m", rest, unknown, str(tmp_path)), unknown, "not found")
    assert_one_clean_error(run_cli("stop", "-m", rest, "-p", str(tmp_path), finished_job), finished_job, "FINISHED")
    assert_one_clean_error(run_cli("savepoint", "-m", rest, "not-a-job-id", str(tmp_path)), "not-a-job-id")
    assert_one_clean_error(run_cli("cancel", "-m", rest, finished_job), finished_job, "FINISHED")
    assert_one_clean_error(run_cli("info", "-m", rest, "not-a-job-id"), "not-a-job-id")


class RecordedFlink(BaseHTTPRequestHandler):
    """Answers as the real Flink JobManager did (recorded bodies, their status codes)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/v1/jobs/not-a-job-id") or self.path.startswith("/jobs/not-a-job-id"):
            self._recorded("job_malformed_id")
        elif "/savepoints/" in self.path:
            self._recorded("job_unknown_savepoint_status")
        else:
            self._recorded("job_unknown")

    def do_POST(self) -> None:  # noqa: N802
        self._send(202, {"request-id": "9969459de76be66235ab1cd6eff7d017"})

    do_PATCH = do_GET

    def _recorded(self, name: str) -> None:
        recorded = json.loads((RECORDED / f"{name}.json").read_text())
        self._send(recorded["status"], recorded["body"])

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def flink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), RecordedFlink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_flink_servers_stack_traces_are_shown_only_on_request(flink: str, tmp_path: Path) -> None:
    unknown = "0123456789abcdef0123456789abcdef"
    malformed = run_cli("info", "-m", flink, "not-a-job-id")
    assert_one_clean_error(malformed, "could not parse parameters", "not-a-job-id")
    assert "FLINK_RUNTIME_CLI_VERBOSE=1" in malformed.stderr  # the hint
    savepoint = run_cli("savepoint", "-m", flink, unknown, str(tmp_path))
    assert_one_clean_error(savepoint, "Could not find Flink job", unknown)

    verbose = run_cli("info", "-m", flink, "not-a-job-id", verbose=True)
    assert verbose.returncode == 1 and verbose.stderr.startswith("error: ")
    assert "\tat org.apache.flink.runtime.rest.handler.AbstractHandler.respondAsLeader" in verbose.stderr
    debug = run_cli("savepoint", "-m", flink, unknown, str(tmp_path), "--log-level", "DEBUG")
    assert "\tat org.apache.flink.runtime.dispatcher.Dispatcher" in debug.stderr


@pytest.mark.parametrize("command", ["jobmanager", "minicluster"])
def test_a_job_store_that_cannot_be_opened_stops_the_start_in_one_line(command: str) -> None:
    result = run_cli(command, "-D", "jobstore.url=nosuchdb://host/db", "-D", "rest.port=0")
    assert_one_clean_error(result, "cannot start the JobManager", "job store nosuchdb://host/db")
