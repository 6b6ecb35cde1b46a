"""A JDBC copy under kill -9: a TaskManager killed mid-write, then the JobManager killed
and restarted (the job store brings the job back), and the table holds every source row
exactly once, with no staging table left.

Standalone processes as in test_chaos.py; the job reads 12 key ranges (half a second
each, tests.helpers.transforms:slow) and appends to a table, the strictest mode for
duplicates. The password is `secret://pg`, in the cluster's security.secrets.dir.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psycopg
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.postgres import PostgresServer

pytestmark = pytest.mark.integration

ROWS = 2400
SPLITS = 12
PROPERTIES = {
    "heartbeat.interval": "300 ms",
    "heartbeat.timeout": "5 s",
    "slot.request.timeout": "120 s",
    "taskmanager.numberOfTaskSlots": 1,
    "spark.master": "local[1]",
    "execution.checkpointing.min-interval": "100 ms",
}
JOB_CONFIG = {
    "execution.checkpointing.interval": "500 ms",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "100",
    "restart-strategy.fixed-delay.delay": "200 ms",
}


def source_splits(rest_url: str, job_id: str) -> dict[str, int]:
    try:
        details = httpx.get(f"{rest_url}/jobs/{job_id}", timeout=10).json()
        source = next(v for v in details["vertices"] if v["name"].startswith("Read JDBC"))
        vertex = httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{source['id']}", timeout=10).json()
    except (httpx.HTTPError, ValueError, KeyError, StopIteration):
        return {}
    return vertex.get("input-splits", {})


@pytest.mark.timeout(600)
def test_taskmanager_and_jobmanager_kills_leave_the_table_exact(tmp_path: Path, postgres: PostgresServer) -> None:
    name = postgres.new_database("chaos").rsplit("/", 1)[-1]
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres dbname={name}"
    url = f"jdbc:postgresql://127.0.0.1:{postgres.port}/{name}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, amount bigint NOT NULL)")
        conn.execute("INSERT INTO orders SELECT i, i * 3 FROM generate_series(1, %s) AS i", (ROWS,))
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "pg").write_text("not-checked-by-a-trusting-server\n")

    pipeline = Pipeline("jdbc copy under chaos", parallelism=2, config=JOB_CONFIG)
    source = pipeline.read_jdbc(
        url, table="orders", user="postgres", password="secret://pg", partition_column="id", splits=SPLITS
    )
    source.transform("tests.helpers.transforms:slow").write_jdbc(
        url, "orders_copy", mode="append", user="postgres", password="secret://pg"
    )
    properties = {**PROPERTIES, "security.secrets.dir": str(secrets)}
    with StandaloneCluster(tmp_path / "cluster", properties=properties) as cluster:
        cluster.start(taskmanagers=2, slots=1)
        with JobClient(cluster.rest_url, timeout=60) as client:
            job_id = client.submit(pipeline.job_graph())

        def wait_for_splits(count: int) -> None:
            deadline = time.monotonic() + 180
            while source_splits(cluster.rest_url, job_id).get("completed", 0) < count:
                assert time.monotonic() < deadline, f"the job did not complete {count} splits"
                time.sleep(0.3)

        wait_for_splits(3)
        victim = next(tm for tm in cluster.taskmanagers if tm.process.poll() is None)
        victim.kill()  # SIGKILL, mid-split: its attempt's staging table is left half written
        cluster.start_taskmanager("replacement", wait=False)
        wait_for_splits(6)
        cluster.jobmanager.kill()
        time.sleep(1.0)
        cluster.start_jobmanager()

        with JobClient(cluster.rest_url, timeout=60) as client:
            status = client.wait(job_id, timeout=300)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            splits = source_splits(cluster.rest_url, job_id)
        assert "Recovering job" in cluster.jobmanager.log()

    with psycopg.connect(conninfo) as conn:
        copied = conn.execute("SELECT id, amount FROM orders_copy ORDER BY id, amount").fetchall()
        staged = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_name LIKE '\\_flink\\_stg\\_%%'"
        ).fetchall()
    assert len(copied) == ROWS
    assert copied == [(i, i * 3) for i in range(1, ROWS + 1)]
    assert staged == []
    # The recovered run skipped the ranges its checkpoint had completed: their rows come
    # from the earlier run's committed staging tables, published with the new run's.
    assert splits["completed"] == splits["total"] < SPLITS
