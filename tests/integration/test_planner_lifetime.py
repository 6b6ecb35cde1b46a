"""The planner process lives and dies with its JobManager, and a slow warm-up of it holds
nothing up.

A planner that outlived a `kill -9` of its JobManager would keep itself and its Spark
JVM (~520 MB) running for ever, holding the JobManager's log file; and a job recovered
while the planner warms up must not wait for it in INITIALIZING (up to 300 s).
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster, free_port
from flink_runtime.executiongraph import JobStatus
from flink_runtime.pipeline import Pipeline
from tests.helpers import leftovers
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

# How long a killed process's children may take to go: a JVM notices its parent's death
# when its stdin reaches EOF (PySpark's gateway), the planner through its death signal.
GRACE = 15.0


def family(process: ClusterProcess) -> list[psutil.Process]:
    """The process's descendants now (the planner, its JVM, a TaskManager's JVM, ...)."""
    return psutil.Process(process.pid).children(recursive=True)


def survivors(processes: list[psutil.Process], within: float = GRACE) -> list[str]:
    """Those of `processes` still alive after `within` seconds, described; they are killed."""
    _, alive = psutil.wait_procs(processes, timeout=within)
    described = [leftovers.describe(process) for process in alive]
    leftovers.kill(alive)
    return described


def wait_for_descendant(process: ClusterProcess, marker: str, timeout: float = 120.0) -> psutil.Process:
    """A descendant whose command line contains `marker`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in family(process):
            try:
                if marker in " ".join(child.cmdline()):
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.2)
    raise AssertionError(f"no process with {marker!r} below {process.name} within {timeout} s")


def heavy_libraries_mapped(process: psutil.Process) -> list[str]:
    """Which of pandas, pyarrow and numpy a process has loaded (their shared objects
    are in its memory map once imported)."""
    maps = Path(f"/proc/{process.pid}/maps").read_text()
    return [name for name in ("pandas", "pyarrow", "numpy") if f"/site-packages/{name}/" in maps]


