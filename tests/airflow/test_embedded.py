"""The embedded cluster: a detached MiniCluster process, started once and found again,
on a fixed port, stopping itself when idle, looked at and stopped with `flink-runtime embedded`."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
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
from flink_runtime.client.cli import main as cli_main
from flink_runtime.embedded import ports
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.rpc.messages import AcknowledgeRegistration
from tests.helpers.forged_rpc import ask, ask_all, fake_registration

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "embedded"
    yield directory
    stop_embedded_cluster(directory)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One cluster (1 TaskManager x 2 slots, idle timeout off) for the tests that only look at it."""
    directory = tmp_path_factory.mktemp("shared") / "embedded"
    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=2, state_dir=directory, port=free_port(), idle_timeout=0)
    yield directory, rest_url
    stop_embedded_cluster(directory)


def state_of(directory: Path) -> dict:
    return json.loads((directory / STATE_FILE).read_text())


def rpc_ports(state: dict) -> set[int]:
    """The ports the cluster process listens on besides its REST port: its RPC's."""
    process = psutil.Process(state["pid"])
    listening = {c.laddr.port for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    return listening - {state["port"]}


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "flink_runtime.client.cli", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def wait_until_gone(pid: int, timeout: float) -> bool:
    try:
        psutil.Process(pid).wait(timeout)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return True


def test_starts_a_detached_cluster_on_its_port_and_records_it(shared: tuple[Path, str]) -> None:
    directory, rest_url = shared
    state = state_of(directory)

    assert rest_url == f"http://127.0.0.1:{state['port']}"
    overview = httpx.get(f"{rest_url}/overview").json()
    assert overview["taskmanagers"] == 1
    assert overview["slots-total"] == 2
    assert state["rest_url"] == rest_url and state["idle_timeout"] == 0
    process = psutil.Process(state["pid"])
    # Its own session: it survives the task (and the process group) that started it.
    assert os.getsid(process.pid) == process.pid != os.getsid(0)
    assert "MiniCluster ready" in (directory / LOG_FILE).read_text()


def test_a_second_call_reuses_the_running_cluster_whatever_it_asks(
    shared: tuple[Path, str], caplog: pytest.LogCaptureFixture
) -> None:
    directory, rest_url = shared
    pid = state_of(directory)["pid"]

    # Another size or port asks for nothing new: the first caller's cluster is shared.
    with caplog.at_level(logging.WARNING, "flink_runtime.embedded"):
        assert ensure_embedded_cluster(taskmanagers=2, slots=2, state_dir=directory, port=free_port()) == rest_url
    assert state_of(directory)["pid"] == pid
    assert any(f"runs at {rest_url}, not on port" in r.getMessage() for r in caplog.records)


def test_its_rpc_answers_no_other_process(shared: tuple[Path, str]) -> None:
    """No cluster secret configured: the cluster process made its own and kept it in memory.
    A forged RegisterTaskManager on each of its RPC ports gets no answer (a JobManager that
    took it would schedule the next job onto the fake TaskManager), and no
    command line, environment or state file of it holds a secret."""
    directory, rest_url = shared
    state = state_of(directory)
    process = psutil.Process(state["pid"])
    ports = rpc_ports(state)
    assert len(ports) >= 2  # the JobManager's and its TaskManager's
    # Each unanswered for 2 s, all side by side.
    forged = [(f"tcp://127.0.0.1:{port}", fake_registration(), None) for port in ports]
    assert ask_all(forged, timeout=2.0) == [None] * len(ports), ports
    assert [tm["id"] for tm in httpx.get(f"{rest_url}/taskmanagers").json()["taskmanagers"]] == ["minicluster-tm-0"]
    assert "cluster.secret" not in " ".join(process.cmdline()) + json.dumps(state)
    assert "--secrets-on-stdin" not in process.cmdline()  # it was given none
    assert not [name for name in process.environ() if "SECRET" in name.upper()]


def test_a_configured_secret_reaches_the_cluster_off_its_command_line(state_dir: Path) -> None:
    secret = "configured-embedded-secret"
    config = {"security.cluster.secret": secret, "heartbeat.interval": "2 s"}
    rest_url = ensure_embedded_cluster(
        taskmanagers=1, slots=1, state_dir=state_dir, port=free_port(), idle_timeout=0, config=config
    )
    state = state_of(state_dir)
    command_line = " ".join(psutil.Process(state["pid"]).cmdline())
    assert "heartbeat.interval=2 s" in command_line and secret not in command_line
    assert secret not in (state_dir / STATE_FILE).read_text() + (state_dir / LOG_FILE).read_text()
    shown = {entry["key"]: entry["value"] for entry in httpx.get(f"{rest_url}/jobmanager/config").json()}
    assert shown["security.cluster.secret"] == "******"
    # It is the RPC's secret: a peer holding it is heard.
    answers = [ask(f"tcp://127.0.0.1:{port}", fake_registration(secret), secret) for port in rpc_ports(state)]
    assert any(isinstance(answer, AcknowledgeRegistration) for answer in answers), answers


def test_a_port_held_by_a_foreign_listener_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(EmbeddedClusterError) as failure:
            ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=tmp_path, port=port)
    message = str(failure.value)
    assert message.startswith(f"port {port}, the embedded cluster's REST port, is in use by pid {os.getpid()} (")
    assert "pytest" in message  # the holder's command line
    assert f"not the embedded cluster of {tmp_path}" in message
    assert "the Airflow connection's Port field" in message and "or stop that process" in message
    assert not (tmp_path / STATE_FILE).exists()


