"""The embedded cluster: a detached MiniCluster process, started once and found again."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from flink_runtime.airflow.embedded import (
    LOG_FILE,
    STATE_FILE,
    EmbeddedClusterError,
    default_state_dir,
    ensure_embedded_cluster,
    stop_embedded_cluster,
)
from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex

pytestmark = pytest.mark.integration


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "embedded"
    yield directory
    stop_embedded_cluster(directory)


def state_of(directory: Path) -> dict:
    return json.loads((directory / STATE_FILE).read_text())


def test_starts_a_detached_cluster_and_records_it(state_dir: Path) -> None:
    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=2, state_dir=state_dir)

    overview = httpx.get(f"{rest_url}/overview").json()
    assert overview["taskmanagers"] == 1
    assert overview["slots-total"] == 2
    state = state_of(state_dir)
    assert state["rest_url"] == rest_url
    process = psutil.Process(state["pid"])
    # Its own session: it survives the task (and the process group) that started it.
    assert os.getsid(process.pid) == process.pid != os.getsid(0)
    assert "MiniCluster ready" in (state_dir / LOG_FILE).read_text()


def test_a_second_call_reuses_the_running_cluster(state_dir: Path) -> None:
    first = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
    pid = state_of(state_dir)["pid"]

    # Another size asks for nothing new: the first caller's cluster is shared.
    assert ensure_embedded_cluster(taskmanagers=2, slots=2, state_dir=state_dir) == first
    assert state_of(state_dir)["pid"] == pid


def test_a_state_file_with_a_dead_pid_starts_a_new_cluster(state_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state_dir.mkdir(parents=True)
    stale = {"pid": dead.pid, "rest_url": "http://127.0.0.1:9", "started_at": 0}
    (state_dir / STATE_FILE).write_text(json.dumps(stale))

    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)

    assert rest_url != stale["rest_url"]
    assert state_of(state_dir)["pid"] != dead.pid
    assert httpx.get(f"{rest_url}/overview").status_code == 200


def test_a_live_pid_of_another_process_is_not_taken_for_the_cluster(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    # Our own pid is alive, but the URL does not answer: the file is stale, and the
    # process it names must be left alone (its start time does not match either).
    stale = {"pid": os.getpid(), "rest_url": "http://127.0.0.1:9", "started_at": 0, "create_time": 1.0}
    (state_dir / STATE_FILE).write_text(json.dumps(stale))

    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)

    assert rest_url != stale["rest_url"]
    assert psutil.pid_exists(os.getpid())


def test_concurrent_calls_start_one_cluster(state_dir: Path) -> None:
    urls: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            urls.append(ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert errors == []
    assert len(urls) == 4 and len(set(urls)) == 1
    clusters = [
        process
        for process in psutil.process_iter(["cmdline"])
        if "minicluster" in (process.info["cmdline"] or []) and process.cwd() == str(state_dir)
    ]
    assert len(clusters) == 1


def test_stop_ends_the_process_and_a_second_stop_finds_nothing(state_dir: Path) -> None:
    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
    pid = state_of(state_dir)["pid"]

    assert stop_embedded_cluster(state_dir) is True

    assert not (state_dir / STATE_FILE).exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{rest_url}/overview", timeout=2)
    assert stop_embedded_cluster(state_dir) is False


def test_a_restart_appends_to_the_log_and_takes_its_own_ready_line(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13: a restart overwrote the log (why the last one stopped was gone)."""
    with caplog.at_level(logging.INFO, "flink_runtime.airflow.embedded"):
        first = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
        assert stop_embedded_cluster(state_dir) is True
        second = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
    output = (state_dir / LOG_FILE).read_text()
    assert output.count("MiniCluster ready rest=") == 2 and first in output and second in output
    assert httpx.get(f"{second}/overview").status_code == 200  # the new start's address, not the old one's
    messages = [record.getMessage() for record in caplog.records]
    assert sum("Starting the embedded flink-runtime cluster" in m for m in messages) == 2
    assert any(m.startswith(f"The embedded cluster is ready at {second}") for m in messages)
    assert any(p.suffix == ".log" for p in (state_dir / "log").iterdir())  # its log files (env.log.dir)
    stop_embedded_cluster(state_dir)


def test_the_job_history_survives_a_restart(state_dir: Path) -> None:
    """Issue 13: a restarted embedded cluster had forgotten every job (dead extra links)."""
    first = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
    with JobClient(first) as client:
        job_id = client.submit(JobGraph(name="kept", vertices=[JobVertex(id="v", name="V", invokable="noop")]))
        assert client.wait(job_id, timeout=60).value == "FINISHED"
    stop_embedded_cluster(state_dir)
    second = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir)
    with JobClient(second) as client:
        assert client.status(job_id).value == "FINISHED"
        assert job_id in {job["jid"] for job in client.list_jobs()}
    assert (state_dir / "jobstore.db").is_file()
    stop_embedded_cluster(state_dir)


def test_a_cluster_that_cannot_start_reports_its_log(state_dir: Path) -> None:
    with pytest.raises(EmbeddedClusterError, match="exited with code") as failure:
        ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, config={"rest.port": "not-a-port"})
    assert "rest.port" in str(failure.value)
    assert not (state_dir / STATE_FILE).exists()


def test_the_state_dir_defaults_to_airflow_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / "flink-runtime"
    monkeypatch.delenv("AIRFLOW_HOME")
    assert default_state_dir().name == "flink-runtime-airflow"
