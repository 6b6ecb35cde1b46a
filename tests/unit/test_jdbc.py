"""JDBC pieces without Spark: key ranges, URL and argument checks, secrets, lineage names,
and the publishing transaction against the real PostgreSQL server (no cluster)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from flink_runtime.airflow.lineage import sinks_of, sources_of
from flink_runtime.io import jdbc
from flink_runtime.pipeline import Pipeline
from flink_runtime.security.secret_store import SecretError, SecretStore
from tests.helpers.postgres import PostgresServer

URL = "jdbc:postgresql://db.example:5433/shop"


def covered(predicates: list[str], values: range) -> list[int]:
    """How many predicates each value satisfies (evaluated in Python)."""
    counts = []
    for value in values:
        hits = 0
        for predicate in predicates:
            expression = predicate.replace('"id"', str(value)).replace(" AND ", " and ").replace(" OR ", " or ")
            expression = re.sub(r"\S+ IS NULL", "False", expression).replace("TRUE", "True")
            hits += bool(eval(expression))  # noqa: S307 - our own predicates
        counts.append(hits)
    return counts


def test_key_ranges_cover_every_value_exactly_once_as_sparks_column_partitioning() -> None:
    predicates = jdbc.range_predicates("id", 1, 1001, 4)
    assert predicates == [
        '"id" < 251 OR "id" IS NULL',
        '"id" >= 251 AND "id" < 501',
        '"id" >= 501 AND "id" < 751',
        '"id" >= 751',
    ]
    # Values outside the bounds still land in the first or last range.
    assert covered(predicates, range(-5, 1100)) == [1] * 1105
    assert jdbc.range_predicates("id", 1, 4, 10) == ['"id" < 2 OR "id" IS NULL', '"id" >= 2 AND "id" < 3', '"id" >= 3']
    assert jdbc.range_predicates("id", 5, 5, 3) == ["TRUE"]


def test_urls_tables_and_arguments_are_checked_where_given() -> None:
    parsed = jdbc.parse_url(URL)
    assert (parsed.namespace, parsed.database) == ("postgres://db.example:5433", "shop")
    assert jdbc.parse_url("jdbc:postgresql://h/db").port == 5432
    for bad, message in [
        ("jdbc:mysql://h/db", "PostgreSQL JDBC URL"),
        ("jdbc:postgresql://u:pw@h/db", "credentials in the URL"),
        ("jdbc:postgresql://h/db?password=x", "no password in the URL"),
        ("jdbc:postgresql://h/", "host and a database"),
    ]:
        with pytest.raises(jdbc.JdbcError, match=message):
            jdbc.parse_url(bad)
    assert jdbc.split_table("orders") == ("public", "orders")
    with pytest.raises(jdbc.JdbcError, match="schema.table"):
        jdbc.split_table("orders; DROP TABLE x")

    pipeline = Pipeline("checks")
    with pytest.raises(ValueError, match="secret://<name>"):
        pipeline.read_jdbc(URL, table="orders", password="hunter2")
    with pytest.raises(ValueError, match="exactly one of table"):
        pipeline.read_jdbc(URL, table="orders", query="SELECT 1")
    with pytest.raises(ValueError, match="partition_column"):
        pipeline.read_jdbc(URL, table="orders", splits=4)
    source = pipeline.read_jdbc(URL, table="orders")
    with pytest.raises(ValueError, match="needs keys"):
        source.write_jdbc(URL, "out", mode="upsert")
    with pytest.raises(ValueError, match="mode must be one of"):
        source.write_jdbc(URL, "out", mode="merge")


def test_secrets_resolve_from_the_store_directory_then_the_environment(tmp_path: Path) -> None:
    (tmp_path / "orders-db").write_text("from-file\n")
    store = SecretStore(str(tmp_path), environ={"FLINK_SECRET_OTHER_DB": "from-env"})
    assert store.resolve("secret://orders-db") == "from-file"
    assert store.resolve("secret://other.db") == "from-env"
    with pytest.raises(SecretError, match="FLINK_SECRET_MISSING"):
        store.resolve("secret://missing")
    with pytest.raises(SecretError, match="letters, digits"):
        store.resolve("secret://../etc/passwd")


def test_lineage_names_jdbc_tables_per_the_openlineage_spec() -> None:
    pipeline = Pipeline("lineage")
    pipeline.read_jdbc(URL, table="sales.orders").write_jdbc("jdbc:postgresql://db.example/shop", "summary")
    graph = pipeline.job_graph()
    (source,), (sink,) = sources_of(graph), sinks_of(graph)
    assert (source.namespace, source.name) == ("postgres://db.example:5433", "shop.sales.orders")
    assert (sink.namespace, sink.name) == ("postgres://db.example:5432", "shop.public.summary")
    assert sink.uri == "postgres://db.example:5432/shop/public/summary"


def test_publish_is_one_idempotent_transaction(postgres: PostgresServer) -> None:
    """Committed chunks are published once; a publish run again (a JobManager killed after
    its commit) finds its marker and adds nothing; in-progress tables are never published."""
    name = postgres.new_database("pub").rsplit("/", 1)[-1]
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres dbname={name}"
    sink = {"format": "jdbc", "url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/{name}", "table": "totals"}
    upsert = {**sink, "mode": "upsert", "keys": ["k"]}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for chunk, rows in [("r0", [(1, 10), (2, 20)]), ("r1", [(3, 30)])]:
            table = jdbc.staging_table(upsert, "job-a", chunk)
            conn.execute(f'CREATE TABLE "{table}" (k integer, v integer)')
            for row in rows:
                conn.execute(f'INSERT INTO "{table}" VALUES (%s, %s)', row)
        orphan = jdbc.staging_table(upsert, "job-a", "r2", execution_id="dead-attempt")
        conn.execute(f'CREATE TABLE "{orphan}" (k integer, v integer)')
        conn.execute(f'INSERT INTO "{orphan}" VALUES (99, 99)')

        assert jdbc.publish(conn, upsert, "job-a") == 2
        assert jdbc.publish(conn, upsert, "job-a") == 0  # already published: nothing added
        assert conn.execute("SELECT k, v FROM totals ORDER BY k").fetchall() == [(1, 10), (2, 20), (3, 30)]
        staged = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\\_flink\\_stg%%'")
        assert staged.fetchone() == (0,)

        # Another job upserts on the key: replaced, not duplicated.
        table = jdbc.staging_table(upsert, "job-b", "subtask-0")
        conn.execute(f'CREATE TABLE "{table}" (k integer, v integer)')
        conn.execute(f'INSERT INTO "{table}" VALUES (2, 21), (4, 40), (4, 41)')
        assert jdbc.publish(conn, upsert, "job-b") == 1
        assert [r[0] for r in conn.execute("SELECT k FROM totals ORDER BY k")] == [1, 2, 3, 4]
        assert conn.execute("SELECT v FROM totals WHERE k = 2").fetchone() == (21,)
