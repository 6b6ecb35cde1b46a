"""TaskManagers on a real Spark standalone cluster (`spark.master: spark://...`).

Without `spark.cores.max` the first TaskManager's Spark application would take every
core of the cluster, the second would wait with `Initial job has not accepted any
resources`, and the job would hang. So each TaskManager asks for its
slots' worth of cores, the JobManager's plan checks take none, and a task whose
application gets no executor within `taskmanager.spark.resource-wait-timeout` fails
with that reason. The tasks' Spark work runs in the worker's executors (their logs say
so), and each TaskManager first checks that the cluster sees its data folder
(flink_runtime/taskmanager/shared_data_folder.py).

A TaskManager's resources size its application: `taskmanager.cpu.cores` (not the slot
count) is its `spark.cores.max`, and `taskmanager.memory.task.heap.size` its executors'
`spark.executor.memory`.

One test in two phases, because a Spark cluster and three Spark drivers cost a minute
to start on two cores: the second phase needs the first one's applications holding
every core anyway. The Flink-side processes start while the Spark cluster does, and the
JobManager's planner starts its (local) SparkSession at once, as a deployment's does.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.spark_standalone import QUICK_JVM, spark_standalone

pytestmark = pytest.mark.integration

PROPERTIES = {
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "30 s",
    "restart-strategy.type": "none",
    # The planner's SparkSession (local[1], no cores of the Spark cluster) starts with the
    # JobManager, while the Spark cluster starts, instead of at the first submission.
    "jobmanager.planner.warm-up": "true",
    # The executors run a few tiny tasks each: start them as the tests start every driver.
    "spark.executor.extraJavaOptions": QUICK_JVM,
    "spark.ui.enabled": "false",
}


HEAP = {"taskmanager.memory.task.heap.size": "512m"}  # the executors' memory: 3 fit the worker's 2g


def word_count(corpus: Path, output: Path, parallelism: int) -> Pipeline:
    pipeline = Pipeline("word count on Spark standalone", parallelism=parallelism)
    (
        pipeline.read_csv(str(corpus / "*.csv"), schema="word STRING", split_size=1)
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def test_taskmanagers_share_a_spark_standalone_cluster_and_one_without_cores_fails(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(4):
        (corpus / f"{index}.csv").write_text("word\n" + "".join(f"w{n % 7}\n" for n in range(700)))
    with (
        spark_standalone(tmp_path / "spark", cores=2, memory="2g", wait=False) as spark,
        StandaloneCluster(tmp_path / "cluster", properties=dict(PROPERTIES)) as cluster,
        JobClient(cluster.rest_url, timeout=60) as client,
    ):
        cluster.properties["spark.master"] = spark.master_url
        cluster.start_jobmanager()
        # tm-a: two slots on one core (by its slot count its application would take both
        # cores and tm-b's would get none); tm-b: one slot, one core.
        sized = {"taskmanager.numberOfTaskSlots": 2, "taskmanager.cpu.cores": 1}
        cluster.start_taskmanager("tm-a", wait=False, **sized, **{"taskmanager.memory.task.heap.size": "600m"})
        cluster.start_taskmanager("tm-b", wait=False, **{"taskmanager.numberOfTaskSlots": 1, **HEAP})
        cluster.wait_for_taskmanagers(lambda ids: {"tm-a", "tm-b"} <= ids)
        spark.wait_until_ready()

        # Three slots on a two-core cluster: one core per application, the job runs.
        job_id = client.submit(word_count(corpus, tmp_path / "out", parallelism=3).job_graph())
        status = client.wait(job_id, timeout=300)
        assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
        table = pq.read_table(tmp_path / "out")
        counts = dict(zip(table.column("word").to_pylist(), table.column("n").to_pylist(), strict=True))
        assert counts == {f"w{n}": 400 for n in range(7)}
        # One application per TaskManager, each with its TaskManager's core and task heap;
        # none for the JobManager.
        applications = spark.state()["activeapps"]
        assert sorted(app["cores"] for app in applications) == [1, 1], applications
        memory = sorted(app.get("memoryperexecutor", app.get("memoryperslave")) for app in applications)
        assert memory == [512, 600], applications
        # The data work ran on the worker: each application's executor there ran tasks.
        executor_logs = sorted((tmp_path / "spark" / "worker").glob("app-*/*/stderr"))
        assert sum("Running task" in log.read_text() for log in executor_logs) == 2, executor_logs

        # A third TaskManager finds every core taken (the others keep their sessions warm):
        # its task fails with the reason instead of waiting for ever.
        cluster.start_taskmanager(
            "tm-c", **{"taskmanager.numberOfTaskSlots": 1, "taskmanager.spark.resource-wait-timeout": "3 s", **HEAP}
        )
        job_id = client.submit(word_count(corpus, tmp_path / "out-3", parallelism=4).job_graph())
        status = client.wait(job_id, timeout=300)
        root = client.exceptions(job_id)["root-exception"] or ""
    assert status.value == "FAILED", "a job with a task on a Spark application without executors finished"
    assert "SparkResourcesUnavailable" in root and "no executor for 3 s" in root, root
    assert "taskmanager.spark.resource-wait-timeout" in root
    assert not list((tmp_path / "out-3").rglob("*.parquet")), "a failed job published output"
