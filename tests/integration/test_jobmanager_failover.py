"""The JobManager is killed with SIGKILL mid-job and started again: the job finishes.

Real processes. The restarted JobManager finds the running job in its job store
(SQLite), restores it from the latest completed checkpoint once the TaskManagers have
registered again, and runs only what that checkpoint had not completed. The plain case
(kill, restart, exact output, recovered run skips checkpointed splits, earlier jobs still
queryable) is part of tests/integration/test_chaos.py; these are the sharper edges.
Checkpoint ids continuing across one or two JobManager recoveries (a recovered job
numbering from 1 again would reuse chk-<id> folders and store rows) are checked by the
simulator's checkpoint-id invariants in every schedule that kills the JobManager of a
checkpointing job (tests/simulation/).
"""

from __future__ import annotations

import collections
import json
import re
import time
from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration

PROPERTIES = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "2 s",
    "taskmanager.numberOfTaskSlots": 1,
    "spark.master": "local[1]",
    # The jobs checkpoint every few hundred milliseconds, to be killed between checkpoints.
    "execution.checkpointing.min-interval": "100 ms",
}


def recovering(interval: str, checkpoints: Path) -> dict[str, str]:
    """Job config of a job meant to survive kills: checkpoints every `interval`, restarts."""
    return {
        "execution.checkpointing.interval": interval,
        "state.checkpoints.dir": str(checkpoints),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "20",
        "restart-strategy.fixed-delay.delay": "200 ms",
    }


def slow_heartbeats(timeout: str) -> dict[str, str]:
    """Cluster properties: TaskManagers outlive a JobManager kill (heartbeat.timeout)."""
    return {
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": timeout,
        "slot.request.timeout": "60 s",
        "execution.checkpointing.min-interval": "100 ms",
    }


def wait_for_checkpoints(cluster: StandaloneCluster, count: int, timeout: float = 60) -> None:
    """Until the running JobManager has completed `count` checkpoints (its log is its own:
    a restarted JobManager writes a new one), instead of sleeping for a fixed time."""
    deadline = time.monotonic() + timeout
    while len(re.findall(r"Completed checkpoint \d+ for job", cluster.jobmanager.log())) < count:
        assert time.monotonic() < deadline, f"fewer than {count} checkpoints in {timeout} s"
        time.sleep(0.1)


def test_tasks_of_a_killed_jobmanager_never_complete_its_recovered_job(tmp_path: Path) -> None:
    """The tasks the dead JobManager deployed run on until their TaskManager learns of its
    successor; whatever they report meanwhile reaches the new JobManager, which must
    refuse it (fencing): told "no split left" they would commit partial partitions as
    complete. The TaskManager learns of the successor from its dropped connection, not
    from heartbeat.timeout (60 s here): the recovered job must not wait that out."""
    count = 200_000
    graph = modulo_sum_job(tmp_path / "out", count=count, modulo=7, name="fenced")
    graph.vertices[0].config.update({"splits": 40, "seconds_per_split": 0.5})
    graph.config.update(recovering("1 s", tmp_path / "checkpoints"))
    properties = slow_heartbeats("60 s")
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=2)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(graph)
        wait_for_checkpoints(cluster, 2)  # mid-job: 40 splits of 0.5 s take 10 s
        cluster.jobmanager.kill()
        time.sleep(1)
        cluster.start_jobmanager()
        restarted = time.monotonic()
        with JobClient(cluster.rest_url, timeout=30) as client:
            status = client.wait(job_id, timeout=120)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
        recovered_in = time.monotonic() - restarted
        jobmanager_log = cluster.jobmanager.log()
        taskmanager_log = cluster.taskmanagers[0].log()

    records = [r for part in (tmp_path / "out").glob("part-*.json") for r in json.loads(part.read_text())]
    assert sum(r["count"] for r in records) == count
    assert sum(r["sum"] for r in records) == count * (count - 1) // 2
    # The old tasks were fenced: refused by the successor, or cancelled on re-registration.
    assert "Refusing messages of tasks deployed by JobManager" in jobmanager_log or (
        "deployed by JobManager" in taskmanager_log and "cancelling" in taskmanager_log
    ), taskmanager_log[-3000:]
    # 40 splits of 0.5 s on 2 slots is 10 s of work; waiting out heartbeat.timeout is 60.
    assert recovered_in < 40, recovered_in


