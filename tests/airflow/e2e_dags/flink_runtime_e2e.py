"""DAGs that tests/airflow/test_real_airflow.py runs under a real Airflow deployment.

Each run's job is named after the run (``e2e <dag> <run id>``), so a test can count
the jobs a run submitted. A run's conf picks the job: ``{"invokable": "fail"}`` makes
it fail, ``{"seconds": n}`` sets how long it sleeps (or runs before it fails), and
``{"until_released": true}`` makes it run until the test releases it instead
(tests/helpers/released.py: the file ``released/<run id>`` in FLINK_RUNTIME_E2E_DIR).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, AssetAlias, task

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator
from flink_runtime.airflow.sensors.flink_runtime import JobStatusSensor
from flink_runtime.pipeline import Pipeline

CONN_ID = "flink_runtime_e2e"
START = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
# Imported by the cluster's TaskManagers (the test session's MiniCluster), not by Airflow's
# processes, which need not see the tests package.
UNTIL_RELEASED = "tests.helpers.released:UntilReleased"


def job_of_the_run(context: Any, jinja_env: Any = None) -> dict[str, Any]:
    """A templated field's callable: Airflow calls it with the context when it renders."""
    conf = context["dag_run"].conf or {}
    invokable = conf.get("invokable", "sleep")
    name = f"e2e {context['dag'].dag_id} {context['run_id']}"
    if conf.get("until_released"):
        marker = Path(os.environ["FLINK_RUNTIME_E2E_DIR"]) / "released" / context["run_id"]
        config: dict[str, Any] = {"release": str(marker), "fail": "e2e failure" if invokable == "fail" else None}
        vertex = {"id": "v", "name": invokable.title(), "invokable": UNTIL_RELEASED, "config": config}
        return {"name": name, "vertices": [vertex]}
    if invokable == "sleep":
        config = {"seconds": float(conf.get("seconds", 2))}
    else:  # fails after conf["seconds"] (default at once)
        config = {"message": "e2e failure", "after_seconds": float(conf.get("seconds", 0))}
    return {
        "name": name,
        "vertices": [{"id": "v", "name": invokable.title(), "invokable": invokable, "config": config}],
    }


class PidRecordingSubmitJobOperator(SubmitJobOperator):
    """Writes the task process's pid (per try) where the test can find it and kill -9 it."""

    def execute(self, context: Any) -> Any:
        ti = context["ti"]
        pid_file = Path(os.environ["FLINK_RUNTIME_E2E_DIR"]) / f"{ti.dag_id}.{ti.task_id}.{ti.try_number}.pid"
        pid_file.write_text(str(os.getpid()))
        return super().execute(context)


with DAG("e2e_sensor", schedule=None, start_date=START, catchup=False):
    submit = SubmitJobOperator(
        task_id="submit", job_graph=job_of_the_run, wait_for_completion=False, flink_runtime_conn_id=CONN_ID
    )
    wait = JobStatusSensor(task_id="wait", job_id=submit.output, deferrable=True, flink_runtime_conn_id=CONN_ID)

    @task
    def downstream(state: Any) -> str:
        """What a downstream task gets from the sensor's XCom, as the test can read it."""
        return repr(state)

    downstream(wait.output)

with DAG("e2e_sensor_on_worker", schedule=None, start_date=START, catchup=False):
    # The same wait, handed back to a worker after the trigger fired (end_from_trigger=False).
    submit = SubmitJobOperator(
        task_id="submit", job_graph=job_of_the_run, wait_for_completion=False, flink_runtime_conn_id=CONN_ID
    )
    JobStatusSensor(
        task_id="wait", job_id=submit.output, deferrable=True, end_from_trigger=False, flink_runtime_conn_id=CONN_ID
    )

with DAG("e2e_retry", schedule=None, start_date=START, catchup=False):
    PidRecordingSubmitJobOperator(
        task_id="submit",
        job_graph=job_of_the_run,
        flink_runtime_conn_id=CONN_ID,
        poll_timeout=1,
        retries=1,
        retry_delay=datetime.timedelta(seconds=1),
    )

with DAG("e2e_deferred_submit", schedule=None, start_date=START, catchup=False):
    SubmitJobOperator(task_id="submit", job_graph=job_of_the_run, deferrable=True, flink_runtime_conn_id=CONN_ID)


def orders_to_json(context: Any, jinja_env: Any = None) -> Pipeline:
    """Copy the CSV orders under the run's conf["data"]/in to JSON under .../out (Spark)."""
    data = context["dag_run"].conf["data"]
    pipeline = Pipeline(f"e2e lineage {context['run_id']}", parallelism=1)
    orders = pipeline.read_csv(f"{data}/in/*.csv", schema="region STRING, amount DOUBLE")
    orders.filter("amount > 0").write_json(f"{data}/out", mode="overwrite")
    return pipeline


with DAG("e2e_lineage", schedule=None, start_date=START, catchup=False):
    SubmitJobOperator(
        task_id="submit",
        job_graph=orders_to_json,
        flink_runtime_conn_id=CONN_ID,
        outlets=[AssetAlias("e2e-outputs")],
    )