def test_a_jobmanager_and_a_taskmanager_killed_with_sigkill_leave_no_process_behind(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("one line\n")
    properties = {"jobmanager.planner.warm-up": "true", "spark.master": "local[1]", "rest.submit.wait-timeout": "90 s"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as standalone:
        jobmanager = standalone.start_jobmanager()
        taskmanager = standalone.start_taskmanager()
        # A Spark job: the planner's JVM resolves its plan, the TaskManager's JVM runs it.
        pipeline = Pipeline("words", parallelism=1)
        pipeline.read_text(str(corpus / "*.txt")).write_json(str(tmp_path / "out"), mode="overwrite")
        with JobClient(standalone.rest_url, timeout=120) as client:
            job_id = client.submit(pipeline.job_graph())
            assert client.wait(job_id, timeout=120) is JobStatus.FINISHED
        planner = wait_for_descendant(jobmanager, "spawn_main")
        planner_jvm = wait_for_descendant(jobmanager, "SparkSubmit")
        assert planner_jvm.ppid() == planner.pid
        # Resolving a plan needs neither pandas, pyarrow nor numpy (~100 MB of the
        # planner's memory when PySpark's createDataFrame and py4j converters load them).
        assert not heavy_libraries_mapped(planner), heavy_libraries_mapped(planner)
        print("TaskManager maps:", heavy_libraries_mapped(taskmanager) or "none of pandas, pyarrow, numpy")
        processes = family(jobmanager) + family(taskmanager)
        assert any("SparkSubmit" in " ".join(p.cmdline()) for p in family(taskmanager))

        jobmanager.kill()
        taskmanager.kill()
        started = time.monotonic()
        left = survivors(processes)
        assert not left, "processes outlived their JobManager or TaskManager:\n" + "\n".join(left)
        print(f"all {len(processes)} descendants gone {time.monotonic() - started:.1f} s after the kill")


def test_a_noop_job_starts_no_jvm_in_the_planner_and_a_taskmanager_starts_spark_warm(tmp_path: Path) -> None:
    """The planner process starts with its JobManager, without a JVM (jobmanager.planner.warm-up
    is off by default); a job of built-in invokables is planned there and never starts one. A
    TaskManager with taskmanager.spark.warm-up starts its Spark JVM before any task asks."""
    properties = {"jobmanager.planner.warm-up": "false", "spark.master": "local[1]"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as standalone:
        jobmanager = standalone.start_jobmanager()
        planner = wait_for_descendant(jobmanager, "spawn_main", timeout=30)  # there before any job
        taskmanager = standalone.start_taskmanager(**{"taskmanager.spark.warm-up": "true"})
        wait_for_descendant(taskmanager, "SparkSubmit")  # warming up: no task asked for it
        with JobClient(standalone.rest_url, timeout=60) as client:
            started = time.monotonic()
            job_id = client.submit(sleep_job(seconds=0.1, name="no plan needs Spark"))
            assert client.wait(job_id, timeout=60) is JobStatus.FINISHED
            print(f"a no-op job on a new JobManager: FINISHED after {time.monotonic() - started:.1f} s")
        below = family(jobmanager)
        assert planner.pid in {process.pid for process in below}  # the same planner planned it
        jvms = [leftovers.describe(process) for process in below if "java" in process.name()]
        assert not jvms, f"a job whose plan needs no Spark started a JVM below the JobManager: {jvms}"
        sizes = [process.memory_info().rss for process in [psutil.Process(jobmanager.pid), *below]]
        print(f"JobManager + planner resident: {sum(sizes) / 2**20:.0f} MB")
        processes = below + family(taskmanager)
        standalone.stop()
        assert not survivors(processes)


def test_a_stuck_planner_warm_up_holds_up_neither_a_submission_nor_a_recovery(tmp_path: Path) -> None:
    """The planner's JVM waits for a debugger that never comes (`suspend=y`): its warm-up
    never ends. Submissions and the recovery of a running job wait for it at most
    jobmanager.planner.timeout, then run in a new planner (their plans need no Spark)."""
    timeout = 5.0
    properties = {
        "jobmanager.planner.warm-up": "true",
        "jobmanager.planner.timeout": f"{timeout:g} s",
        "rest.submit.wait-timeout": "60 s",
    }
    # Only the JobManager's Spark (its planner's) is stuck; the TaskManager's is not started.
    stuck = {
        "spark.driver.extraJavaOptions": (
            f"-agentlib:jdwp=transport=dt_socket,server=y,suspend=y,address=127.0.0.1:{free_port()}"
        )
    }
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as standalone:
        # A JobManager killed while its planner's JVM hangs in its start: that JVM never reads
        # its stdin to EOF, so only the planner's process group kill takes it along.
        jobmanager = standalone.start_jobmanager(**stuck)
        wait_for_descendant(jobmanager, "jdwp")
        processes = family(jobmanager)
        jobmanager.kill()
        left = survivors(processes)
        assert not left, "processes outlived their JobManager:\n" + "\n".join(left)

        jobmanager = standalone.start_jobmanager(**stuck)
        wait_for_descendant(jobmanager, "jdwp")  # warming up, stuck
        standalone.start_taskmanager(**{"taskmanager.numberOfTaskSlots": 2})
        with JobClient(standalone.rest_url, timeout=120) as client:
            started = time.monotonic()
            job_id = client.submit(sleep_job(seconds=600, name="long"))
            wait_for_status(client, job_id, JobStatus.RUNNING, timeout=timeout + 45)
            print(f"submitted during a stuck warm-up: RUNNING after {time.monotonic() - started:.1f} s")

            processes = family(jobmanager)
            jobmanager.kill()
            assert not survivors(processes)
            jobmanager = standalone.start_jobmanager(**stuck)
            started = time.monotonic()
            wait_for_status(client, job_id, JobStatus.RUNNING, timeout=timeout + 45)
            print(f"recovered during a stuck warm-up: RUNNING after {time.monotonic() - started:.1f} s")
            short = client.submit(sleep_job(seconds=0.5, name="short"))
            assert client.wait(short, timeout=timeout + 45) is JobStatus.FINISHED
            client.cancel(job_id)
            processes = family(jobmanager)
        standalone.stop()
        assert not survivors(processes)


def wait_for_status(client: JobClient, job_id: str, status: JobStatus, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = client.status(job_id)
        except Exception as exc:  # noqa: BLE001 - a JobManager still starting
            last = exc
        if last is status:
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} not {status.value} within {timeout} s; last: {last!r}")
