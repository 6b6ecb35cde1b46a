"""Log files of a real cluster: processes started through the CLI write them into
env.log.dir, rotate them, and the REST API and `flink-runtime logs` serve them."""

from __future__ import annotations

import logging
import logging.handlers
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from flink_runtime import logs
from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.minicluster import MiniCluster
from tests.conftest import fast_config
from tests.helpers.jobs import modulo_sum_job, sleep_job

pytestmark = pytest.mark.integration

HOST = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
TAG = re.compile(r"\[job=(\w+) vertex=(\S+) subtask=(\d+) attempt=(\d+)\] ")
SETTINGS = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "3 s",
    "task.cancellation.interval": "300 ms",
    # Small files, many of them: a job's lines rotate over several files and none are lost.
    "env.log.max-file-size": "512 b",
    "env.log.max": 50,
}


class Cluster:
    def __init__(self, standalone: StandaloneCluster, log_dir: Path, job_id: str) -> None:
        self.standalone = standalone
        self.url = standalone.rest_url
        self.log_dir = log_dir
        self.job_id = job_id

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=30, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("logs-cluster")
    log_dir = work / "log"
    properties = {**SETTINGS, "env.log.dir": str(log_dir)}
    with StandaloneCluster(work, properties=properties) as standalone:
        # One slot each: each TaskManager runs one of the job's two pipelines.
        standalone.start(taskmanagers=2, slots=1)
        with JobClient(standalone.rest_url) as client:
            job_id = client.submit(modulo_sum_job(work / "out", count=300))
            assert client.wait(job_id, timeout=120) is JobStatus.FINISHED
        yield Cluster(standalone, log_dir, job_id)


def cli(cluster: Cluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "flink_runtime.client.cli", "logs", "-m", cluster.url, *args]


def tags(lines: list[str]) -> set[tuple[str, str, int]]:
    return {(m.group(1), m.group(2), int(m.group(3))) for line in lines if (m := TAG.search(line))}


def test_processes_write_flink_named_files_into_env_log_dir(cluster: Cluster) -> None:
    jobmanager = f"flink-runtime-jobmanager-{cluster.standalone.rest_port}-{HOST}"
    names = {path.name for path in cluster.log_dir.iterdir()}
    for prefix in (jobmanager, f"flink-runtime-taskexecutor-tm-0-{HOST}", f"flink-runtime-taskexecutor-tm-1-{HOST}"):
        assert {f"{prefix}.log", f"{prefix}.out"} <= names
    # 512 bytes per file: the logs rotated (a file holds at most one line more than fits).
    assert f"flink-runtime-taskexecutor-tm-0-{HOST}.log.1" in names
    assert all(path.stat().st_size <= 2048 for path in cluster.log_dir.iterdir() if ".log" in path.name)

    listed = cluster.get("/jobmanager/logs").json()["logs"]
    assert {entry["name"] for entry in listed} == {name for name in names if name.startswith(jobmanager)}
    for entry in listed:
        assert entry["size"] == (cluster.log_dir / entry["name"]).stat().st_size and entry["mtime"] > 0
    log = cluster.get("/jobmanager/log")
    assert log.status_code in (200, 206) and log.headers["content-type"].startswith("text/plain")
    assert "flink_runtime.jobmanager" in log.text
    stdout = cluster.get("/jobmanager/stdout").text
    assert stdout.startswith("JobManager ready rpc=") and cluster.url in stdout


