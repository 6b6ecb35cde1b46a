"""A standalone JobManager's planner resolves Spark plans on a registered TaskManager
(planner/remote_plan.py) instead of starting a JVM of its own (~260 MB beside the
JobManager, issue 26): the same answers, the same refusals, and its own JVM again when
no TaskManager can answer.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster
from flink_runtime.executiongraph import JobStatus
from flink_runtime.pipeline import Pipeline
from tests.helpers import leftovers

pytestmark = pytest.mark.integration

PROPERTIES = {
    "jobmanager.planner.warm-up": "false",
    # A planner that started its JVM (no TaskManager to ask) is replaced by one without
    # soon after: the test then sees whether the next plans start one again.
    "jobmanager.planner.idle-timeout": "2 s",
    "spark.master": "local[1]",
    "rest.submit.wait-timeout": "90 s",
}


def jvms_below(process: ClusterProcess) -> list[str]:
    below = psutil.Process(process.pid).children(recursive=True)
    return [leftovers.describe(child) for child in below if "java" in child.name()]


def wait_until(condition: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def corpus_of(tmp_path: Path, text: str = "one line\n") -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(text)
    return corpus


def warm_taskmanager(standalone: StandaloneCluster) -> ClusterProcess:
    """A TaskManager whose Spark JVM runs already: the one the planner asks."""
    taskmanager = standalone.start_taskmanager(**{"taskmanager.spark.warm-up": "true"})
    wait_until(lambda: jvms_below(taskmanager), "the TaskManager's Spark JVM started")
    return taskmanager


def transformed(name: str, corpus: Path, transform: str, out: Path) -> Pipeline:
    """The corpus's lines through one transform (`module:function`), written as JSON."""
    pipeline = Pipeline(name, parallelism=1)
    pipeline.read_text(str(corpus / "*.txt")).transform(transform).write_json(str(out), mode="overwrite")
    return pipeline


@dataclass
class Refused:
    """A standalone cluster with a warm TaskManager, and the 400 a one-transform job got."""

    jobmanager: ClusterProcess
    taskmanager: ClusterProcess
    client: JobClient
    corpus: Path
    error: RestClientError


@contextlib.contextmanager
def refusal_of(tmp_path: Path, transform: str, properties: dict[str, Any]) -> Iterator[Refused]:
    """Submits the corpus through `transform` (`module:function`); the submission must be
    refused with a 400. The cluster serves while the block runs."""
    corpus = corpus_of(tmp_path)
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as standalone:
        jobmanager = standalone.start_jobmanager()
        taskmanager = warm_taskmanager(standalone)
        pipeline = transformed("refused", corpus, transform, tmp_path / "out")
        with JobClient(standalone.rest_url, timeout=120) as client:
            with pytest.raises(RestClientError) as refused:
                client.submit(pipeline.job_graph())
            assert refused.value.status_code == 400, refused.value
            yield Refused(jobmanager, taskmanager, client, corpus, refused.value)


def bad_pipelines(corpus: Path, out: Path) -> dict[str, Pipeline]:
    def text() -> tuple[Pipeline, Any]:
        pipeline = Pipeline("bad", parallelism=1)
        return pipeline, pipeline.read_text(str(corpus / "*.txt"))

    unknown, lines = text()
    lines.select("no_such_column").write_json(str(out), mode="overwrite")
    raising = transformed("bad", corpus, "tests.helpers.transforms:raises_value_error", out)
    not_a_frame = transformed("bad", corpus, "tests.helpers.transforms:not_a_dataframe", out)
    malformed = Pipeline("bad", parallelism=1)
    malformed.read_csv(str(corpus / "*.txt"), schema="id INTT, name STRING").write_json(str(out), mode="overwrite")
    return {"unknown column": unknown, "transform raises": raising, "no DataFrame": not_a_frame, "INTT": malformed}


def refusals(client: JobClient, pipelines: dict[str, Pipeline]) -> dict[str, str]:
    """Each pipeline's 400, with Spark's expression ids (`value#12`, per JVM) blanked."""
    texts = {}
    for name, pipeline in pipelines.items():
        with pytest.raises(RestClientError) as refused:
            client.submit(pipeline.job_graph())
        assert refused.value.status_code == 400, refused.value
        texts[name] = re.sub(r"#\d+", "#", str(refused.value))
    return texts


def test_a_spark_job_is_planned_on_a_taskmanager_with_the_answers_the_planner_gives(tmp_path: Path) -> None:
    corpus = corpus_of(tmp_path, "one line\nanother line\n")
    with StandaloneCluster(tmp_path / "cluster", properties=dict(PROPERTIES)) as standalone:
        jobmanager = standalone.start_jobmanager()
        with JobClient(standalone.rest_url, timeout=120) as client:
            # No TaskManager registered: the planner resolves with a JVM of its own, as before.
            own = refusals(client, bad_pipelines(corpus, tmp_path / "out"))
            assert jvms_below(jobmanager), "the planner resolved Spark plans without a JVM and no TaskManager"
            wait_until(lambda: not jvms_below(jobmanager), "the idle planner replaced by one without a JVM")

            warm_taskmanager(standalone)
            started = time.monotonic()
            remote = refusals(client, bad_pipelines(corpus, tmp_path / "out"))
            print(f"{len(remote)} refusals resolved on the TaskManager in {time.monotonic() - started:.1f} s")
            assert remote == own
            assert "INTT" in remote["INTT"] and "Traceback" not in remote["INTT"]
            assert "a transform that refuses its input" in remote["transform raises"]
            assert "no_such_column" in remote["unknown column"]

            pipeline = Pipeline("words", parallelism=1)
            pipeline.read_text(str(corpus / "*.txt")).select("upper(value) AS value").write_json(
                str(tmp_path / "words"), mode="overwrite"
            )
            job_id = client.submit(pipeline.job_graph())
            assert client.wait(job_id, timeout=120) is JobStatus.FINISHED, client.exceptions(job_id)
            written = "".join(path.read_text() for path in (tmp_path / "words").glob("*.json"))
            assert "ONE LINE" in written and "ANOTHER LINE" in written
        assert not jvms_below(jobmanager), f"a JVM started below the JobManager: {jvms_below(jobmanager)}"
        assert "resolves it with its own SparkSession" not in jobmanager.log()
        sizes = [
            p.memory_info().rss for p in [psutil.Process(jobmanager.pid), *psutil.Process(jobmanager.pid).children()]
        ]
        print(f"JobManager + planner resident after a Spark job: {sum(sizes) / 2**20:.0f} MB")


