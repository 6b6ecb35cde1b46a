"""A job's code never runs inside the JobManager process (issue 9).

`transform: "sys:exit"` used to answer 500 and end the JobManager, and any module named
in a transform was imported into it. Preparing a job now happens in the planner
process: whatever the job's code does there fails that submission with a 400 and the
reason, and the JobManager keeps serving.
"""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize(
    ("transform", "reason"),
    [
        # The planner process survives these (SystemExit is an exception there) ...
        ("sys:exit", "SystemExit"),
        ("tests.helpers.hostile:exits", "SystemExit: 3"),
        ("this:X", "this"),
        # ... and these end it: the next submission waits for a new one and its Spark
        # start, so they run last (the one after the last kill is not waited for).
        ("tests.helpers.hostile:exits_hard", "exit code 7"),
        ("tests.helpers.hostile:segfaults", "killed by signal SIGSEGV"),
        ("tests.helpers.hostile:loops_for_ever", "did not finish within 6 s"),
    ],
)
def test_hostile_code_fails_the_submission_and_the_jobmanager_serves_on(cluster, transform: str, reason: str) -> None:
    standalone, work = cluster
    with JobClient(standalone.rest_url, timeout=120) as client:
        with pytest.raises(RestClientError) as refused:
            client.submit(pipeline_with(transform, work / "corpus", work / "out").job_graph())
        assert refused.value.status_code == 400, refused.value
        assert reason in str(refused.value), refused.value
        assert client.overview()["taskmanagers"] == 1  # the JobManager is alive and serving
    assert standalone.jobmanager.process.poll() is None
    log = standalone.jobmanager.log()
    assert "The Zen of Python" not in log, "a transform's module was imported into the JobManager"
