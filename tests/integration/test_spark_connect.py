"""The same pipeline through Spark Connect (`spark.remote`), in a process of its own.

A process has one SparkSession, and the other tests' is a classic one, so this test
runs its MiniCluster in a child process. `spark.remote=local[2]` starts a Connect
server inside that process: the tasks then talk to Spark only through the Connect
client, exactly as with a remote `sc://host:15002`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    from flink_runtime.client import JobClient
    from flink_runtime.executiongraph import graph_io_metrics
    from flink_runtime.configuration import Configuration
    from flink_runtime.minicluster import MiniCluster
    from flink_runtime.pipeline import Pipeline

    data, out = sys.argv[1], sys.argv[2]
    pipeline = Pipeline("connect word count", parallelism=2)
    (pipeline.read_text(data + "/*.txt")
        .select("explode(split(value, ' ')) AS word")
        .key_by("word").agg("count(*) AS n")
        .write_json(out, mode="overwrite"))
    config = Configuration({"spark.remote": "local[2]"})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster, \\
            JobClient(cluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        status = client.wait(job_id, timeout=240)
        print("STATUS", status.value)
        if status.value != "FINISHED":
            print(client.exceptions(job_id)["root-exception"])
        metrics = graph_io_metrics(cluster.jobmanager.jobs[job_id].graph)
        print("METRICS", json.dumps([[m.metrics.records_in, m.metrics.records_out] for m in metrics.values()]))
    """
)


def test_pipeline_runs_through_spark_connect(tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    for index in range(3):
        (data / f"{index}.txt").write_text("a b c\na b\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data), str(out)], capture_output=True, text=True, timeout=280
    )
    assert "STATUS FINISHED" in result.stdout, result.stdout + result.stderr[-3000:]
    counts = {}
    for part in out.glob("*.json"):
        for line in part.read_text().splitlines():
            record = json.loads(line)
            counts[record["word"]] = record["n"]
    assert counts == {"a": 6, "b": 6, "c": 3}
    # Row counts come from Observations, which Spark Connect answers too: the source wrote
    # one partial count per word and split, the sink read those and wrote 3.
    metrics = json.loads(result.stdout.split("METRICS", 1)[1].splitlines()[0])
    assert metrics == [[0, 9], [9, 3]], result.stdout