def test_a_port_held_by_another_embedded_cluster_names_its_state_dir(shared: tuple[Path, str], tmp_path: Path) -> None:
    directory, rest_url = shared
    port = httpx.URL(rest_url).port
    with pytest.raises(EmbeddedClusterError, match=f"by pid \\d+, the embedded cluster of state dir {directory},"):
        ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=tmp_path, port=port)


def test_a_port_lost_to_a_race_is_read_from_the_clusters_exit(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before the start says free, then another process binds first: the
    cluster's own bind failure turns into the same clear error."""
    monkeypatch.setattr(ports, "port_in_use", lambda host, port: False)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(EmbeddedClusterError) as failure:
            ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port)
    assert str(failure.value).startswith(
        f"port {port}, the embedded cluster's REST port, is in use by pid {os.getpid()}"
    )
    assert f"(its log: {state_dir / LOG_FILE})" in str(failure.value)
    assert "cannot bind the REST API" in (state_dir / LOG_FILE).read_text()
    assert not (state_dir / STATE_FILE).exists()


def test_a_state_file_with_a_dead_pid_starts_a_new_cluster(state_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state_dir.mkdir(parents=True)
    stale = {"pid": dead.pid, "rest_url": "http://127.0.0.1:9", "started_at": 0}
    (state_dir / STATE_FILE).write_text(json.dumps(stale))

    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=free_port())

    assert rest_url != stale["rest_url"]
    assert state_of(state_dir)["pid"] != dead.pid
    assert httpx.get(f"{rest_url}/overview").status_code == 200


def test_a_live_pid_of_another_process_is_not_taken_for_the_cluster(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    # Our own pid is alive, but the URL does not answer: the file is stale, and the
    # process it names must be left alone (its start time does not match either).
    stale = {"pid": os.getpid(), "rest_url": "http://127.0.0.1:9", "started_at": 0, "create_time": 1.0}
    (state_dir / STATE_FILE).write_text(json.dumps(stale))

    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=free_port())

    assert rest_url != stale["rest_url"]
    assert psutil.pid_exists(os.getpid())


def test_concurrent_calls_start_one_cluster(state_dir: Path) -> None:
    urls: list[str] = []
    errors: list[BaseException] = []
    port = free_port()

    def call() -> None:
        try:
            urls.append(ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port))
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
        if "flink_runtime.embedded.foreground" in (process.info["cmdline"] or []) and process.cwd() == str(state_dir)
    ]
    assert len(clusters) == 1


