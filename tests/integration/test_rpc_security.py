"""Forged RPC against a real cluster: a raw ZeroMQ peer that never
registered sends the project's own messages to the JobManager and to a TaskManager.
Nothing it sends changes any state, with a configured cluster secret or without one:
RPC is authenticated always (a MiniCluster makes its own secret, standalone processes
on loopback share their user's, off loopback one must be configured)."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster, free_ports
from flink_runtime.minicluster import MiniCluster
from flink_runtime.rpc.messages import (
    AcknowledgeRegistration,
    CancelJob,
    DisconnectTaskManager,
    PlanResolved,
    ReleasePartitions,
    ResolvePlan,
    SubmitTask,
    SubmitTasks,
    TaskDeploymentDescriptor,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from tests.conftest import fast_config
from tests.helpers.forged_rpc import ask, ask_all, fake_registration, forge_all
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

SECRET = "rpc-forgery-secret"
MARKING_TRANSFORM = "tests.helpers.transforms:marks_and_waits"


def forged_descriptor(job_id: str, jobmanager_id: str) -> TaskDeploymentDescriptor:
    """A deployment of a 60 s sleep that no JobManager made."""
    return TaskDeploymentDescriptor(
        job_id=job_id,
        job_name="forged",
        execution_id="forged-execution",
        jobmanager_id=jobmanager_id,
        allocation_id="forged-allocation",
        slot_index=0,
        data_namespace=job_id,
        vertex_id="zzz",
        task_name="forged",
        subtask_index=0,
        parallelism=1,
        attempt_number=0,
        invokable="sleep",
        vertex_config={"seconds": 60},
    )


def wait_running(client: JobClient, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while client.status(job_id).value != "RUNNING":
        assert time.monotonic() < deadline, f"job {job_id} not RUNNING within 60 s"
        time.sleep(0.1)


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """XDG_RUNTIME_DIR for this test and the processes it starts: where this user's
    loopback secret goes (security/cluster_secret.py)."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return runtime


def test_a_minicluster_without_a_secret_obeys_no_forger(tmp_path: Path, runtime_dir: Path) -> None:
    """No security.cluster.secret: a forged RegisterTaskManager, CancelJob and SubmitTask
    (with the JobManager's real fencing id) are not even read."""
    config = fast_config(**{"io.tmp.dirs": str(tmp_path / "data")})
    with (
        MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as cluster,
        JobClient(cluster.rest_url, timeout=30) as client,
    ):
        assert cluster.jobmanager is not None
        jobmanager, (taskmanager,) = cluster.jobmanager, cluster.taskmanagers
        job_id = client.submit(sleep_job(120, name="target"))
        wait_running(client, job_id)
        (registered,) = client.taskmanagers()

        descriptor = forged_descriptor(job_id, jobmanager.jobmanager_id)
        forged_tasks = SubmitTasks(
            tasks=[SubmitTask(descriptor=descriptor), SubmitTask(descriptor=descriptor)]  # one twice
        )
        # Each unanswered for 3 s, the four side by side (one after another they were 10 s).
        assert ask_all(
            [
                (jobmanager.address, fake_registration(), None),
                (jobmanager.address, CancelJob(job_id=job_id), None),
                (taskmanager.address, SubmitTask(descriptor=descriptor), None),
                (taskmanager.address, forged_tasks, None),
            ]
        ) == [None, None, None, None]
        (attempt,) = taskmanager.tasks
        forged_batch = UpdateTaskExecutionStates(
            updates=[
                UpdateTaskExecutionState(
                    jobmanager_id=jobmanager.jobmanager_id, job_id=job_id, execution_id=attempt, state=state
                )
                for state in ("CANCELED", "FAILED")
            ]
        )
        assert ask(jobmanager.address, forged_batch, timeout=1.0) is None

        assert [tm["id"] for tm in client.taskmanagers()] == [registered["id"]]  # no fake TaskManager
        assert client.status(job_id).value == "RUNNING"
        assert "forged-execution" not in taskmanager.tasks
        client.cancel(job_id)
        assert client.wait(job_id, timeout=30).value == "CANCELED"
    # Its secret lived in its memory only: no file was made for it.
    assert list(runtime_dir.iterdir()) == []


def test_standalone_processes_on_loopback_share_this_users_secret(tmp_path: Path, runtime_dir: Path) -> None:
    """No security.cluster.secret, everything on loopback: the JobManager and TaskManager
    processes find the same secret in a 0600 file of a 0700 folder, and a peer without it
    is not heard."""
    properties = {"heartbeat.interval": "500 ms", "heartbeat.timeout": "5 s"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=1)  # returns once tm-0 is registered
        folder = runtime_dir / "flink-runtime"
        secret_file = folder / "rpc-secret"
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700
        assert stat.S_IMODE(secret_file.lstat().st_mode) == 0o600
        assert sorted(path.name for path in folder.iterdir()) == ["rpc-secret"]  # no temporary left
        secret = secret_file.read_text().strip()
        assert len(secret) >= 40
        assert cluster.jobmanager is not None
        for process in [cluster.jobmanager, *cluster.taskmanagers]:
            assert secret not in " ".join(psutil.Process(process.pid).cmdline())

        address = cluster.jobmanager.rpc_address
        unheard = [(address, fake_registration(), None), (address, fake_registration("a-guess"), "a-guess")]
        assert ask_all(unheard) == [None, None]  # side by side: 3 s each, not 6 s in all
        # The file's secret is the one the processes use: a peer holding it is heard.
        answer = ask(cluster.jobmanager.rpc_address, fake_registration(secret), secret=secret, timeout=10)
        assert isinstance(answer, AcknowledgeRegistration)


