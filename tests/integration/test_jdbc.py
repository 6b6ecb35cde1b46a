"""JDBC sources and sinks against a real PostgreSQL server (the session's `postgres`).

One MiniCluster for the module, configured with a secret store (security.secrets.dir)
holding the database password the jobs name as `secret://pg`: the server trusts loopback,
so the password is never checked by it; what the tests check is that the value is
resolved where it is used (a missing secret fails the job saying which) and is nowhere
in what the JobManager stores or serves.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.conftest import fast_config
from tests.helpers.postgres import PostgresServer

pytestmark = pytest.mark.integration

PASSWORD = "pg-password-9f3c1e"
ROWS = 1000


@pytest.fixture(scope="module")
def jdbc_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    secrets = tmp_path_factory.mktemp("secrets")
    (secrets / "pg").write_text(PASSWORD + "\n")
    config = fast_config(
        **{"io.tmp.dirs": str(tmp_path_factory.mktemp("jdbc-data")), "security.secrets.dir": str(secrets)}
    )
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        yield cluster


@pytest.fixture
def database(postgres: PostgresServer) -> Iterator[tuple[str, str]]:
    """(JDBC URL, psycopg conninfo) of a new database with `orders` (ROWS rows)."""
    name = postgres.new_database("jdbc").rsplit("/", 1)[-1]
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres dbname={name}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, customer text NOT NULL, amount bigint NOT NULL)")
        conn.execute("INSERT INTO orders SELECT i, 'c' || (i %% 7), i * 10 FROM generate_series(1, %s) AS i", (ROWS,))
    yield f"jdbc:postgresql://127.0.0.1:{postgres.port}/{name}", conninfo


def rows(conninfo: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(sql).fetchall()


def expected_totals(low: int = 1, high: int = ROWS) -> list[tuple[str, int, int]]:
    totals: dict[str, list[int]] = {}
    for i in range(low, high + 1):
        entry = totals.setdefault(f"c{i % 7}", [0, 0])
        entry[0] += 1
        entry[1] += i * 10
    return sorted((customer, n, total) for customer, (n, total) in totals.items())


def run(cluster: MiniCluster, pipeline: Pipeline, expect: str = "FINISHED") -> str:
    with JobClient(cluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=180).value == expect
    return job_id


def staging_tables(conninfo: str) -> list[str]:
    return [
        r[0]
        for r in rows(
            conninfo, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE '\\_flink\\_stg\\_%'"
        )
    ]


def test_read_in_key_ranges_and_upsert_exactly_once(jdbc_cluster: MiniCluster, database: tuple[str, str]) -> None:
    url, conninfo = database
    pipeline = Pipeline("jdbc totals", parallelism=2)
    orders = pipeline.read_jdbc(
        url, table="orders", user="postgres", password="secret://pg", partition_column="id", splits=5
    )
    totals = orders.key_by("customer").agg("count(*) AS n", "sum(amount) AS total")
    totals.write_jdbc(url, "customer_totals", mode="upsert", keys=["customer"], user="postgres", password="secret://pg")
    job_id = run(jdbc_cluster, pipeline)

    assert rows(conninfo, "SELECT customer, n, total FROM customer_totals ORDER BY customer") == expected_totals()
    assert staging_tables(conninfo) == []
    # Five key ranges, handed out one at a time through the split assigner.
    job = jdbc_cluster.jobmanager.jobs[job_id]
    assert len(job.prepared["read-jdbc-1"].splits) == 5
    # The password is resolved on the planner and the TaskManager, never sent or stored.
    graph_json = pipeline.job_graph().to_json().decode()
    assert "secret://pg" in graph_json and PASSWORD not in graph_json
    for path in (f"/jobs/{job_id}/config", f"/jobs/{job_id}", "/jobs/overview"):
        with urllib.request.urlopen(jdbc_cluster.rest_url + path) as answer:
            assert PASSWORD not in answer.read().decode()

    # Upsert again with changed rows: merged on the key, no duplicates.
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("UPDATE orders SET amount = 0 WHERE customer = 'c3'")
    run(jdbc_cluster, pipeline)
    expected = [(c, n, 0 if c == "c3" else t) for c, n, t in expected_totals()]
    assert rows(conninfo, "SELECT customer, n, total FROM customer_totals ORDER BY customer") == expected


def test_failover_rereads_unfinished_ranges_and_append_has_no_duplicates(
    jdbc_cluster: MiniCluster, database: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, conninfo = database
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(tmp_path / "markers"))
    pipeline = Pipeline(
        "jdbc copy with a failure",
        parallelism=2,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "100 ms"},
    )
    source = pipeline.read_jdbc(
        url,
        table="orders",
        user="postgres",
        password="secret://pg",
        partition_column="id",
        lower=1,
        upper=ROWS,
        splits=6,
    )
    source.transform("tests.helpers.transforms:fail_on_third_split").write_jdbc(
        url, "orders_copy", mode="append", user="postgres", password="secret://pg"
    )
    run(jdbc_cluster, pipeline)
    assert (tmp_path / "markers" / "failed").exists()
    copied = rows(conninfo, "SELECT id, customer, amount FROM orders_copy ORDER BY id")
    assert copied == rows(conninfo, "SELECT id, customer, amount FROM orders ORDER BY id")
    # Ranges finished before the failure were not read again: 6 splits + the failed one's retry.
    calls = len(list((tmp_path / "markers").glob("call-*")))
    assert calls <= 6 + 2, calls
    assert staging_tables(conninfo) == []

    # overwrite replaces the table's rows, in the publishing transaction.
    overwrite = Pipeline("jdbc overwrite", parallelism=2)
    overwrite.read_jdbc(
        url, query="SELECT * FROM orders WHERE id <= 10", user="postgres", password="secret://pg"
    ).write_jdbc(url, "orders_copy", mode="overwrite", user="postgres", password="secret://pg")
    run(jdbc_cluster, overwrite)
    assert [r[0] for r in rows(conninfo, "SELECT id FROM orders_copy ORDER BY id")] == list(range(1, 11))


def test_failed_job_drops_its_staging_tables_and_publishes_nothing(
    jdbc_cluster: MiniCluster, database: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, conninfo = database
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(tmp_path / "markers"))
    pipeline = Pipeline("jdbc failing", parallelism=1, config={"restart-strategy.type": "none"})
    source = pipeline.read_jdbc(
        url, table="orders", password="secret://pg", user="postgres", partition_column="id", splits=4
    )
    source.transform("tests.helpers.transforms:fail_on_third_split").write_jdbc(
        url, "never_written", password="secret://pg", user="postgres"
    )
    run(jdbc_cluster, pipeline, expect="FAILED")
    # Dropped once the job's end is stored (asynchronously, as a file sink's staging goes).
    deadline = time.monotonic() + 30
    while staging_tables(conninfo) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert staging_tables(conninfo) == []
    assert rows(conninfo, "SELECT to_regclass('never_written')") == [(None,)]

    # An upsert into a table without a unique index on the keys is refused at submit.
    upsert = Pipeline("jdbc upsert without a key")
    upsert.read_jdbc(url, table="orders", user="postgres").write_jdbc(
        url, "orders", mode="upsert", keys=["customer"], user="postgres"
    )
    with JobClient(jdbc_cluster.rest_url) as client, pytest.raises(Exception, match="no primary key or unique index"):
        client.submit(upsert.job_graph())

    # A secret the cluster does not have fails the submission, naming it.
    missing = Pipeline("jdbc missing secret")
    missing.read_jdbc(url, table="orders", password="secret://nope").write_jdbc(url, "x", password="secret://nope")
    with JobClient(jdbc_cluster.rest_url) as client, pytest.raises(Exception, match="FLINK_SECRET_NOPE"):
        client.submit(missing.job_graph())
