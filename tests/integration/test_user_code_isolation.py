"""A job's code never runs inside the JobManager process.

There, `transform: "sys:exit"` would answer 500 and end the JobManager, and any module
named in a transform would be imported into it. Preparing a job happens in the planner
process: whatever the job's code does there fails that submission with a 400 and the
reason, and the JobManager keeps serving.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psutil
import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration

PROPERTIES = {
    "jobmanager.planner.warm-up": "true",
    # Counted from the call, not from the planner's start (its SparkSession starts ahead):
    # planning these one-file jobs takes a second or two, an endless loop is stopped here.
    "jobmanager.planner.timeout": "6 s",
    "rest.submit.wait-timeout": "90 s",
    "spark.master": "local[1]",
}


def pipeline_with(transform: str, corpus: Path, output: Path) -> Pipeline:
    pipeline = Pipeline(f"transform {transform}", parallelism=1)
    pipeline.read_text(str(corpus / "*.txt")).transform(transform).write_json(str(output), mode="overwrite")
    return pipeline


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("isolation")
    (work / "corpus").mkdir()
    (work / "corpus" / "a.txt").write_text("one line\n")
    with StandaloneCluster(work / "cluster", properties=dict(PROPERTIES)) as standalone:
        standalone.start(taskmanagers=1, slots=1)
        wait_for_warm_planner(standalone)
        yield standalone, work


def test_a_job_whose_code_prints_runs_and_its_output_stays_out_of_the_jobmanager_log(cluster) -> None:
    standalone, work = cluster
    with JobClient(standalone.rest_url, timeout=120) as client:
        job_id = client.submit(
            pipeline_with("tests.helpers.hostile:prints", work / "corpus", work / "printed").job_graph()
        )
        assert client.wait(job_id, timeout=120).value == "FINISHED", client.exceptions(job_id)["root-exception"]
    assert list((work / "printed").glob("*.json"))
    assert "HOSTILE-PRINT" not in standalone.jobmanager.log()


def wait_for_warm_planner(standalone: StandaloneCluster, timeout: float = 180.0) -> None:
    """Until the JobManager's latest planner process has started its SparkSession: the
    6 s planning limit above does not leave room for a Spark start (a submission waits on
    a warm-up at most that long, then plans in a new process, starting Spark itself)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = re.findall(r"Planner process (\d+) started", standalone.jobmanager.log())
        if started and f"Planner process {started[-1]} is warm" in standalone.jobmanager.log():
            return
        time.sleep(0.2)
    raise AssertionError(f"the planner did not warm up within {timeout} s:\n{standalone.jobmanager.log()}")


def planner_of(standalone: StandaloneCluster) -> psutil.Process:
    """The JobManager's planner process (its one spawned multiprocessing child)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in psutil.Process(standalone.jobmanager.pid).children():
            if "spawn_main" in " ".join(child.cmdline()):
                return child
        time.sleep(0.2)
    raise AssertionError("the JobManager has no planner process")


def test_a_transform_past_the_planner_memory_limit_is_refused_naming_it_and_the_planner_serves_on(cluster) -> None:
    """A 3 GiB allocation in a transform is past the default jobmanager.planner.memory
    (2 gb): the submission is refused naming it, and the same warm planner plans the next job."""
    standalone, work = cluster
    planner = planner_of(standalone)
    with JobClient(standalone.rest_url, timeout=120) as client:
        started = time.monotonic()
        with pytest.raises(RestClientError) as refused:
            client.submit(
                pipeline_with("tests.helpers.hostile:allocates_3_gib", work / "corpus", work / "big").job_graph()
            )
        assert refused.value.status_code == 400, refused.value
        assert "jobmanager.planner.memory" in str(refused.value), refused.value
        assert "2 gb" in str(refused.value), refused.value
        refused_after = time.monotonic() - started
        assert refused_after < 30  # refused at the allocation, not after a timeout
        print(f"3 GiB allocation refused after {refused_after:.1f} s")
        job_id = client.submit(
            pipeline_with("tests.helpers.hostile:prints", work / "corpus", work / "after").job_graph()
        )
        assert client.wait(job_id, timeout=120).value == "FINISHED", client.exceptions(job_id)["root-exception"]
    assert planner.is_running() and planner_of(standalone).pid == planner.pid  # not replaced: still warm
    assert planner.memory_info().rss < 1 << 30


@pytest.mark.parametrize(
    ("transform", "reason"),
    [
        # The planner process survives these (SystemExit is an exception there) ...
        ("sys:exit", "SystemExit"),
        ("tests.helpers.hostile:exits", "SystemExit: 3"),
        ("this:X", "this"),
        # ... and these end it: the next submission waits for a new one and its Spark
        # start (wait_for_warm_planner), so they run last.
        ("tests.helpers.hostile:exits_hard", "exit code 7"),
        ("tests.helpers.hostile:segfaults", "killed by signal SIGSEGV"),
        ("tests.helpers.hostile:loops_for_ever", "did not finish within 6 s"),
    ],
)
def test_hostile_code_fails_the_submission_and_the_jobmanager_serves_on(cluster, transform: str, reason: str) -> None:
    standalone, work = cluster
    wait_for_warm_planner(standalone)  # a new one after each kill
    with JobClient(standalone.rest_url, timeout=120) as client:
        with pytest.raises(RestClientError) as refused:
            client.submit(pipeline_with(transform, work / "corpus", work / "out").job_graph())
        assert refused.value.status_code == 400, refused.value
        assert reason in str(refused.value), refused.value
        assert client.overview()["taskmanagers"] == 1  # the JobManager is alive and serving
    assert standalone.jobmanager.process.poll() is None
    log = standalone.jobmanager.log()
    assert "The Zen of Python" not in log, "a transform's module was imported into the JobManager"
