"""Daily order totals in one date-partitioned Parquet data set, safe to backfill and re-run.

Each day's orders land as CSV files in `<base>/orders/<YYYY-MM-DD>/` (columns
`item,amount`); the run for that day sums them per item on the cluster and writes
`<base>/daily_totals/day=<YYYY-MM-DD>/` with mode "overwrite_partitions": only the
day's partition is replaced, all at once when the job finishes. So

- a backfill (`airflow backfill create --dag-id partitioned_backfill --from-date
  2026-01-01 --to-date 2026-01-03`) fills the three days, whatever order its runs
  end in;
- re-running one day after its input changed (clear the run, or its task) replaces
  that day exactly and leaves every other day's files untouched, byte for byte;
- a failed or cancelled run, or a TaskManager lost mid-run (the job restarts its tasks),
  never leaves a day half written or mixed with an earlier run's files.

`<base>` is the Airflow Variable `flink_runtime_data`, else the environment variable
FLINK_RUNTIME_DATA, else `flink-runtime-airflow` under the temp dir; every process that
touches the files (workers, JobManager, TaskManagers) must see the same path. The DAG
param `transform` names an optional `module:function` (DataFrame in, DataFrame out)
applied to the orders first, e.g. to clean them.

Connection: `flink_runtime_default` (type flink_runtime), as in daily_word_count.py.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, Variable

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator

CONN_ID = "flink_runtime_default"
DATA_VARIABLE = "flink_runtime_data"


def data_dir() -> Path:
    """The shared data directory (read in tasks only, never at parse time)."""
    base = Variable.get(DATA_VARIABLE, default=None) or os.environ.get("FLINK_RUNTIME_DATA")
    return Path(base or Path(tempfile.gettempdir()) / "flink-runtime-airflow")


def daily_totals_pipeline(context: Any, jinja_env: Any = None):
    """The day's job, built when the task runs: its day is the run's `ds` (a backfill's
    and a scheduled run's logical date)."""
    from flink_runtime.pipeline import Pipeline

    day = context["logical_date"].strftime("%Y-%m-%d")
    base = data_dir()
    config = {  # a TaskManager lost mid-run restarts the job's tasks, not the Airflow task
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "5",
        "restart-strategy.fixed-delay.delay": "1 s",
    }
    pipeline = Pipeline(f"daily totals {day}", parallelism=2, config=config)
    orders = pipeline.read_csv(str(base / "orders" / day), schema="item STRING, amount BIGINT", split_size="64k")
    if context["params"].get("transform"):
        orders = orders.transform(context["params"]["transform"])
    (
        orders.with_column("day", f"DATE'{day}'")
        .key_by("day", "item")
        .agg("count(*) AS orders", "sum(amount) AS total")
        .write_parquet(str(base / "daily_totals"), mode="overwrite_partitions", partition_by=["day"])
    )
    return pipeline


with DAG(
    dag_id="partitioned_backfill",
    description="Daily totals into one day-partitioned data set: backfills and re-runs replace only their day",
    # ds = the day the run covers; the run starts once that day is over.
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    max_active_runs=3,
    params={"transform": Param(None, type=["null", "string"], description="optional module:function")},
    tags=["flink-runtime", "example"],
    doc_md=__doc__,
):
    SubmitJobOperator(
        task_id="daily_totals",
        job_graph=daily_totals_pipeline,
        flink_runtime_conn_id=CONN_ID,
        wait_for_completion=True,
        timeout=3600,
    )
