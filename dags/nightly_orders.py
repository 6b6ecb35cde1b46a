"""Nightly orders: PostgreSQL in, Parquet by day and a summary table back in PostgreSQL.

For each day D (the run's `ds`) one flink-runtime job:

    read_jdbc(orders of day D, in key ranges of `id`)  ─┐
                                                         ├─ join on customer_id
    read_jdbc(customers: the region lookup)            ─┘
        ├─ write_parquet(<base>/orders, partition_by=["day"],
        │                mode="overwrite_partitions")   the day's enriched orders, in orders/day=D
        └─ key_by(day, region).agg(...) -> write_jdbc(daily_region_summary, mode="upsert",
                                                     keys=["day", "region"])

Both outputs are exactly once and idempotent: the Parquet partition of the day is
replaced when the job finishes (the other days' partitions untouched), and the summary
rows of the day are upserted in one transaction at the job's end (a re-run of D, e.g.
after late orders arrived, replaces D's rows and leaves the other days' alone). The
day's orders are selected by the `{{ ds }}`-templated query below, rendered with the
run's day.

- The database is the Airflow connection `nightly_orders_db` (host, port, schema = the
  database, login). Its password is NOT sent to the cluster: the connection's extra
  `password_secret` names the cluster's secret (`secret://orders-db`: the file
  `<security.secrets.dir>/orders-db` or the variable FLINK_SECRET_ORDERS_DB where the
  JobManager and TaskManagers run); without it the job connects without a password.
- `<base>` is the Airflow Variable `flink_runtime_data`, else FLINK_RUNTIME_DATA, else
  `flink-runtime-airflow` under the temp dir (as dags/daily_word_count.py).
- Tables: `orders(id, customer_id, amount, ordered_at timestamp)`,
  `customers(customer_id, region)`; the job creates `daily_region_summary(day, region,
  orders, revenue)` with primary key (day, region) on its first run.

Connections: `flink_runtime_default` (type flink_runtime) and `nightly_orders_db`, e.g.
AIRFLOW_CONN_NIGHTLY_ORDERS_DB='{"conn_type": "postgres", "host": "db", "port": 5432,
"schema": "shop", "login": "etl", "extra": {"password_secret": "secret://orders-db"}}'.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, BaseHook, CronDataIntervalTimetable, Variable

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator

CONN_ID = "flink_runtime_default"
DB_CONN_ID = "nightly_orders_db"
DATA_VARIABLE = "flink_runtime_data"
SUMMARY_TABLE = "daily_region_summary"
# Rendered by Jinja with the run's context: the orders of the run's day.
ORDERS_OF_THE_DAY = (
    "SELECT id, customer_id, amount, ordered_at::date AS day FROM orders "
    "WHERE ordered_at >= DATE '{{ ds }}' AND ordered_at < DATE '{{ ds }}' + 1"
)


def data_dir() -> Path:
    base = Variable.get(DATA_VARIABLE, default=None) or os.environ.get("FLINK_RUNTIME_DATA")
    return Path(base or Path(tempfile.gettempdir()) / "flink-runtime-airflow")


def run_day(context: Any) -> str:
    """`ds`, also for a run triggered by hand, which has no logical date in Airflow 3."""
    if context.get("ds"):
        return context["ds"]
    for key in ("data_interval_start",):
        if context.get(key) is not None:
            return context[key].strftime("%Y-%m-%d")
    run_after = getattr(context.get("dag_run"), "run_after", None)
    return (run_after or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%d")


def nightly_pipeline(context: Any, jinja_env: Any):
    """The day's job, built when the task renders its templates (Airflow passes the
    context and its Jinja environment to a callable in a templated field)."""
    from flink_runtime.pipeline import Pipeline

    connection = BaseHook.get_connection(DB_CONN_ID)
    url = f"jdbc:postgresql://{connection.host}:{connection.port or 5432}/{connection.schema}"
    credentials = {"user": connection.login or None, "password": connection.extra_dejson.get("password_secret")}
    day = run_day(context)
    query = jinja_env.from_string(ORDERS_OF_THE_DAY).render(ds=day)

    pipeline = Pipeline(f"nightly orders {day}", parallelism=2)
    orders = pipeline.read_jdbc(url, query=query, partition_column="id", **credentials)
    customers = pipeline.read_jdbc(url, table="customers", **credentials)
    enriched = orders.join(customers, on="customer_id")
    enriched.write_parquet(str(data_dir() / "orders"), partition_by=["day"], mode="overwrite_partitions")
    (
        enriched.key_by("day", "region")
        .agg("count(*) AS orders", "sum(amount) AS revenue")
        .write_jdbc(url, SUMMARY_TABLE, mode="upsert", keys=["day", "region"], **credentials)
    )
    return pipeline


with DAG(
    dag_id="nightly_orders",
    description="Yesterday's orders from PostgreSQL to Parquet by day and a summary table",
    # The run for day D starts once D is over, with ds = D (see dags/daily_word_count.py).
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    max_active_runs=2,
    tags=["flink-runtime", "example", "jdbc"],
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": datetime.timedelta(minutes=1)},
):
    SubmitJobOperator(
        task_id="nightly_orders",
        job_graph=nightly_pipeline,
        flink_runtime_conn_id=CONN_ID,
        wait_for_completion=True,
        timeout=3600,
    )
