"""dags/nightly_orders.py for one day under a real Airflow (scheduler, dag-processor,
triggerer, api-server; LocalExecutor), against the real PostgreSQL server and the
session's MiniCluster: the summary table holds exactly the day's rows (other days'
rows untouched), the day's Parquet folder exactly the day's enriched orders.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest

from flink_runtime.minicluster import MiniCluster
from tests.helpers.airflow_deployment import AirflowDeployment
from tests.helpers.postgres import PostgresServer

pytestmark = pytest.mark.integration

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"
# Long before the run: the run the scheduler makes by itself for the latest day (the DAG has
# a schedule) finds no orders, and its job adds no summary rows.
DAY = "2024-03-05"


def fill(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (customer_id integer PRIMARY KEY, region text NOT NULL)")
        conn.execute("INSERT INTO customers VALUES (1, 'eu'), (2, 'eu'), (3, 'us')")
        conn.execute(
            "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount bigint, ordered_at timestamp)"
        )
        conn.execute(
            "INSERT INTO orders VALUES "
            "(1, 1, 10, '2024-03-04 23:59:59'),"  # the day before: not this run's
            "(2, 1, 20, '2024-03-05 00:00:00'), (3, 2, 5, '2024-03-05 12:00:00'),"
            "(4, 3, 7, '2024-03-05 23:59:59'), (5, 3, 1, '2024-03-06 00:00:00')"
        )
        # A summary row of another day, written by an earlier run: kept as it is.
        conn.execute(
            "CREATE TABLE daily_region_summary (day date, region text, orders bigint, revenue bigint, "
            "PRIMARY KEY (day, region))"
        )
        conn.execute("INSERT INTO daily_region_summary VALUES ('2024-03-04', 'eu', 1, 10)")


@pytest.mark.timeout(600)
def test_one_night_under_the_real_scheduler(minicluster: MiniCluster, postgres: PostgresServer, tmp_path: Path) -> None:
    database = postgres.new_database("nightly").rsplit("/", 1)[-1]
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres dbname={database}"
    fill(conninfo)
    host, port = minicluster.rest_url.removeprefix("http://").rsplit(":", 1)
    connections = {
        "flink_runtime_default": {"conn_type": "flink_runtime", "host": host, "port": int(port)},
        "nightly_orders_db": {
            "conn_type": "postgres",
            "host": "127.0.0.1",
            "port": postgres.port,
            "schema": database,
            "login": "postgres",
        },
    }
    env = {"FLINK_RUNTIME_DATA": str(tmp_path / "data")}
    with AirflowDeployment(tmp_path / "home", DAGS_FOLDER, connections, env=env) as airflow:
        airflow.wait_for_dag("nightly_orders")
        run_id = airflow.trigger("nightly_orders", logical_date=f"{DAY}T00:00:00Z")
        airflow.wait_for_task("nightly_orders", run_id, "nightly_orders", ["success"], timeout=420)

    with psycopg.connect(conninfo) as conn:
        summary = conn.execute(
            "SELECT day::text, region, orders, revenue FROM daily_region_summary ORDER BY day, region"
        ).fetchall()
    assert summary == [("2024-03-04", "eu", 1, 10), (DAY, "eu", 2, 25), (DAY, "us", 1, 7)]
    enriched = pq.read_table(tmp_path / "data" / "orders" / f"day={DAY}")
    assert sorted(zip(enriched.column("id").to_pylist(), enriched.column("region").to_pylist(), strict=True)) == [
        (2, "eu"),
        (3, "eu"),
        (4, "us"),
    ]