def test_a_jobmanager_killed_during_a_stop_leaves_the_job_recoverable_with_all_its_input(tmp_path: Path) -> None:
    """A stop that did not complete leaves the job as it was: recovered, it reads every split
    it had not completed. Had the sources that ended for the stop been checkpointed as
    finished, a JobManager dying before the savepoint would leave a recovered job that ends
    FINISHED with most of its splits unread."""
    count = 120_000
    graph = modulo_sum_job(tmp_path / "out", count=count, modulo=7, name="stopped mid-way")
    graph.vertices[0].config.update({"splits": 30, "seconds_per_split": 0.5})
    graph.vertices[1].config["pause"] = 4.0  # the stop's window: sources done, savepoint not yet
    graph.config.update(recovering("300 ms", tmp_path / "checkpoints"))
    properties = slow_heartbeats("30 s")
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=1, slots=2)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(graph)
            wait_for_checkpoints(cluster, 3)  # some splits done and checkpointed
            trigger = client.stop_with_savepoint(job_id, str(tmp_path / "savepoints"), False)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                source = next(v for v in client.details(job_id)["vertices"] if v["id"] == "src")
                if source["tasks"].get("FINISHED") == 2:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the stopped sources did not finish")
            time.sleep(1.0)  # periodic checkpoints would record them as finished now
            assert client.status(job_id).value == "RUNNING", "the stop completed before the kill"
        cluster.jobmanager.kill()
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=30) as client:
            # The stop's trigger id still answers (it was a 404): the stop did not complete.
            answer = client.savepoint_status(job_id, trigger)
            assert answer["status"]["id"] == "COMPLETED" and "location" not in answer["operation"]
            assert (
                "JobManager failed before this savepoint completed"
                in answer["operation"]["failure-cause"]["stack-trace"]
            )
            status = client.wait(job_id, timeout=120)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
        cluster.jobmanager.terminate()
        cluster.start_jobmanager()  # the job ended in an earlier run: its trigger ids still answer
        with JobClient(cluster.rest_url, timeout=30) as client:
            assert client.savepoint_status(job_id, trigger) == answer

    records = [r for part in (tmp_path / "out").glob("part-*.json") for r in json.loads(part.read_text())]
    assert sum(r["count"] for r in records) == count
    assert sum(r["sum"] for r in records) == count * (count - 1) // 2
    assert not list((tmp_path / "savepoints").glob("*")), "a half-written savepoint was left behind"


def test_a_continuous_job_recovered_after_a_jobmanager_kill_adds_to_what_its_rounds_published(
    tmp_path: Path,
) -> None:
    """A continuous job whose rounds published output is checkpointed between rounds; the
    JobManager is killed and started again. The recovered job must go on as a continuation:
    the files its rounds read stay read, what they published stays published, and the next
    file is added to it (mode 'error' refuses only a path that had data before the job)."""
    from flink_runtime.pipeline import Pipeline
    from tests.integration.test_savepoints import write_corpus

    def words_of(directory: Path) -> collections.Counter[str]:
        words: collections.Counter[str] = collections.Counter()
        for part in directory.glob("*.json"):  # published files only (not _flink_staging/)
            words.update(json.loads(line)["word"] for line in part.read_text().splitlines() if line)
        return words

    pipeline = Pipeline("continuous words", parallelism=1)
    source = pipeline.read_text(str(tmp_path / "in" / "*.txt"), monitor_interval=0.3)
    source.select("explode(split(value, ' ')) AS word").write_json(str(tmp_path / "out"))
    graph = pipeline.job_graph()
    graph.config.update(recovering("300 ms", tmp_path / "checkpoints"))
    corpus = write_corpus(tmp_path / "in", files=1, seed=1)
    with StandaloneCluster(tmp_path / "cluster", properties=slow_heartbeats("30 s")) as cluster:
        cluster.start(taskmanagers=1, slots=1)
        with JobClient(cluster.rest_url, timeout=30) as client:
            job_id = client.submit(graph)
            eventually(lambda: words_of(tmp_path / "out") == corpus, 90, "the first round published")
            corpus += write_corpus(tmp_path / "in", files=1, seed=2, first=1)
            eventually(lambda: words_of(tmp_path / "out") == corpus, 90, "the second round published")
            checkpoints = len(re.findall(r"Completed checkpoint \d+ for job", cluster.jobmanager.log()))
            wait_for_checkpoints(cluster, checkpoints + 2)  # taken between rounds: both files read
        cluster.jobmanager.kill()
        cluster.start_jobmanager()
        corpus += write_corpus(tmp_path / "in", files=1, seed=3, first=2)
        with JobClient(cluster.rest_url, timeout=30) as client:

            def caught_up() -> bool:
                status = client.status(job_id).value
                assert status not in ("FAILED", "FINISHED", "CANCELED"), (
                    f"the recovered job is {status}: {client.exceptions(job_id)['root-exception']}"
                )
                return words_of(tmp_path / "out") == corpus

            eventually(caught_up, 90, "the recovered job adding the third file to the output")
            time.sleep(1.0)  # and no round after it publishes anything twice
            assert words_of(tmp_path / "out") == corpus
            client.cancel(job_id)