def test_a_restart_comes_back_at_the_same_url_with_its_jobs_and_appends_its_log(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The extra links Airflow stored before a restart still work after it: the cluster comes
    back at the same URL (a port 0 would move it), answers for the jobs it ran from its job
    store, and appends to its log rather than overwriting it."""
    port = free_port()
    with caplog.at_level(logging.INFO, "flink_runtime.embedded"):
        first = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port)
        with JobClient(first) as client:
            job_id = client.submit(JobGraph(name="kept", vertices=[JobVertex(id="v", name="V", invokable="noop")]))
            assert client.wait(job_id, timeout=60).value == "FINISHED"
        job_url = f"{first}/jobs/{job_id}"  # what an extra link holds
        assert stop_embedded_cluster(state_dir) is True
        with pytest.raises(httpx.TransportError):
            httpx.get(job_url, timeout=2)
        second = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port)

    assert second == first == f"http://127.0.0.1:{port}"
    answer = httpx.get(job_url)  # the link stored before the restart, from the job store
    assert answer.status_code == 200 and answer.json()["state"] == "FINISHED" and answer.json()["name"] == "kept"
    assert (state_dir / "jobstore.db").is_file()
    output = (state_dir / LOG_FILE).read_text()
    assert output.count(f"MiniCluster ready rest={first}") == 2
    messages = [record.getMessage() for record in caplog.records]
    assert sum(f"Starting the embedded flink-runtime cluster on port {port}" in m for m in messages) == 2
    assert any(m.startswith(f"The embedded cluster is ready at {second}") for m in messages)
    assert any(p.suffix == ".log" for p in (state_dir / "log").iterdir())  # its log files (env.log.dir)


def test_status_and_stop_commands(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=free_port(), idle_timeout=0)
    pid = state_of(state_dir)["pid"]

    status = cli("embedded", "status", "--state-dir", state_dir)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == "The embedded cluster is running."
    assert f"  PID:          {pid}" in lines
    assert f"  REST URL:     {rest_url}" in lines
    assert "  Jobs running: 0 (1 TaskManagers, 1 of 1 slots free)" in lines
    assert "  Idle timeout: off" in lines
    assert f"  Log:          {state_dir / LOG_FILE}" in lines
    assert any(line.startswith("  Uptime:       ") for line in lines)
    assert any(line.startswith("  Memory:       ") and "MiB resident" in line for line in lines)
    assert cli_main(["embedded", "status", "--state-dir", str(state_dir), "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["running"] and as_json["pid"] == pid and as_json["jobs-running"] == 0
    assert as_json["resident-bytes"] > 10 * 2**20

    stop = cli("embedded", "stop", "--state-dir", state_dir)
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.startswith(f"Stopped the embedded cluster (pid {pid}, {rest_url}) in ")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    again = cli("embedded", "stop", "--state-dir", state_dir)
    assert again.returncode == 0 and "is not running" in again.stdout and "nothing to stop" in again.stdout
    gone = cli("embedded", "status", "--state-dir", state_dir)
    assert gone.returncode == 3
    assert gone.stdout.startswith("The embedded cluster is not running.")
    assert f"  Log:          {state_dir / LOG_FILE} (why the last one stopped)" in gone.stdout


def test_status_of_a_dead_cluster_names_its_pid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": dead.pid, "rest_url": "http://127.0.0.1:9"}))
    assert cli_main(["embedded", "status", "--state-dir", str(tmp_path)]) == 3
    assert f"its state file names pid {dead.pid}, which has exited" in capsys.readouterr().out


def test_an_idle_cluster_stops_itself_and_the_next_call_starts_a_fresh_one(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    rest_url = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port, idle_timeout=2)
    pid = state_of(state_dir)["pid"]
    # REST requests are activity: polling for longer than the timeout keeps it up.
    polling_until = time.monotonic() + 3
    while time.monotonic() < polling_until:
        assert httpx.get(f"{rest_url}/overview").status_code == 200
        time.sleep(0.5)
    assert psutil.pid_exists(pid)

    assert wait_until_gone(pid, 15), "the idle cluster did not stop itself"
    assert not (state_dir / STATE_FILE).exists()
    output = (state_dir / LOG_FILE).read_text()
    assert "MiniCluster stopping itself: idle for 2." in output and "(minicluster.idle-timeout: 2 s)" in output
    assert cli_main(["embedded", "status", "--state-dir", str(state_dir)]) == 3
    assert "not running" in capsys.readouterr().out

    again = ensure_embedded_cluster(taskmanagers=1, slots=1, state_dir=state_dir, port=port, idle_timeout=0)
    assert again == rest_url and state_of(state_dir)["pid"] != pid


def test_a_cluster_that_cannot_start_reports_its_log(state_dir: Path) -> None:
    with pytest.raises(EmbeddedClusterError, match="exited with code") as failure:
        ensure_embedded_cluster(
            taskmanagers=1, slots=1, state_dir=state_dir, port=free_port(), config={"jobmanager.rpc.port": "x"}
        )
    assert "jobmanager.rpc.port" in str(failure.value)
    assert not (state_dir / STATE_FILE).exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"port": 0}, "port must be 1..65535, got 0"),
        ({"idle_timeout": -1}, "idle timeout must be 0 .* got -1"),
        ({"config": {"rest.port": 1}}, r"with port=\.\.\., not config\['rest.port'\]"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(tmp_path: Path, arguments: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ensure_embedded_cluster(state_dir=tmp_path, **arguments)
    assert list(tmp_path.iterdir()) == []


def test_a_state_dir_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(EmbeddedClusterError, match=r"state directory .*a-file/state cannot be created .* writable"):
        ensure_embedded_cluster(state_dir=blocker / "state")


def test_an_idle_timeout_of_0_never_stops_the_cluster(shared: tuple[Path, str]) -> None:
    """Last in the module: the shared cluster (idle timeout 0) has sat unused between its tests."""
    directory, _ = shared
    state = state_of(directory)
    time.sleep(max(0.0, state["started_at"] + 3 - time.time()))  # only when this test runs alone
    assert psutil.Process(state["pid"]).status() != psutil.STATUS_ZOMBIE
    assert "stopping itself" not in (directory / LOG_FILE).read_text()


def test_the_state_dir_defaults_to_airflow_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / "flink-runtime"
    monkeypatch.delenv("AIRFLOW_HOME")
    assert default_state_dir().name == "flink-runtime-airflow"