def test_a_taskmanager_killed_while_it_resolves_leaves_the_plan_to_the_planner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its connection drops: the planner resolves the plan itself at once, without waiting
    out the time limit, and the job is accepted."""
    markers = tmp_path / "markers"
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(markers))
    corpus = corpus_of(tmp_path)
    # The submission answers once planned and waited this long for slots (none are left).
    properties = {**PROPERTIES, "rest.submit.wait-timeout": "5 s"}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as standalone:
        jobmanager = standalone.start_jobmanager()
        taskmanager = warm_taskmanager(standalone)
        pipeline = transformed("waits", corpus, "tests.helpers.transforms:marks_and_waits", tmp_path / "out")
        outcome: dict[str, Any] = {}

        def submit() -> None:
            with JobClient(standalone.rest_url, timeout=120) as client:
                try:
                    outcome["job_id"] = client.submit(pipeline.job_graph())
                except Exception as exc:  # noqa: BLE001 - asserted below
                    outcome["error"] = exc

        submitting = threading.Thread(target=submit)
        submitting.start()
        wait_until(lambda: (markers / f"resolving-{taskmanager.pid}").exists(), "the TaskManager resolving")
        taskmanager.kill()
        killed = time.monotonic()
        # Planned: by the planner's own JVM, started now (the ask would have waited 65 s).
        wait_until(lambda: "from INITIALIZING to CREATED" in jobmanager.log(), "the job planned", timeout=100)
        planned_after = time.monotonic() - killed
        print(f"planned {planned_after:.1f} s after the TaskManager's kill (the planner's own JVM started)")
        submitting.join(timeout=60)
        assert not submitting.is_alive(), "the submission hangs after its TaskManager was killed"
        assert "error" not in outcome, outcome.get("error")
        assert "dropped before it answered): the planner resolves it with its own SparkSession" in jobmanager.log()
        assert planned_after < 55, "the planner waited for the killed TaskManager's answer"
        resolved_by = [path.name for path in markers.glob("resolving-*")]
        assert len(resolved_by) == 2, resolved_by  # the TaskManager, then the planner
        with JobClient(standalone.rest_url, timeout=30) as client:
            client.cancel(outcome["job_id"])


def test_a_transform_that_never_returns_is_refused_and_stopped_on_the_taskmanager(tmp_path: Path) -> None:
    """The TaskManager gives the job's code half of what is left of jobmanager.planner.timeout,
    answers timed_out, and interrupts the thread: the loop stops, the TaskManager serves on."""
    properties = {**PROPERTIES, "jobmanager.planner.timeout": "10 s"}
    with refusal_of(tmp_path, "tests.helpers.hostile:loops_for_ever", properties) as refused:
        assert "did not finish within" in str(refused.error), refused.error
        assert "on TaskManager tm-0" in str(refused.error), refused.error
        process = psutil.Process(refused.taskmanager.pid)
        before = sum(process.cpu_times()[:2])
        time.sleep(3)
        spent = sum(process.cpu_times()[:2]) - before
        print(f"TaskManager CPU in the 3 s after the refusal: {spent:.2f} s")
        assert spent < 1.5, "the endless transform still runs on the TaskManager"
        good = Pipeline("after", parallelism=1)
        good.read_text(str(refused.corpus / "*.txt")).write_json(str(tmp_path / "after"), mode="overwrite")
        job_id = refused.client.submit(good.job_graph())
        assert refused.client.wait(job_id, timeout=120) is JobStatus.FINISHED
        assert not jvms_below(refused.jobmanager)


def test_a_transform_that_ends_its_interpreter_takes_the_taskmanager_and_is_refused(tmp_path: Path) -> None:
    """The trade-off docs/pipelines.md names: `os._exit` in a transform at submit ends the
    TaskManager resolving it (as it would once the job's tasks ran it there); the planner
    then resolves the plan itself, the same code ends the planner process, and the
    submission is refused with that exit code. The JobManager serves on."""
    with refusal_of(tmp_path, "tests.helpers.hostile:exits_hard", dict(PROPERTIES)) as refused:
        assert "ended the planner process" in str(refused.error), refused.error
        assert "exit code 7" in str(refused.error), refused.error
        assert refused.taskmanager.process.wait(timeout=30) == 7  # the TaskManager's own exit
        assert "the planner resolves it with its own SparkSession" in refused.jobmanager.log()
        # The JobManager serves on: it lists the refused job, FAILED (as Flink lists a
        # submission that failed in its initialization).
        assert [job["state"] for job in refused.client.list_jobs()] == ["FAILED"]
        assert refused.jobmanager.process.poll() is None
