"""TaskManagers killed with SIGKILL mid-job: the job still finishes with exact output.

Real processes: a JobManager and three TaskManagers started through the CLI, each
TaskManager with its own SparkSession. TaskManagers are killed while a two-stage word
count processes its splits (each kill waits for the job's progress, not for a fixed
time, so it lands mid-job however long Spark takes to start); replacements join. The
output must equal a plain Python count (nothing lost, nothing twice), and completed
input splits must never be handed out again (each kill may lose at most the split in
flight in the killed slot).
"""

from __future__ import annotations

import collections
import random
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration

PROPERTIES = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "2 s",
    "taskmanager.numberOfTaskSlots": 1,
    "spark.master": "local[1]",
}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "50",
            "restart-strategy.fixed-delay.delay": "200 ms"}  # fmt: skip


def write_corpus(directory: Path, files: int = 24) -> collections.Counter[str]:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    directory.mkdir()
    counts: collections.Counter[str] = collections.Counter()
    for index in range(files):
        lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(50)]
        counts.update(word for line in lines for word in line.split())
        (directory / f"{index:02d}.txt").write_text("\n".join(lines) + "\n")
    return counts


def word_count(input_dir: Path, output: Path, parallelism: int) -> Pipeline:
    pipeline = Pipeline("fault tolerant word count", parallelism=parallelism, config=RESTARTS)
    (
        pipeline.read_text(str(input_dir / "*.txt"), split_size=1)  # one file per split
        .transform("tests.helpers.transforms:slow")
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def input_splits(rest_url: str, job_id: str) -> dict[str, int]:
    """The source's split counts ({} while the job is still being planned)."""
    details = httpx.get(f"{rest_url}/jobs/{job_id}", timeout=10).json()
    source = next((v for v in details["vertices"] if v["name"].startswith("Read text")), None)
    if source is None:
        return {}
    return httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{source['id']}", timeout=10).json().get("input-splits", {})


def test_killing_taskmanagers_mid_job_changes_nothing_in_the_output(tmp_path: Path) -> None:
    expected = write_corpus(tmp_path / "in")
    with StandaloneCluster(tmp_path / "cluster", properties=dict(PROPERTIES)) as cluster:
        cluster.start(taskmanagers=3, slots=1)
        with JobClient(cluster.rest_url, timeout=60) as client:
            job_id = client.submit(word_count(tmp_path / "in", tmp_path / "out", parallelism=3).job_graph())
            rng = random.Random(1)
            kills = 0
            # Kill after 3 completed splits (Spark has started) and again after 4 more:
            # completed splits exist that must not be handed out again.
            for completed in (3, 7):
                deadline = time.monotonic() + 180  # four JVMs start first on two cores
                while input_splits(cluster.rest_url, job_id).get("completed", 0) < completed:
                    assert time.monotonic() < deadline, f"the job did not complete {completed} splits"
                    assert client.status(job_id).value in ("INITIALIZING", "CREATED", "RUNNING", "RESTARTING")
                    time.sleep(0.5)  # a split takes longer; polling costs the 2 cores CPU
                if client.status(job_id).value != "RUNNING":
                    break
                victim = rng.choice([tm for tm in cluster.taskmanagers if tm.process.poll() is None])
                victim.kill()
                kills += 1
                cluster.start_taskmanager(f"replacement-{kills}", wait=False)
            status = client.wait(job_id, timeout=240)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            splits = input_splits(cluster.rest_url, job_id)

    assert kills >= 1
    table = pq.read_table(tmp_path / "out")
    actual = dict(zip(table.column("word").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert actual == dict(expected)  # nothing lost, nothing counted twice
    assert splits["completed"] == splits["total"] == 24
    # Only a split in flight in a killed slot is handed out again.
    assert splits["total"] <= splits["assignments"] <= splits["total"] + kills
