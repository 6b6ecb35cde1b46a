"""Chaos: TaskManagers killed several times and the JobManager once, mid-job.

Real processes: a JobManager with a SQLite job store and TaskManagers with their own
SparkSessions, started through the CLI. A three-stage PySpark job (CSV source -> keyed
aggregation -> join with a JSON dimension table -> Parquet sink) runs while TaskManagers
are killed with SIGKILL (replacements join) and the JobManager is killed with SIGKILL
and started again within heartbeat.timeout, so the tasks it deployed are still running
when its successor recovers the job. Each kill waits for the job's progress (input
splits completed in the current run), not for a fixed time, so it lands while tasks
process splits however long Spark takes to start. The published output must equal a
reference computed in plain Python, row by row: nothing lost, nothing counted twice.

This one test also holds what two older ones checked separately (they started the same
four JVMs each, minutes of the suite on two cores): completed input splits are never
handed out again (only a split in flight in a killed slot is), the recovered run skips
what the last checkpoint before the JobManager's kill had completed, and a job that
finished before the kill is still queryable after it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration

PROPERTIES = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "5 s",
    "slot.request.timeout": "120 s",
    "taskmanager.numberOfTaskSlots": 1,
    "spark.master": "local[1]",
    # The jobs checkpoint every few hundred milliseconds, to be killed between checkpoints.
    "execution.checkpointing.min-interval": "100 ms",
}
JOB_CONFIG = {
    "execution.checkpointing.interval": "500 ms",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "100",
    "restart-strategy.fixed-delay.delay": "200 ms",
}
REGIONS = [f"r{i}" for i in range(12)]

Row = tuple[str, int, int, str]


def write_inputs(directory: Path, files: int = 24, rows: int = 120) -> list[Row]:
    """Orders as CSV files (one split each) and a regions table; returns the reference
    result of the job: per region with a manager, (region, orders, total, manager)."""
    rng = random.Random(8)
    (directory / "orders").mkdir(parents=True)
    orders: dict[str, list[int]] = {region: [] for region in REGIONS}
    order_id = 0
    for index in range(files):
        lines = ["id,region,amount"]  # read_csv's default header=True
        for _ in range(rows):
            region, amount = rng.choice(REGIONS), rng.randint(1, 1000)
            orders[region].append(amount)
            lines.append(f"{order_id},{region},{amount}")
            order_id += 1
        (directory / "orders" / f"{index:03d}.csv").write_text("\n".join(lines) + "\n")
    managers = {region: f"manager-{region}" for region in REGIONS[:-2]}  # two regions without one
    (directory / "regions.json").write_text(
        "\n".join(json.dumps({"region": r, "manager": m}) for r, m in managers.items()) + "\n"
    )
    return sorted((r, len(orders[r]), sum(orders[r]), managers[r]) for r in managers)


def regional_totals(directory: Path, output: Path) -> Pipeline:
    config = {**JOB_CONFIG, "state.checkpoints.dir": str(output.parent / f"{output.name}-checkpoints")}
    pipeline = Pipeline("regional totals", parallelism=3, config=config)
    orders = pipeline.read_csv(
        str(directory / "orders" / "*.csv"), schema="id BIGINT, region STRING, amount BIGINT", split_size=1
    ).transform("tests.helpers.transforms:slow")
    regions = pipeline.read_json(str(directory / "regions.json"), schema="region STRING, manager STRING")
    (
        orders.key_by("region")
        .agg("count(*) AS orders", "sum(amount) AS total")
        .join(regions, on="region", how="inner")
        .select("region", "orders", "total", "manager")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def published_rows(output: Path) -> list[Row]:
    table = pq.read_table(output)
    columns = [table.column(name).to_pylist() for name in ("region", "orders", "total", "manager")]
    return sorted(zip(*columns, strict=True))


def input_splits(rest_url: str, job_id: str) -> dict[str, int]:
    """The orders source's split counts in the job's current run (a recovered run counts
    from 0; {} while the job is being planned or the JobManager does not answer)."""
    try:
        details = httpx.get(f"{rest_url}/jobs/{job_id}", timeout=10).json()
        source = next(v for v in details["vertices"] if v["name"].startswith("Read CSV"))
        vertex = httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{source['id']}", timeout=10).json()
    except (httpx.HTTPError, ValueError, KeyError, StopIteration):
        return {}
    return vertex.get("input-splits", {})


def completed_checkpoints(rest_url: str, job_id: str) -> int:
    try:
        return httpx.get(f"{rest_url}/jobs/{job_id}/checkpoints", timeout=10).json()["counts"]["completed"]
    except (httpx.HTTPError, ValueError, KeyError):
        return 0


# Eight JVM starts on two cores: well past the suite's 300 s per-test limit on a busy machine.
@pytest.mark.timeout(600)
def test_tm_kills_and_a_jobmanager_kill_leave_the_output_exact(tmp_path: Path) -> None:
    expected = write_inputs(tmp_path / "in")
    rng = random.Random(11)
    kills_in_recovered_run = 0
    with StandaloneCluster(tmp_path / "cluster", properties=dict(PROPERTIES)) as cluster:
        cluster.start(taskmanagers=3, slots=1)
        with JobClient(cluster.rest_url, timeout=60) as client:
            finished = client.submit(sleep_job(0.05, name="finished before the kill"))
            job_id = client.submit(regional_totals(tmp_path / "in", tmp_path / "out").job_graph())
            assert client.wait(finished, timeout=120).value == "FINISHED"

        def kill_a_taskmanager() -> None:
            victim = rng.choice([tm for tm in cluster.taskmanagers if tm.process.poll() is None])
            victim.kill()
            cluster.start_taskmanager(f"replacement-{len(cluster.taskmanagers)}", wait=False)

        def kill_the_jobmanager() -> None:
            # Kill after a checkpoint that holds completed splits, so the recovered run
            # must skip them (checked below).
            checkpoints, deadline = completed_checkpoints(cluster.rest_url, job_id), time.monotonic() + 60
            while completed_checkpoints(cluster.rest_url, job_id) == checkpoints:
                assert time.monotonic() < deadline, "no checkpoint completed"
                time.sleep(0.1)
            cluster.jobmanager.kill()
            time.sleep(1.0)
            cluster.start_jobmanager()  # same ports; the job store brings the job back

        def kill_a_taskmanager_of_the_recovered_run() -> None:
            nonlocal kills_in_recovered_run
            kills_in_recovered_run += 1
            kill_a_taskmanager()

        # (splits the current run has completed, act): the first two in the first run,
        # the last two in the run the restarted JobManager recovered (24 splits in all).
        chaos: list[tuple[int, Callable[[], None]]] = [
            (3, kill_a_taskmanager),
            (6, kill_the_jobmanager),
            (2, kill_a_taskmanager_of_the_recovered_run),
            (4, kill_a_taskmanager_of_the_recovered_run),
        ]
        for splits, act in chaos:
            deadline = time.monotonic() + 180  # the first run starts 4 JVMs, the recovered one 3
            while input_splits(cluster.rest_url, job_id).get("completed", 0) < splits:
                assert time.monotonic() < deadline, f"the job did not complete {splits} splits"
                time.sleep(0.5)  # a split takes longer; polling costs the 2 cores CPU
            with JobClient(cluster.rest_url, timeout=30) as client:
                state = client.status(job_id).value
            assert state in ("RUNNING", "RESTARTING", "INITIALIZING", "CREATED"), f"job ended ({state}) too early"
            act()

        with JobClient(cluster.rest_url, timeout=60) as client:
            status = client.wait(job_id, timeout=300)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            splits = input_splits(cluster.rest_url, job_id)
            # The job that finished before the kill is still queryable after the restart.
            assert client.status(finished).value == "FINISHED"
            assert finished in {job["id"] for job in httpx.get(f"{cluster.rest_url}/jobs").json()["jobs"]}
        assert "Recovering job" in cluster.jobmanager.log()

    assert published_rows(tmp_path / "out") == expected
    # The recovered run skipped what the checkpoint before the kill had completed...
    assert splits["completed"] == splits["total"] < 24
    # ...and handed out a completed split again only where a killed slot had one in flight.
    assert splits["total"] <= splits["assignments"] <= splits["total"] + kills_in_recovered_run
