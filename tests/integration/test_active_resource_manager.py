"""The active resource manager with the process driver (issue 25 item 2), real processes.

A standalone JobManager started with `resourcemanager.driver: process` and no
TaskManager at all runs a job needing 3 slots (taskmanager.numberOfTaskSlots 1): it
starts three TaskManager processes, as its children, which register as any TaskManager
does; once the job is done they stop after resourcemanager.taskmanager-timeout. One of
them killed with SIGKILL mid-job is replaced and the output is still exact. A job
needing more slots than resourcemanager.max-taskmanagers allows fails at once with the
numbers. A Spark job's plan on that empty cluster waits for the TaskManager started for it
instead of the planner starting a JVM. `flink-runtime run-application` runs a job the
same way in one command and leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psutil
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster, free_ports
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner
from flink_runtime.jobgraph.jobgraph import ResourceProfile
from flink_runtime.pipeline import Pipeline
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration

COUNT = 3000
MODULO = 3
PROPERTIES: dict[str, Any] = {
    "resourcemanager.driver": "process",
    "taskmanager.numberOfTaskSlots": 1,
    "resourcemanager.taskmanager-timeout": "3 s",
    "heartbeat.interval": "500 ms",
    "heartbeat.timeout": "5 s",
    "slot.request.timeout": "60 s",
    "cluster.registration.refused-registration-delay": "500 ms",
    "cluster.registration.error-delay": "500 ms",
    # POST /jobs answers at once (the latency below is measured from the submission).
    "rest.submit.wait-timeout": "100 ms",
}


def three_slot_job(out: Path, seconds_per_split: float = 0.0, name: str = "three slots") -> JobGraph:
    """numbers (3 subtasks of 1 core) --hash--> sum (3) --> sink: 3 slots at once."""
    one_core = ResourceProfile(cpu_cores=1.0)
    graph = JobGraph(
        name=name,
        vertices=[
            JobVertex(
                id="src",
                name="Numbers",
                invokable="number-source",
                parallelism=3,
                resources=one_core,
                config={"count": COUNT, "splits": 12, "modulo": MODULO, "seconds_per_split": seconds_per_split},
            ),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=3, resources=one_core),
            JobVertex(id="sink", name="Sink", invokable="collect-sink", config={"path": str(out)}),
        ],
        config={
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms",
        },
    )
    graph.connect("src", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    return graph


def assert_exact_output(out: Path) -> None:
    records = [record for part in out.glob("part-*.json") for record in json.loads(part.read_text())]
    assert sorted((r["key"], r["sum"], r["count"]) for r in records) == [
        (k, sum(n for n in range(COUNT) if n % MODULO == k), len(range(k, COUNT, MODULO))) for k in range(MODULO)
    ]


def registered(cluster: StandaloneCluster) -> set[str]:
    answer = httpx.get(f"{cluster.rest_url}/taskmanagers", timeout=5, **cluster.http_options())
    return {tm["id"] for tm in answer.raise_for_status().json()["taskmanagers"]}


def started_taskmanagers(parent_pid: int) -> dict[str, psutil.Process]:
    """The TaskManager processes the JobManager started, by their taskmanager.resource-id."""
    found: dict[str, psutil.Process] = {}
    for child in psutil.Process(parent_pid).children():
        try:
            command = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        ids = [arg.split("=", 1)[1] for arg in command if arg.startswith("taskmanager.resource-id=")]
        if "taskmanager" in command and ids:
            found[ids[0]] = child
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("active-rm"), properties=dict(PROPERTIES)) as started:
        started.start_jobmanager()
        yield started


@pytest.mark.timeout(240)
def test_an_empty_cluster_starts_three_taskmanagers_for_a_three_slot_job_and_stops_them_idle(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    assert cluster.jobmanager is not None
    assert registered(cluster) == set()
    with JobClient(cluster.rest_url, timeout=60) as client:
        submitted = time.monotonic()
        job_id = client.submit(three_slot_job(tmp_path / "out"))
        first_registered = None
        while first_registered is None:
            if registered(cluster):
                first_registered = time.monotonic() - submitted
            assert time.monotonic() - submitted < 90, "no TaskManager registered within 90 s"
            time.sleep(0.02)
        running = None
        while running is None:
            status = client.status(job_id)
            if status is JobStatus.RUNNING or status.is_globally_terminal:
                running = time.monotonic() - submitted
            time.sleep(0.02)
        assert client.wait(job_id, timeout=120) is JobStatus.FINISHED
        # No attempt failed: a task deployed into a TaskManager's slots as it registers is
        # not refused because the registration's answer reached it after the task.
        assert client.exceptions(job_id)["exceptionHistory"]["entries"] == []
    print(f"\nstart on demand: first TaskManager registered {first_registered:.2f} s, job RUNNING {running:.2f} s")
    assert_exact_output(tmp_path / "out")
    started = started_taskmanagers(cluster.jobmanager.pid)
    assert set(started) <= {"tm-active-1", "tm-active-2", "tm-active-3"}
    log = cluster.jobmanager.log()
    # Sized by the waiting requests' profiles: a slot of the default group holds a source
    # and a sum subtask of 1 core each, so each TaskManager gets 2 cores for its one slot.
    assert "Starting TaskManager tm-active-3 (1 slots, 2 cores)" in log
    assert "Starting TaskManager tm-active-4" not in log

    # Idle for resourcemanager.taskmanager-timeout (3 s): unregistered and their processes gone.
    eventually(lambda: registered(cluster) == set(), timeout=30, what="the idle TaskManagers unregistered")
    eventually(
        lambda: not started_taskmanagers(cluster.jobmanager.pid), timeout=30, what="the idle TaskManagers exited"
    )
    assert "Stopping TaskManager tm-active-1: idle for" in cluster.jobmanager.log()


@pytest.mark.timeout(240)
def test_a_taskmanager_killed_mid_job_is_replaced_and_the_output_is_exact(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    assert cluster.jobmanager is not None
    jobmanager_pid = cluster.jobmanager.pid
    with JobClient(cluster.rest_url, timeout=60) as client:
        # 12 splits of 1 s over 3 subtasks: about 4 s of source work to kill into.
        job_id = client.submit(three_slot_job(tmp_path / "out", seconds_per_split=1.0, name="killed"))
        eventually(lambda: len(registered(cluster)) == 3, timeout=90, what="three TaskManagers registered")
        before = started_taskmanagers(jobmanager_pid)
        assert len(before) == 3
        victim_id, victim = sorted(before.items())[0]
        starts_before = cluster.jobmanager.log().count("Starting TaskManager")
        assert client.status(job_id) is JobStatus.RUNNING
        os.kill(victim.pid, signal.SIGKILL)
        assert client.wait(job_id, timeout=180) is JobStatus.FINISHED
        history = client.exceptions(job_id)["exceptionHistory"]["entries"]
    assert_exact_output(tmp_path / "out")
    # The kill hit the job: its tasks on the victim failed, with the driver's reason.
    assert victim_id in json.dumps(history), history
    log = cluster.jobmanager.log()
    assert f"TaskManager {victim_id} ended unexpectedly: process {victim.pid} was killed by SIGKILL" in log
    # A replacement was started for the restarted tasks' slot requests.
    assert log.count("Starting TaskManager") > starts_before, log[-3000:]
    assert victim_id not in registered(cluster)


def jvms_outside_taskmanagers(parent_pid: int) -> list[str]:
    """Java processes below the JobManager but not below a TaskManager it started (the
    planner's JVM would be one)."""
    found = []
    for child in psutil.Process(parent_pid).children():
        try:
            if "taskmanager" in child.cmdline():
                continue
            found += [" ".join(p.cmdline()[:3]) for p in child.children(recursive=True) if "java" in p.name()]
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.timeout(240)
def test_a_spark_plan_waits_for_the_taskmanager_started_for_it_not_for_a_planner_jvm(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """No TaskManager registered and a cold planner: the plan check asks for a TaskManager,
    which starts at once, and resolves the plan on it; the planner starts no JVM."""
    assert cluster.jobmanager is not None
    eventually(lambda: registered(cluster) == set(), timeout=30, what="no TaskManager registered")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("b a b\nc b\n")
    pipeline = Pipeline("planned on a started TaskManager", parallelism=1)
    words = pipeline.read_text(str(corpus)).select("explode(split(value, ' ')) AS word")
    words.key_by("word").agg("count(*) AS n").write_json(str(tmp_path / "out"), mode="overwrite")
    starts_before = cluster.jobmanager.log().count("Starting TaskManager")
    with JobClient(cluster.rest_url, timeout=60) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=180) is JobStatus.FINISHED
    counts = {}
    for part in (tmp_path / "out").glob("*.json"):
        counts.update((row["word"], row["n"]) for row in map(json.loads, part.read_text().splitlines()))
    assert counts == {"a": 1, "b": 3, "c": 1}
    log = cluster.jobmanager.log()
    assert f"Job {job_id}: its plans wait up to" in log, log[-3000:]
    assert log.count("Starting TaskManager") == starts_before + 1, log[-3000:]
    assert jvms_outside_taskmanagers(cluster.jobmanager.pid) == []


@pytest.mark.timeout(120)
def test_a_job_needing_more_slots_than_max_taskmanagers_allow_fails_with_the_numbers(tmp_path: Path) -> None:
    properties = {**PROPERTIES, "resourcemanager.max-taskmanagers": 2}
    with StandaloneCluster(tmp_path / "bounded", properties=properties) as bounded:
        bounded.start_jobmanager()
        with JobClient(bounded.rest_url, timeout=60) as client:
            graph = three_slot_job(tmp_path / "out")
            graph.config = {"restart-strategy.type": "none"}
            job_id = client.submit(graph)
            assert client.wait(job_id, timeout=60) is JobStatus.FAILED
            root = client.exceptions(job_id)["root-exception"]
        assert "needs 3 slots at once" in root, root
        assert "at most 2 (resourcemanager.max-taskmanagers 2 x taskmanager.numberOfTaskSlots 1)" in root, root
        # It failed at once, without starting workers it could not use all of.
        assert bounded.jobmanager is not None and not started_taskmanagers(bounded.jobmanager.pid)


@pytest.mark.timeout(240)
def test_run_application_runs_one_job_and_leaves_no_process(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job_file = tmp_path / "job.json"
    graph = three_slot_job(out)
    graph.config = {}  # no restart strategy: every attempt must succeed
    job_file.write_bytes(msgspec.json.encode(graph))
    rpc_port, rest_port = free_ports(2)
    properties = {
        **PROPERTIES,
        "resourcemanager.driver": "standalone",  # run-application makes it process
        "jobmanager.rpc.port": rpc_port,
        "rest.port": rest_port,
        "env.log.dir": str(tmp_path / "log"),
        "io.tmp.dirs": str(tmp_path / "data"),
    }
    command = [sys.executable, "-m", "flink_runtime.client.cli", "run-application", str(job_file)]
    for key, value in properties.items():
        command += ["-D", f"{key}={value}"]
    application = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, tuple[psutil.Process, str]] = {}  # pid -> the process, its command line
    try:
        parent = psutil.Process(application.pid)
        while application.poll() is None:
            try:
                for child in parent.children(recursive=True):
                    # Read again while it lives: a child seen between its fork and its exec
                    # still shows its parent's command line (seen once: a TaskManager missed).
                    command = _cmdline(child)
                    if child.pid not in seen or command != "?":
                        seen[child.pid] = (seen[child.pid][0] if child.pid in seen else child, command)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        output = application.communicate(timeout=60)[0]
    finally:
        if application.poll() is None:
            application.kill()
    assert application.returncode == 0, output
    assert "Job ended FINISHED" in output
    assert_exact_output(out)
    # The TaskManagers it started, by the pids it logged: one started as the job ends may
    # never show its own command line to the polling above (seen between fork and exec).
    started = {int(pid): name for name, pid in re.findall(r"Started TaskManager (\S+) as process (\d+)", output)}
    assert len(started) >= 3, output
    for pid in started.keys() - seen.keys():
        with contextlib.suppress(psutil.NoSuchProcess):
            seen[pid] = (psutil.Process(pid), started[pid])
    # Nothing it started outlives it: TaskManagers, planners, their JVMs. (multiprocessing's
    # resource tracker and a JVM exit on their own once their parent's pipe closes: a grace.)
    psutil.wait_procs([p for p, _ in seen.values() if _alive(p)], timeout=10)
    alive = [(p.pid, command) for p, command in seen.values() if _alive(p)]
    assert not alive, alive


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return "?"
