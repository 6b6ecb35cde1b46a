"""TaskManagers whose data work runs on a Spark Connect server (`spark.remote: sc://...`).

Real processes: a Connect server started from the pyspark wheel's
`sbin/start-connect-server.sh`, and a JobManager and TaskManagers started through the
CLI whose only link to Spark is the Connect client (no JVM in them). The same word
count gives the exact counts, and the server's own REST API shows it ran the tasks.

Then a TaskManager whose data folder the server does not see (the server runs in a
mount namespace where that folder is an empty tmpfs, as on a host without the shared
volume): its job fails with the reason naming io.tmp.dirs, and publishes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.conftest import SPARK_JAVA_OPTIONS
from tests.helpers.spark_connect import spark_connect_server

pytestmark = pytest.mark.integration

PROPERTIES = {"heartbeat.interval": "1 s", "heartbeat.timeout": "20 s", "restart-strategy.type": "none"}


def word_count(data: Path, out: Path) -> Pipeline:
    pipeline = Pipeline("connect word count", parallelism=2)
    (
        pipeline.read_text(str(data / "*.txt"))
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_json(str(out), mode="overwrite")
    )
    return pipeline


def counts_in(out: Path) -> dict[str, int]:
    counts = {}
    for part in out.glob("*.json"):
        for line in part.read_text().splitlines():
            record = json.loads(line)
            counts[record["word"]] = record["n"]
    return counts


def test_word_count_runs_on_a_connect_server_and_a_hidden_data_folder_fails_clearly(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test hides a folder from the Connect server with `unshare --mount`, which needs root")
    data = tmp_path / "in"
    data.mkdir()
    for index in range(3):
        (data / f"{index}.txt").write_text("a b c\na b\n")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    with (
        spark_connect_server(
            tmp_path / "connect", hidden=[hidden], java_options=SPARK_JAVA_OPTIONS, wait=False
        ) as server,
        StandaloneCluster(tmp_path / "cluster", properties=dict(PROPERTIES)) as cluster,
    ):
        cluster.properties["spark.remote"] = server.url
        cluster.start_jobmanager()  # while the server's JVM starts
        cluster.start_taskmanager("tm-shared", **{"io.tmp.dirs": str(tmp_path / "shared-data")})
        server.wait_until_ready()
        tasks_before = server.completed_tasks()
        with JobClient(cluster.rest_url, timeout=60) as client:
            job_id = client.submit(word_count(data, tmp_path / "out").job_graph())
            status = client.wait(job_id, timeout=240)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            vertices = httpx.get(f"{cluster.rest_url}/jobs/{job_id}", timeout=10).json()["vertices"]
        assert counts_in(tmp_path / "out") == {"a": 6, "b": 6, "c": 3}
        # Row counts come from Observations, which Spark Connect answers too: the source
        # wrote one partial count per word and split (2 splits, one per source subtask),
        # the sink read those and wrote 3.
        assert [(v["metrics"]["read-records"], v["metrics"]["write-records"]) for v in vertices] == [(0, 6), (6, 3)]
        assert server.completed_tasks() > tasks_before, "the Connect server ran no Spark task"

        cluster.taskmanagers[0].terminate()
        cluster.wait_for_taskmanagers(lambda ids: "tm-shared" not in ids)
        cluster.start_taskmanager("tm-hidden", **{"io.tmp.dirs": str(hidden / "data")})
        with JobClient(cluster.rest_url, timeout=60) as client:
            job_id = client.submit(word_count(data, tmp_path / "out-hidden").job_graph())
            status = client.wait(job_id, timeout=240)
            root = client.exceptions(job_id)["root-exception"] or ""
    assert status.value == "FAILED"
    assert "DataFolderNotShared" in root and "does not see this TaskManager's data folder" in root, root
    assert str(hidden / "data") in root and "io.tmp.dirs" in root
    assert not (tmp_path / "out-hidden").exists() or not counts_in(tmp_path / "out-hidden")