@pytest.mark.parametrize(
    ("role", "setting"),
    [
        ("jobmanager", "jobmanager.rpc.address=0.0.0.0"),
        ("taskmanager", "taskmanager.host=0.0.0.0"),
    ],
)
def test_rpc_off_loopback_without_a_secret_refuses_to_start(
    tmp_path: Path, runtime_dir: Path, role: str, setting: str
) -> None:
    rest_port, rpc_port = free_ports(2)
    command = [sys.executable, "-m", "flink_runtime.client.cli", role, "-D", setting]
    for option in (
        f"rest.port={rest_port}",
        f"jobmanager.rpc.port={rpc_port}",
        f"jobstore.url=sqlite:///{tmp_path / 'jobstore.db'}",
        f"env.log.dir={tmp_path / 'log'}",
        f"io.tmp.dirs={tmp_path / 'data'}",
    ):
        command += ["-D", option]
    started = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert started.returncode == 2, started.stdout + started.stderr
    assert "ready" not in started.stdout
    key = setting.partition("=")[0]
    assert f"{key}=" in started.stderr and "security.cluster.secret" in started.stderr, started.stderr
    assert "Traceback" not in started.stderr


@pytest.mark.parametrize("forger_secret", [None, "a-guess"], ids=["no-credentials", "wrong-secret"])
def test_forged_messages_change_nothing(
    tmp_path: Path, forger_secret: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.txt").write_text("keep me")
    # Where a transform run by a forged ResolvePlan would leave its mark (the TaskManager's environment).
    markers = tmp_path / "markers"
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(markers))
    properties = {"security.cluster.secret": SECRET, "heartbeat.interval": "500 ms", "heartbeat.timeout": "5 s"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(sleep_job(120, name="target"))
            deadline = time.monotonic() + 30
            while client.status(job_id).value != "RUNNING" and time.monotonic() < deadline:
                time.sleep(0.1)
            details = client.details(job_id)
            vertex = details["vertices"][0]["id"]
            subtasks = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/{vertex}").json()
            execution_id = subtasks["subtasks"][0]["attempt-id"]
            (taskmanager,) = client.taskmanagers()

            assert cluster.jobmanager is not None
            forged_task = forged_descriptor(job_id, jobmanager_id="")
            # To the JobManager and the TaskManager at once (one settling second, not two).
            forge_all(
                [
                    (
                        cluster.jobmanager.rpc_address,
                        [
                            UpdateTaskExecutionState(
                                jobmanager_id="",
                                job_id=job_id,
                                execution_id=execution_id,
                                state="FAILED",
                                error="made-up exception",
                            ),
                            UpdateTaskExecutionStates(
                                updates=[
                                    UpdateTaskExecutionState(
                                        jobmanager_id="",
                                        job_id=job_id,
                                        execution_id=execution_id,
                                        state=state,
                                        error="made-up exception",
                                    )
                                    for state in ("CANCELED", "FAILED")
                                ]
                            ),
                            CancelJob(job_id=job_id),
                            DisconnectTaskManager(task_manager_id=taskmanager["id"], reason="forged"),
                        ],
                    ),
                    (
                        cluster.taskmanagers[0].rpc_address,
                        [
                            ReleasePartitions(job_id=str(outside)),
                            ReleasePartitions(job_id="x", data_namespace="/"),
                            SubmitTasks(tasks=[SubmitTask(descriptor=forged_task)] * 2),
                            ResolvePlan(
                                job_id=job_id,
                                config={"operators": [{"op": "transform", "function": MARKING_TRANSFORM}]},
                                input_schemas=['{"type": "struct", "fields": []}'],
                            ),
                        ],
                    ),
                ],
                forger_secret,
            )

            assert client.status(job_id).value == "RUNNING"
            assert [tm["id"] for tm in client.taskmanagers()] == [taskmanager["id"]]
            assert client.exceptions(job_id)["exceptionHistory"]["entries"] == []
            assert (outside / "data.txt").read_text() == "keep me"
            assert not markers.exists(), "a forged ResolvePlan ran the job's code on the TaskManager"
            if forger_secret is None:
                # The control: with the cluster's secret the same message runs the transform.
                answer = ask(
                    cluster.taskmanagers[0].rpc_address,
                    ResolvePlan(
                        job_id=job_id,
                        config={"operators": [{"op": "transform", "function": MARKING_TRANSFORM}]},
                        input_schemas=['{"type": "struct", "fields": []}'],
                    ),
                    SECRET,
                    timeout=120,
                )
                assert isinstance(answer, PlanResolved), answer
                assert markers.exists()
            client.cancel(job_id)
            assert client.wait(job_id, timeout=30).value == "CANCELED"