def test_a_taskmanagers_log_holds_its_own_lines(cluster: Cluster) -> None:
    listed = cluster.get("/taskmanagers/tm-0/logs").json()["logs"]
    names = [entry["name"] for entry in listed]
    assert names[0] == f"flink-runtime-taskexecutor-tm-0-{HOST}.log" and f"{names[0]}.1" in names
    assert all("tm-0" in name for name in names)
    whole = "".join(cluster.get(f"/taskmanagers/tm-0/logs/{name}").text for name in names if ".log" in name)
    other = "".join(
        (cluster.log_dir / entry["name"]).read_text()
        for entry in cluster.get("/taskmanagers/tm-1/logs").json()["logs"]
        if ".log" in entry["name"]
    )
    assert "tm-0 registered at JobManager" in whole and "tm-1 registered" not in whole
    # The subtasks that ran there, and only those.
    mine, theirs = tags(whole.splitlines()), tags(other.splitlines())
    assert mine and theirs and not mine & theirs
    assert mine | theirs == {(cluster.job_id, v, n) for v, p in (("src", 2), ("sum", 2), ("sink", 1)) for n in range(p)}
    assert cluster.get("/taskmanagers/tm-0/stdout").text.startswith("TaskManager tm-0 ready rpc=")
    assert cluster.get("/taskmanagers/tm-9/log").status_code == 404


