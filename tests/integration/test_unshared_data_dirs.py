"""A partition a consumer cannot see fails the job with the reason, never reads as empty.

TaskManagers whose data folders (io.tmp.dirs) are not shared must not run a word count
to FINISHED with part of the total, a consumer counting every partition it cannot find
as empty. Here two TaskManagers run in working directories of their own with the
relative `io.tmp.dirs: data`: the same path names a different folder on each, as it
would on hosts that do not share it, so each consumer finds only the partitions
produced on its own TaskManager. Each producer
records what it committed (io/partitions.py); the consumer must fail with a clear
reason, and nothing may be published.

That is the `shared` mode of taskmanager.network.partition-serving (kept for shared
filesystems and Hadoop URIs), which promises that every TaskManager sees every
partition. In the default `network` mode each TaskManager serves the partitions it
produced (tests/integration/test_multihost_netns.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.jobs import modulo_sum_job

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("netns")]  # one netns network at a time

PROPERTIES = {
    "spark.master": "local[1]",
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "20 s",
    "taskmanager.network.partition-serving": "shared",
}
NO_RESTARTS = {"restart-strategy.type": "none"}


def word_count(corpus: Path, output: Path) -> Pipeline:
    pipeline = Pipeline("word count on unshared folders", parallelism=2, config=dict(NO_RESTARTS))
    (
        pipeline.read_csv(str(corpus / "*.csv"), schema="word STRING", split_size=1)
        .key_by("word")
        .agg("count(*) AS n")
        .write_json(str(output), mode="overwrite")
    )
    return pipeline


def failure_of(client: JobClient, job_id: str) -> str:
    status = client.wait(job_id, timeout=240)
    root = client.exceptions(job_id)["root-exception"] or ""
    assert status.value == "FAILED", f"{status.value}: a consumer read missing partitions as empty"
    return root


@pytest.fixture(scope="module")
def unshared(tmp_path_factory: pytest.TempPathFactory):
    """Two one-slot TaskManagers, each with a data folder of its own under one path."""
    work = tmp_path_factory.mktemp("unshared")
    with StandaloneCluster(work / "cluster", properties=dict(PROPERTIES)) as cluster:
        cluster.start_jobmanager()
        for name in ("tm-a", "tm-b"):
            (work / name).mkdir()
            cluster.start_taskmanager(
                name, cwd=work / name, **{"io.tmp.dirs": "data", "taskmanager.numberOfTaskSlots": 1}
            )
        cluster.wait_for_taskmanagers(lambda registered: len(registered) == 2)
        yield cluster, work


def test_spark_consumer_fails_on_a_partition_it_cannot_see(unshared) -> None:
    cluster, work = unshared
    corpus = work / "corpus"
    corpus.mkdir()
    for index in range(4):
        (corpus / f"{index}.csv").write_text("".join(f"w{n % 13}\n" for n in range(1000)))
    output = work / "counts"
    with JobClient(cluster.rest_url, timeout=60) as client:
        root = failure_of(client, client.submit(word_count(corpus, output).job_graph()))
    assert "PartitionNotFoundError" in root and "io.tmp.dirs must be a directory every TaskManager shares" in root
    assert not list(output.glob("*.json")), "a failed job published output"


def test_builtin_consumer_fails_on_a_partition_it_cannot_see(unshared) -> None:
    cluster, work = unshared
    graph = modulo_sum_job(work / "sums", count=10_000)
    graph.config.update(NO_RESTARTS)
    with JobClient(cluster.rest_url, timeout=60) as client:
        root = failure_of(client, client.submit(graph))
    assert "PartitionNotFoundError" in root and "io.tmp.dirs" in root
