"""Submit a long job and wait for it in the triggerer, not in a worker slot.

`SubmitJobOperator(wait_for_completion=False)` returns as soon as the JobManager has
accepted the job (its id goes to XCom key `job_id`, which `submit.output["job_id"]`
reads; the return value is a dict with the job's state and outputs), and `JobStatusSensor(deferrable=True)` hands
the wait to Airflow's triggerer: no worker slot is held for the hours a big job may
run, the trigger follows the job's JobStatusChanged events (a long poll, so the
sensor completes within about a second of the job ending, where a poking sensor
would notice at its next poke), and the sensor fails if the job ends FAILED or
CANCELED:

    prepare_corpus -> submit_job -> wait_for_job (deferred) -> report

The job computes the distribution of word lengths over a text corpus under
`<base>/long_job/input/` (generated for the demo; the `files` and `lines` params set
its size) and writes Parquet to `<base>/long_job/word_lengths`. `<base>` as in
daily_word_count: the Variable `flink_runtime_data`, env FLINK_RUNTIME_DATA, or the
temp dir. Connection: `flink_runtime_default`.

Deferral needs a running triggerer (`airflow triggerer`; `airflow standalone` starts
one). A trigger's class must be importable by the triggerer: it is, from the
installed flink-runtime package.
"""

from __future__ import annotations

import datetime
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, Variable, get_current_context, task

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator
from flink_runtime.airflow.sensors.flink_runtime import JobStatusSensor

CONN_ID = "flink_runtime_default"
DATA_VARIABLE = "flink_runtime_data"

log = logging.getLogger(__name__)


def data_dir() -> Path:
    base = Variable.get(DATA_VARIABLE, default=None) or os.environ.get("FLINK_RUNTIME_DATA")
    return Path(base or Path(tempfile.gettempdir()) / "flink-runtime-airflow") / "long_job"


@task
def prepare_corpus() -> dict[str, str]:
    """The demo's corpus, generated once per size."""
    params = get_current_context()["params"]
    files, lines = int(params["files"]), int(params["lines"])
    base = data_dir()
    input_dir = base / "input" / f"{files}x{lines}"
    if not any(input_dir.glob("*.txt")):
        from flink_runtime.demo import generate_corpus

        staging = input_dir.with_name(f".{input_dir.name}.staging")
        generate_corpus(staging, files=files, lines_per_file=lines, seed=7)
        staging.rename(input_dir)
    return {"input": str(input_dir), "output": str(base / "word_lengths")}


def word_lengths(context: Any, jinja_env: Any = None):
    """The job (built when the task runs; Airflow passes the context and its Jinja env)."""
    from flink_runtime.pipeline import Pipeline

    paths = context["ti"].xcom_pull(task_ids="prepare_corpus")
    pipeline = Pipeline("word length distribution", parallelism=2)
    (
        pipeline.read_text(f"{paths['input']}/*.txt", split_size="1m")
        .select(r"explode(split(lower(value), '\\s+')) AS word")
        .filter("word != ''")
        .select("length(word) AS length")
        .key_by("length")
        .agg("count(*) AS words")
        .write_parquet(paths["output"], mode="overwrite")
    )
    return pipeline


@task
def report(paths: dict[str, str]) -> list[list[int]]:
    """[[length, words], ...] by length."""
    import pyarrow.parquet as pq

    rows = pq.read_table(paths["output"]).sort_by("length").to_pylist()
    distribution = [[row["length"], row["words"]] for row in rows]
    log.info("words by length: %s", ", ".join(f"{length}: {words}" for length, words in distribution))
    return distribution


with DAG(
    dag_id="long_job_deferrable",
    description="Submit a long flink-runtime job; a deferrable sensor waits for it in the triggerer",
    schedule="@daily",
    start_date=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    tags=["flink-runtime", "example", "deferrable"],
    doc_md=__doc__,
    params={
        "files": Param(40, type="integer", minimum=1, description="files in the generated corpus"),
        "lines": Param(2000, type="integer", minimum=1, description="lines per file"),
    },
):
    paths = prepare_corpus()
    submit = SubmitJobOperator(
        task_id="submit_job",
        job_graph=word_lengths,
        flink_runtime_conn_id=CONN_ID,
        wait_for_completion=False,
    )
    wait = JobStatusSensor(
        task_id="wait_for_job",
        job_id=submit.output["job_id"],
        target_status="FINISHED",
        flink_runtime_conn_id=CONN_ID,
        deferrable=True,
        timeout=6 * 3600,
    )
    paths >> submit >> wait >> report(paths)
