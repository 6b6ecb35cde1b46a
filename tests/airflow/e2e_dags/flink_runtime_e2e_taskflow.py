"""TaskFlow DAGs that tests/airflow/test_real_airflow.py runs under a real Airflow.

``e2e_taskflow``: an upstream ``@task`` writes a text file and returns its folder; two
``@task.flink_runtime`` tasks (one waiting on a worker, one deferred to the triggerer)
take that folder (an XComArg) and ``day="{{ ds }}"`` (a template), and their jobs count
the folder's words into ``<folder>/<task>/day=<day>``. Each call of a decorated function
appends a line to ``<folder>/calls-<task>.log``, so the test can count the calls.
The deferred task's job holds its data until the test writes ``<folder>/released``
(tests/helpers/released.py): the test lets it end only once Airflow's scheduler has
handled the task's deferral (see AirflowDeployment.wait_for_deferral).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from airflow.sdk import DAG, task

from flink_runtime.pipeline import Pipeline

CONN_ID = "flink_runtime_e2e"
START = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def count_words(directory: str, day: str, task_id: str) -> Pipeline:
    with open(Path(directory) / f"calls-{task_id}.log", "a") as calls:
        calls.write(f"{directory} {day} pid={os.getpid()}\n")
    pipeline = Pipeline(f"e2e taskflow {task_id} {day}", parallelism=1)
    lines = pipeline.read_text(f"{directory}/*.txt")
    if task_id == "deferred":
        # Imported by the cluster's TaskManagers (the test session's MiniCluster), not by Airflow.
        lines = lines.transform("tests.helpers.released:held_until_released")
    words = lines.select("explode(split(value, ' ')) AS word")
    words.key_by("word").agg("count(*) AS n").write_json(f"{directory}/{task_id}/day={day}", mode="overwrite")
    return pipeline


with DAG("e2e_taskflow", schedule=None, start_date=START, catchup=False):

    @task
    def landed_file(run_id: str | None = None) -> str:
        """Upstream: a file lands, its folder is the task's XCom."""
        folder = Path(os.environ["FLINK_RUNTIME_E2E_DIR"]) / "taskflow" / str(run_id).replace(":", "_")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "words.txt").write_text("a b a\nc\n")
        return str(folder)

    @task.flink_runtime(flink_runtime_conn_id=CONN_ID)
    def on_worker(directory: str, day: str) -> Pipeline:
        return count_words(directory, day, "on_worker")

    @task.flink_runtime(flink_runtime_conn_id=CONN_ID, deferrable=True)
    def deferred(directory: str, day: str) -> Pipeline:
        return count_words(directory, day, "deferred")

    folder = landed_file()
    on_worker(folder, day="{{ ds }}")
    deferred(folder, day="{{ ds }}")
