"""`make demo`: the daily word count DAG, run by Airflow on the embedded cluster.

Airflow runs dags/daily_word_count.py with `dag.test()` on its default SQLite
metadata database, in a private AIRFLOW_HOME; the connection `flink_runtime_default`
asks for the embedded cluster, so the hook starts a detached MiniCluster process (a
JobManager and two TaskManagers sharing a SparkSession) and the job runs there as a
PySpark pipeline. The demo prints the job's URL, the top words and where the output
is, checks the counts against plain Python, and stops the cluster.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    home = Path(tempfile.gettempdir()) / "flink-runtime-demo-airflow"
    data = home / "data"
    state_dir = home / "embedded-cluster"
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # The demo prints what matters itself; Airflow's own INFO lines would bury it.
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(
                [
                    {
                        "name": "flink-runtime-examples",
                        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                        "kwargs": {"path": str(REPO / "dags")},
                    }
                ]
            ),
            "FLINK_RUNTIME_DATA": str(data),
            "AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT": json.dumps(
                {"conn_type": "flink_runtime", "extra": {"embedded": True, "state_dir": str(state_dir)}}
            ),
        }
    )
    home.mkdir(parents=True, exist_ok=True)
    import pyarrow.parquet as pq
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db

    from flink_runtime.airflow.embedded import stop_embedded_cluster
    from flink_runtime.demo import check_counts

    print(f"Airflow home {home} (SQLite); initialising the metadata database...")
    db.initdb()
    dag = DagBag(dag_folder=str(REPO / "dags"), bundle_path=REPO / "dags").get_dag("daily_word_count")
    day = datetime.datetime.now(datetime.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    print(f"Running DAG daily_word_count for {day.date()} on the embedded cluster (starts Spark)...")
    try:
        dag_run = dag.test(logical_date=day)
    finally:
        stopped = stop_embedded_cluster(str(state_dir))
    print(f"DAG run {dag_run.run_id}: {dag_run.state}; embedded cluster stopped: {stopped}")
    if str(dag_run.state) != "success":
        return 1
    output = data / "output" / str(day.date())
    table = pq.read_table(output)
    counts = dict(zip(table.column("word").to_pylist(), table.column("count").to_pylist(), strict=True))
    return check_counts(counts, data / "input" / str(day.date()), output)


if __name__ == "__main__":
    sys.exit(main())