def test_a_range_request_gets_exactly_those_bytes(cluster: Cluster) -> None:
    name = next(e["name"] for e in cluster.get("/taskmanagers/tm-1/logs").json()["logs"] if e["name"].endswith(".1"))
    on_disk = (cluster.log_dir / name).read_bytes()  # a rotated file: it no longer changes
    part = cluster.get(f"/taskmanagers/tm-1/logs/{name}", headers={"Range": "bytes=10-109"})
    assert part.status_code == 206 and part.content == on_disk[10:110]
    assert part.headers["content-range"] == f"bytes 10-109/{len(on_disk)}"
    tail = cluster.get(f"/taskmanagers/tm-1/logs/{name}", headers={"Range": "bytes=-50"})
    assert tail.status_code == 206 and tail.content == on_disk[-50:]
    beyond = cluster.get(f"/taskmanagers/tm-1/logs/{name}", headers={"Range": f"bytes={len(on_disk)}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{len(on_disk)}"
    assert cluster.get("/jobmanager/log", headers={"Range": "bytes=oops"}).status_code == 400


@pytest.mark.parametrize("base", ["/jobmanager", "/taskmanagers/tm-0"])
@pytest.mark.parametrize(
    "name", ["..%2f..%2fetc%2fpasswd", quote("/etc/passwd", safe=""), "%2E%2E", "passwd", "x.log.1%00"]
)
def test_hostile_names_are_json_refusals(cluster: Cluster, base: str, name: str) -> None:
    answer = cluster.get(f"{base}/logs/{name}")
    assert answer.status_code in (400, 404), answer.text
    assert answer.json()["errors"] and "root:" not in answer.text


def test_a_subtasks_log_holds_its_lines_and_no_others(cluster: Cluster) -> None:
    answer = cluster.get(f"/jobs/{cluster.job_id}/vertices/sum/subtasks/1/log")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    lines = answer.text.splitlines()
    assert tags(lines) == {(cluster.job_id, "sum", 1)}
    assert any("Sum (2/2)#0" in line and "switched from RUNNING to FINISHED" in line for line in lines)
    assert cluster.get(f"/jobs/{cluster.job_id}/vertices/sum/subtasks/2/log").status_code == 404
    assert cluster.get(f"/jobs/{cluster.job_id}/vertices/nope/subtasks/0/log").status_code == 404
    assert cluster.get("/jobs/00000000000000000000000000000000/log").status_code == 404


def test_the_cli_prints_a_jobs_lines(cluster: Cluster) -> None:
    everything = subprocess.run(cli(cluster, cluster.job_id), capture_output=True, text=True, timeout=60)
    assert everything.returncode == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert len(tags(lines)) == 5 and all(TAG.search(line) for line in lines)
    one = subprocess.run(
        cli(cluster, "--vertex", "src", "--subtask", "1", cluster.job_id), capture_output=True, text=True, timeout=60
    )
    assert one.returncode == 0 and tags(one.stdout.splitlines()) == {(cluster.job_id, "src", 1)}
    unknown = subprocess.run(cli(cluster, "0" * 32), capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: Job 000") and "Traceback" not in unknown.stderr


def follow(cluster: Cluster, job_id: str) -> tuple[subprocess.Popen[str], list[tuple[float, str]]]:
    """`flink-runtime logs -f JOB`, its lines collected (with their arrival times) as they come."""
    # SIGINT at its default, as in a terminal: a test run before this one in the same
    # pytest worker may have left SIGINT ignored there, and a child inherits that
    # (the CLI then slept on through Ctrl-C; py-spy showed it in its poll's sleep).
    process = subprocess.Popen(
        cli(cluster, "-f", job_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def exit_code(process: subprocess.Popen[str], timeout: float) -> int:
    """The process's exit code; if it has not exited within `timeout`, where it hangs."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        spy = Path(sys.executable).with_name("py-spy")
        stacks = subprocess.run([str(spy), "dump", "--pid", str(process.pid)], capture_output=True, text=True).stdout
        process.kill()
        raise AssertionError(f"still running {timeout} s after Ctrl-C:\n{stacks}") from None


def wait_for_line(lines: list[tuple[float, str]], text: str, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for arrived, line in list(lines):
            if text in line:
                return arrived
        time.sleep(0.05)
    raise AssertionError(f"no line with {text!r} within {timeout} s: {lines}")


def test_the_cli_follows_a_running_job_until_it_ends(cluster: Cluster) -> None:
    with JobClient(cluster.url) as client:
        job_id = client.submit(sleep_job(3.0, name="followed"))
        process, lines = follow(cluster, job_id)
        running = wait_for_line(lines, "switched from INITIALIZING to RUNNING")
        assert process.poll() is None  # still following
        finished = wait_for_line(lines, "switched from RUNNING to FINISHED")
        assert finished - running > 1.0  # printed when it happened, not all at the end
        assert process.wait(30) == 0  # the job ended and nothing new came: it stopped by itself
        printed = [line for _, line in lines]
        assert len(printed) == len(set(printed)) == 3  # each line once, though polls repeat their first stamp


def test_the_cli_stops_following_on_ctrl_c(cluster: Cluster) -> None:
    with JobClient(cluster.url) as client:
        job_id = client.submit(sleep_job(60.0, name="interrupted"))
        try:
            process, lines = follow(cluster, job_id)
            wait_for_line(lines, "switched from INITIALIZING to RUNNING")
            time.sleep(1.5)  # a poll or two with nothing new
            process.send_signal(signal.SIGINT)
            assert exit_code(process, 30) == 0
            assert len(lines) == 2, lines
        finally:
            client.cancel(job_id)


def test_an_in_process_minicluster_shares_one_log_and_cleans_up(tmp_path: Path) -> None:
    handlers = list(logging.getLogger().handlers)
    config = fast_config(**{"env.log.dir": str(tmp_path / "log"), "io.tmp.dirs": str(tmp_path / "data")})
    with (
        MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=2) as cluster,
        JobClient(cluster.rest_url) as client,
    ):
        job_id = client.submit(modulo_sum_job(tmp_path / "out", count=100))
        assert client.wait(job_id, timeout=120) is JobStatus.FINISHED
        (name,) = [p.name for p in (tmp_path / "log").iterdir()]
        assert re.fullmatch(rf"flink-runtime-minicluster-pid\d+-{re.escape(HOST)}\.log", name)
        answer = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/log", timeout=30).json()
        # Both TaskManagers read the process's one file; the answer holds each line once.
        assert len(answer["lines"]) == len(set(answer["lines"])) == 5 * 3
        tm_log = httpx.get(f"{cluster.rest_url}/taskmanagers/minicluster-tm-1/log", timeout=30)
        assert tm_log.status_code == 200 and job_id in tm_log.text
    assert logs.active() is None
    assert logging.getLogger().handlers == handlers
    assert not any(isinstance(h, logging.handlers.RotatingFileHandler) for h in logging.getLogger().handlers)
