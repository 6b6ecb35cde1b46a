"""Record a real Flink standalone cluster's REST answers, and the requests its CLI sends.

Why: our REST API must answer as Flink's does, closely enough that Flink's own CLI
(and any typed client) works against it. These recordings are the reference our
answers are held against; they are made once, by hand, with

    /work/main/.venv/bin/python tests/flink_reference/record.py

and committed under ``tests/flink_reference/recorded/``. This is a tool, not a test.

What it does: installs (or finds) the cached apache-flink (tests/flink_tools.py),
starts one JobManager and one TaskManager on loopback ports with a private conf and
log folder, submits PyFlink SQL programs (tests/flink_reference/jobs.py) with the real
CLI (a finished batch job, a failing job, and streaming jobs that checkpoint), records
the REST answers of each situation as pretty JSON (one file each: ``{request, status,
body}``), then runs the CLI's savepoint, checkpoint, list, stop and cancel actions
through a small logging HTTP proxy and records what they send (``cli_requests.json``).
``recorded/index.json`` lists each file with the job and situation that produced it.
The cluster is stopped at the end, also on error, and no Flink JVM is left running.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.flink_tools import (  # noqa: E402
    FLINK_VERSION,
    flink_cli,
    flink_env,
    flink_home,
    flink_python,
    private_conf_dir,
)

HERE = Path(__file__).resolve().parent
OUT = HERE / "recorded"
JOBS = HERE / "jobs.py"
UNKNOWN_JOB = "0123456789abcdef0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------------------
# Recording REST answers


class Recorder:
    """Sends requests to the cluster and saves ``{request, status, body}`` files."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.Client(base_url=base_url, timeout=30)
        self.index: dict[str, dict[str, str]] = {}

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.http.request(method, path, json=body) if body is not None else self.http.request(method, path)

    def record(self, name: str, method: str, path: str, body: Any = None, job: str = "", note: str = "") -> Any:
        """One request, saved as recorded/<name>.json; returns the decoded answer."""
        response = self.call(method, path, body)
        self.save(name, method, path, body, response.status_code, _decode(response), job, note)
        return _decode(response)

    def save(self, name: str, method: str, path: str, body: Any, status: int, answer: Any, job: str, note: str) -> None:
        request: dict[str, Any] = {"method": method, "path": path}
        if body is not None:
            request["body"] = body
        document = {"request": request, "status": status, "body": answer}
        (OUT / f"{name}.json").write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
        self.index[f"{name}.json"] = {"job": job, "situation": note or f"{method} {path}"}
        log(f"recorded {name}.json ({status})")

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        response.raise_for_status()
        return response.json()

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 120.0, every: float = 0.5) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = check()
            except httpx.HTTPError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(every)

    def wait_state(self, job_id: str, states: set[str], timeout: float = 120.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            job = self.get(f"/jobs/{job_id}")
            return job if job["state"] in states else None

        return self.wait(f"job {job_id} in {sorted(states)}", check, timeout)

    def wait_running(self, job_id: str) -> dict[str, Any]:
        """Until the job and every vertex are RUNNING (a job is RUNNING before its tasks are)."""

        def check() -> dict[str, Any] | None:
            job = self.get(f"/jobs/{job_id}")
            if job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"]):
                return job
            return None

        return self.wait(f"job {job_id} and its tasks RUNNING", check)

    def poll_operation(self, path: str, timeout: float = 90.0) -> tuple[Any, Any, int]:
        """Poll an asynchronous operation's status; its first and its COMPLETED answer, and the count."""
        first: Any = None
        polls = 0

        def check() -> Any:
            nonlocal first, polls
            answer = self.get(path)
            polls += 1
            if first is None:
                first = answer
            return answer if answer.get("status", {}).get("id") == "COMPLETED" else None

        final = self.wait(f"{path} COMPLETED", check, timeout, every=0.2)
        return first, final, polls


def _decode(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        text = response.text
        return {"_not_json": text[:2000], "_content_type": response.headers.get("content-type", "")}


# --------------------------------------------------------------------------------------
# A logging proxy in front of the REST endpoint, to see what the CLI sends


class LoggingProxy:
    """Forwards every request to the real REST endpoint and keeps method, path, body, answer."""

    def __init__(self, target_port: int) -> None:
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "connection"}}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                answer = upstream.getresponse()
                payload = answer.read()
                upstream.close()
                proxy.keep(self.command, self.path, dict(self.headers.items()), body, answer.status, payload)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in {"content-length", "connection", "transfer-encoding"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def keep(self, method: str, path: str, headers: dict[str, str], body: bytes, status: int, answer: bytes) -> None:
        entry: dict[str, Any] = {"method": method, "path": path}
        kept = {k: v for k, v in headers.items() if k.lower() in {"content-type", "accept"}}
        if kept:
            entry["headers"] = kept
        if body:
            entry["body"] = _json_or_text(body)
        entry["status"] = status
        entry["response"] = _json_or_text(answer)
        with self.lock:
            self.records.append(entry)

    def take(self) -> list[dict[str, Any]]:
        """The requests since the last take, consecutive identical ones collapsed."""
        with self.lock:
            taken, self.records = self.records, []
        collapsed: list[dict[str, Any]] = []
        for entry in taken:
            if collapsed and {k: v for k, v in collapsed[-1].items() if k != "repeated"} == entry:
                collapsed[-1]["repeated"] = collapsed[-1].get("repeated", 1) + 1
            else:
                collapsed.append(entry)
        return collapsed

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")[:2000]


# --------------------------------------------------------------------------------------
# The cluster


class Cluster:
    def __init__(self, work: Path) -> None:
        self.home = flink_home()
        self.python = flink_python()
        self.work = work
        self.rest_port = free_port()
        self.checkpoints = work / "checkpoints"
        self.savepoints = work / "savepoints"
        self.settings: dict[str, object] = {
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.port": free_port(),
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.rpc.port": free_port(),
            "taskmanager.data.port": free_port(),
            "blob.server.port": str(free_port()),
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.memory.process.size": "1280m",
            "taskmanager.numberOfTaskSlots": 2,
            "parallelism.default": 1,
            "execution.checkpointing.interval": "2 s",
            "execution.checkpointing.dir": f"file://{self.checkpoints}",
            "execution.checkpointing.savepoint-dir": f"file://{self.savepoints}",
            "python.executable": str(self.python),
            "python.client.executable": str(self.python),
        }
        self.conf = private_conf_dir(self.home, work / "conf", self.settings)
        self.logs = work / "log"
        self.env = flink_env(
            self.home,
            self.conf,
            {"FLINK_LOG_DIR": str(self.logs), "FLINK_PID_DIR": str(work / "pid"), "FLINK_IDENT_STRING": "reference"},
        )

    @property
    def rest_address(self) -> str:
        return f"127.0.0.1:{self.rest_port}"

    def script(self, name: str, action: str) -> None:
        command = [str(self.home / "bin" / name), action]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}: {done.stdout}{done.stderr}")

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)  # flink-daemon.sh redirects into it; it must exist
        log(f"starting a JobManager and a TaskManager (REST on {self.rest_address}, work {self.work})")
        self.script("jobmanager.sh", "start")
        self.script("taskmanager.sh", "start")

    def stop(self) -> None:
        for name in ("taskmanager.sh", "jobmanager.sh"):
            try:
                self.script(name, "stop")
            except Exception as exc:  # keep stopping the other one
                log(f"{name} stop failed: {exc}")
        # Anything of ours still alive (its command line names our conf dir) is killed.
        deadline = time.monotonic() + 20
        while self.own_pids() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.own_pids():
            log(f"killing leftover Flink process {pid}")
            os.kill(pid, signal.SIGKILL)

    def own_pids(self) -> list[int]:
        found = subprocess.run(["pgrep", "-f", str(self.conf)], capture_output=True, text=True)
        return [int(p) for p in found.stdout.split() if int(p) != os.getpid()]

    def logs_tail(self, lines: int = 40) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")):
            out.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def cli(
        self, args: list[str], rest_address: str | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess:
        return flink_cli(self.home, args, rest_address or self.rest_address, timeout, conf_dir=self.conf)

    def submit(self, kind: str) -> str:
        """``flink run -d -py jobs.py <kind>``; the job id the CLI printed."""
        began = time.monotonic()
        done = self.cli(["run", "-d", "-py", str(JOBS), kind])
        found = re.search(r"JobID ([0-9a-f]{32})", done.stdout) or re.search(
            r"submitted job ([0-9a-f]{32})", done.stdout
        )
        if done.returncode != 0 or not found:
            raise RuntimeError(
                f"flink run {kind} exited with {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        log(f"submitted the {kind} job {found.group(1)} in {time.monotonic() - began:.1f} s")
        return found.group(1)


@contextmanager
def running_cluster(work: Path) -> Iterator[Cluster]:
    cluster = Cluster(work)
    try:
        cluster.start()
        yield cluster
    except BaseException:
        log("failed; the cluster's last log lines:\n" + cluster.logs_tail())
        raise
    finally:
        log("stopping the cluster")
        cluster.stop()


# --------------------------------------------------------------------------------------
# The recording session


def record_status(rec: Recorder, name: str, path: str, job: str) -> None:
    """Poll an operation to COMPLETED and save its final status."""
    first, final, polls = rec.poll_operation(path)
    rec.save(name, "GET", path, None, 200, final, job, f"the operation's status once COMPLETED ({polls} polls)")


def record_all(cluster: Cluster) -> dict[str, Any]:
    rec = Recorder(f"http://{cluster.rest_address}")
    rec.wait("a registered TaskManager", lambda: rec.get("/overview")["taskmanagers"] >= 1, timeout=120)
    jobs: dict[str, str] = {}

    # Cluster-wide answers, before any job.
    rec.record("config", "GET", "/config", job="-")
    rec.record("v1_config", "GET", "/v1/config", job="-")
    rec.record("jobmanager_config", "GET", "/jobmanager/config", job="-")
    taskmanagers = rec.record("taskmanagers", "GET", "/taskmanagers", job="-")
    tm_id = taskmanagers["taskmanagers"][0]["id"]
    rec.record("taskmanager", "GET", f"/taskmanagers/{tm_id}", job="-")
    rec.record("job_unknown", "GET", f"/jobs/{UNKNOWN_JOB}", job="-", note="an unknown job id: 404")
    rec.record("job_malformed_id", "GET", "/jobs/not-a-job-id", job="-", note="a job id that is not 32 hex digits")
    rec.record("job_unknown_status", "GET", f"/jobs/{UNKNOWN_JOB}/status", job="-")
    rec.record("job_unknown_execution_result", "GET", f"/jobs/{UNKNOWN_JOB}/execution-result", job="-")
    trigger = rec.record("job_unknown_savepoint_trigger", "POST", f"/jobs/{UNKNOWN_JOB}/savepoints", {}, job="-")
    record_status(rec, "job_unknown_savepoint_status", f"/jobs/{UNKNOWN_JOB}/savepoints/{trigger['request-id']}", "-")
    probes = {}
    for path in ("/", "/v1", "/v1/", "/openapi.json", "/v1/openapi.json", "/v2/config", "/nope"):
        response = rec.call("GET", path)
        probes[path] = {
            "status": response.status_code,
            "content-type": response.headers.get("content-type", ""),
            "body_start": response.text[:300],
        }
    (OUT / "rest_probes.json").write_text(json.dumps(probes, indent=2) + "\n")
    rec.index["rest_probes.json"] = {"job": "-", "situation": "GET of /, /v1/, OpenAPI paths, an unknown path"}

    # A finished batch job.
    jobs["batch"] = batch = cluster.submit("batch")
    rec.wait_state(batch, {"FINISHED", "FAILED"})
    rec.record("job_finished", "GET", f"/jobs/{batch}", job="batch")
    rec.record("job_finished_status", "GET", f"/jobs/{batch}/status", job="batch")
    rec.record("job_finished_execution_result", "GET", f"/jobs/{batch}/execution-result", job="batch")
    rec.record("job_finished_exceptions", "GET", f"/jobs/{batch}/exceptions", job="batch")
    rec.record("job_finished_accumulators", "GET", f"/jobs/{batch}/accumulators", job="batch")
    rec.record("job_finished_checkpoints", "GET", f"/jobs/{batch}/checkpoints", job="batch")
    vertex = rec.get(f"/jobs/{batch}")["vertices"][0]["id"]
    rec.record("job_finished_vertex", "GET", f"/jobs/{batch}/vertices/{vertex}", job="batch")
    trigger = rec.record(
        "job_finished_savepoint_trigger", "POST", f"/jobs/{batch}/savepoints", {"cancel-job": False}, job="batch"
    )
    record_status(rec, "job_finished_savepoint_status", f"/jobs/{batch}/savepoints/{trigger['request-id']}", "batch")

    # A failing job: fails on its first row, restarts twice, then FAILED.
    jobs["failing"] = failing = cluster.submit("failing")
    rec.wait_state(failing, {"FAILED"}, timeout=180)
    rec.record("job_failed", "GET", f"/jobs/{failing}", job="failing")
    rec.record("job_failed_status", "GET", f"/jobs/{failing}/status", job="failing")
    rec.record("job_failed_execution_result", "GET", f"/jobs/{failing}/execution-result", job="failing")
    rec.record("job_failed_exceptions", "GET", f"/jobs/{failing}/exceptions", job="failing")
    rec.record("job_failed_exceptions_max1", "GET", f"/jobs/{failing}/exceptions?maxExceptions=1", job="failing")
    vertex = rec.get(f"/jobs/{failing}")["vertices"][0]["id"]
    rec.record("job_failed_vertex", "GET", f"/jobs/{failing}/vertices/{vertex}", job="failing")

    # A streaming job that checkpoints every 2 s.
    jobs["streaming"] = stream = cluster.submit("streaming")
    # Its first answers, before its tasks run (the execution result is still IN_PROGRESS).
    rec.record("job_running_execution_result", "GET", f"/jobs/{stream}/execution-result", job="streaming")
    rec.wait_running(stream)
    rec.wait("2 completed checkpoints", lambda: rec.get(f"/jobs/{stream}/checkpoints")["counts"]["completed"] >= 2)
    rec.record("overview", "GET", "/overview", job="all", note="batch finished, failing failed, streaming running")
    rec.record("jobs_overview", "GET", "/jobs/overview", job="all")
    rec.record("jobs", "GET", "/jobs", job="all")
    rec.record("job_running", "GET", f"/jobs/{stream}", job="streaming")
    rec.record("job_running_status", "GET", f"/jobs/{stream}/status", job="streaming")
    rec.record("job_running_exceptions", "GET", f"/jobs/{stream}/exceptions", job="streaming")
    rec.record("job_running_accumulators", "GET", f"/jobs/{stream}/accumulators", job="streaming")
    checkpoints = rec.record("job_running_checkpoints", "GET", f"/jobs/{stream}/checkpoints", job="streaming")
    rec.record("job_running_checkpoints_config", "GET", f"/jobs/{stream}/checkpoints/config", job="streaming")
    cid = checkpoints["latest"]["completed"]["id"]
    rec.record("job_running_checkpoint_details", "GET", f"/jobs/{stream}/checkpoints/details/{cid}", job="streaming")
    rec.record(
        "job_running_checkpoint_details_unknown", "GET", f"/jobs/{stream}/checkpoints/details/999999", job="streaming"
    )
    for vertex in rec.get(f"/jobs/{stream}")["vertices"]:
        rec.record("job_running_vertex", "GET", f"/jobs/{stream}/vertices/{vertex['id']}", job="streaming")
        break

    # Checkpoints on demand: default type, then FULL.
    for name, body in (("checkpoint", {}), ("checkpoint_full", {"checkpointType": "FULL"})):
        trigger = rec.record(f"{name}_trigger", "POST", f"/jobs/{stream}/checkpoints", body, job="streaming")
        path = f"/jobs/{stream}/checkpoints/{trigger['request-id']}"
        first, final, polls = rec.poll_operation(path)
        rec.save(f"{name}_status_first", "GET", path, None, 200, first, "streaming", "first poll right after trigger")
        rec.save(f"{name}_status_completed", "GET", path, None, 200, final, "streaming", f"after {polls} polls")
    rec.record(
        "checkpoint_status_unknown_trigger",
        "GET",
        f"/jobs/{stream}/checkpoints/{UNKNOWN_JOB}",
        job="streaming",
        note="a trigger id never issued",
    )

    # Savepoints: to a directory, with a client triggerId (and that id again), default dir, failing.
    target = f"file://{cluster.savepoints}"
    trigger = rec.record(
        "savepoint_trigger",
        "POST",
        f"/jobs/{stream}/savepoints",
        {"target-directory": target, "cancel-job": False},
        job="streaming",
    )
    path = f"/jobs/{stream}/savepoints/{trigger['request-id']}"
    first, final, polls = rec.poll_operation(path)
    rec.save("savepoint_status_first", "GET", path, None, 200, first, "streaming", "first poll right after trigger")
    rec.save("savepoint_status_completed", "GET", path, None, 200, final, "streaming", f"after {polls} polls")

    client_id = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
    body = {"cancel-job": False, "triggerId": client_id, "formatType": "CANONICAL"}
    trigger = rec.record(
        "savepoint_trigger_with_trigger_id",
        "POST",
        f"/jobs/{stream}/savepoints",
        body,
        job="streaming",
        note="no target-directory (the cluster's default), a client triggerId",
    )
    rec.record(
        "savepoint_trigger_repeated_trigger_id",
        "POST",
        f"/jobs/{stream}/savepoints",
        body,
        job="streaming",
        note="the same triggerId again, while or after the first ran",
    )
    path = f"/jobs/{stream}/savepoints/{client_id}"
    first, final, polls = rec.poll_operation(path)
    rec.save("savepoint_with_trigger_id_status_completed", "GET", path, None, 200, final, "streaming", f"{polls} polls")
    rec.record(
        "savepoint_trigger_repeated_trigger_id_after_completion",
        "POST",
        f"/jobs/{stream}/savepoints",
        body,
        job="streaming",
        note="the same triggerId once its savepoint completed",
    )

    trigger = rec.record(
        "savepoint_failed_trigger",
        "POST",
        f"/jobs/{stream}/savepoints",
        {"target-directory": "file:///proc/nope", "cancel-job": False},
        job="streaming",
        note="a target directory that cannot be written",
    )
    path = f"/jobs/{stream}/savepoints/{trigger['request-id']}"
    first, final, polls = rec.poll_operation(path)
    rec.save("savepoint_status_failed", "GET", path, None, 200, final, "streaming", "the failed savepoint's status")
    rec.record(
        "savepoint_status_unknown_trigger",
        "GET",
        f"/jobs/{stream}/savepoints/{UNKNOWN_JOB}",
        job="streaming",
        note="a trigger id never issued",
    )
    rec.record("job_running_checkpoints_after_savepoints", "GET", f"/jobs/{stream}/checkpoints", job="streaming")

    # The CLI through a logging proxy: what each action sends.
    proxy = LoggingProxy(cluster.rest_port)
    via = f"127.0.0.1:{proxy.port}"
    cli_log: list[dict[str, Any]] = []

    def cli(label: str, args: list[str]) -> subprocess.CompletedProcess:
        began = time.monotonic()
        done = cluster.cli(args, rest_address=via)
        seconds = round(time.monotonic() - began, 1)
        output = (done.stdout + done.stderr).strip().splitlines()
        cli_log.append(
            {
                "label": label,
                "command": ["flink", *args],
                "exit_code": done.returncode,
                "seconds": seconds,
                "output": output if len(output) <= 20 else [*output[:14], "...", *output[-5:]],
                "requests": proxy.take(),
            }
        )
        log(f"flink {' '.join(args)}: exit {done.returncode} in {seconds} s")
        return done

    try:
        cli("list", ["list"])
        cli("list --all", ["list", "-a"])
        cli("checkpoint", ["checkpoint", stream])
        cli("checkpoint --full", ["checkpoint", "--full", stream])
        cli("savepoint", ["savepoint", stream, target])
        cli("savepoint (the cluster's default directory)", ["savepoint", stream])
        cli("savepoint to an unwritable directory", ["savepoint", stream, "file:///proc/nope"])
        cli("stop --savepointPath", ["stop", "--savepointPath", target, stream])
        rec.wait_state(stream, {"FINISHED", "FAILED", "CANCELED"})
        rec.record("job_stopped", "GET", f"/jobs/{stream}", job="streaming", note="after flink stop --savepointPath")
        rec.record("job_stopped_status", "GET", f"/jobs/{stream}/status", job="streaming")
        rec.record("job_stopped_execution_result", "GET", f"/jobs/{stream}/execution-result", job="streaming")
        rec.record("job_stopped_checkpoints", "GET", f"/jobs/{stream}/checkpoints", job="streaming")
        rec.record(
            "job_stopped_savepoint_trigger",
            "POST",
            f"/jobs/{stream}/savepoints",
            {"cancel-job": False},
            job="streaming",
        )

        jobs["streaming-drain"] = drain = cluster.submit("streaming")
        rec.wait_running(drain)
        cli("stop --drain", ["stop", "--drain", "--savepointPath", target, drain])
        rec.wait_state(drain, {"FINISHED", "FAILED", "CANCELED"})
        rec.record("job_drained", "GET", f"/jobs/{drain}", job="streaming-drain", note="after flink stop --drain")

        jobs["streaming-cancel"] = cancel = cluster.submit("streaming")
        rec.wait_running(cancel)
        cli("cancel", ["cancel", cancel])
        rec.wait_state(cancel, {"CANCELED", "FAILED"})
        rec.record("job_canceled", "GET", f"/jobs/{cancel}", job="streaming-cancel")
        rec.record("job_canceled_status", "GET", f"/jobs/{cancel}/status", job="streaming-cancel")
        rec.record("job_canceled_execution_result", "GET", f"/jobs/{cancel}/execution-result", job="streaming-cancel")
        rec.record(
            "job_canceled_cancel_again",
            "PATCH",
            f"/jobs/{cancel}?mode=cancel",
            job="streaming-cancel",
            note="cancelling a job that already ended",
        )
        cli("cancel an unknown job", ["cancel", UNKNOWN_JOB])
        cli("stop an unknown job", ["stop", UNKNOWN_JOB])
        cli("list after all ended", ["list", "-a"])
    finally:
        proxy.close()
        (OUT / "cli_requests.json").write_text(json.dumps(cli_log, indent=2) + "\n")
        rec.index["cli_requests.json"] = {
            "job": "streaming, streaming-drain, streaming-cancel",
            "situation": "each CLI action: its requests (method, path, body), the answers, exit code, output tail",
        }
    rec.record("overview_end", "GET", "/overview", job="all", note="all jobs ended")
    rec.record("jobs_overview_end", "GET", "/jobs/overview", job="all", note="all jobs ended")
    return {"jobs": jobs, "index": rec.index}


def main() -> int:
    # A SIGTERM (or Ctrl-C) unwinds through the finally blocks, which stop the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="flink-reference-"))
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    try:
        with running_cluster(work) as cluster:
            result = record_all(cluster)
    finally:
        leftover = subprocess.run(["pgrep", "-af", "org.apache.flink"], capture_output=True, text=True).stdout
        mine = [line for line in leftover.splitlines() if str(work) in line]
        if mine:
            log("Flink processes of this run still alive:\n" + "\n".join(mine))
        shutil.rmtree(work, ignore_errors=True)
    meta = {
        "flink_version": FLINK_VERSION,
        "recorded_on": dt.date.today().isoformat(),
        "command": "/work/main/.venv/bin/python tests/flink_reference/record.py",
        "seconds": round(time.monotonic() - began),
        "jobs": result["jobs"],
        "files": dict(sorted(result["index"].items())),
    }
    (OUT / "index.json").write_text(json.dumps(meta, indent=2) + "\n")
    log(f"done in {meta['seconds']} s: {len(meta['files'])} files in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
