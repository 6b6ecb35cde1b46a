"""Daily word count over date-partitioned text, on a flink-runtime cluster.

Every day's input lands in `<base>/input/<YYYY-MM-DD>/*.txt`; the run for that day
counts its words with a PySpark pipeline on the cluster and writes Parquet to
`<base>/output/<YYYY-MM-DD>` (replacing an earlier run's output, so reruns and
backfills are idempotent):

    prepare_input -> word_count (SubmitJobOperator) -> report_top_words

- `<base>` is the Airflow Variable `flink_runtime_data`, else the environment
  variable FLINK_RUNTIME_DATA, else `flink-runtime-airflow` under the temp dir. Every
  process that touches the files (Airflow workers, the JobManager, the TaskManagers)
  must see the same path: docker/docker-compose.yaml mounts one volume at /data.
- `prepare_input` stands in for whatever delivers the day's files: for the demo it
  generates a small deterministic corpus when the day's folder is missing.
- `word_count` builds the pipeline when the task runs (`job_graph` is a callable of
  the task context), so the paths are the run's own. The pipeline:
  read_text -> explode(split(lower)) -> filter -> key_by(word).agg(count) -> write_parquet.
- `word_count` emits an Airflow Asset event for its output (`file://<base>/output/<day>`)
  through the AssetAlias `daily_word_counts`, with the job id and the records written as
  the event's extra: a DAG with `schedule=[AssetAlias("daily_word_counts")]` (or one
  day's `Asset`) runs when a day's counts are written. Its XCom is
  `{"job_id", "state", "job_url", "outputs": [{"path", "format", "uri", "records", "bytes"}]}`,
  and with the openlineage provider configured the task's lineage events name the
  day's input folder and output.
- The day is the run's `ds`: the day the run's data interval covers (the schedule
  starts it once that day is over). A run triggered by hand has no logical date in
  Airflow 3, so `{{ ds }}` is undefined there; `run_day` falls back to the data
  interval, then to the day the run was queued for (`run_after`).

Connection: `flink_runtime_default` (type flink_runtime); e.g.
AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT='{"conn_type": "flink_runtime", "host": "jobmanager", "port": 8081}'
or '{"conn_type": "flink_runtime", "extra": {"embedded": true}}' for a local MiniCluster.
"""

from __future__ import annotations

import datetime
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, AssetAlias, CronDataIntervalTimetable, Variable, get_current_context, task

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator

CONN_ID = "flink_runtime_default"
DATA_VARIABLE = "flink_runtime_data"
TOP_WORDS = 10

log = logging.getLogger(__name__)


def data_dir() -> Path:
    """The shared data directory (call it in tasks only: a Variable read at parse time
    would hit the metadata database on every parse of this file)."""
    base = Variable.get(DATA_VARIABLE, default=None) or os.environ.get("FLINK_RUNTIME_DATA")
    return Path(base or Path(tempfile.gettempdir()) / "flink-runtime-airflow")


def run_day(context: Any) -> str:
    """`ds` of the run (YYYY-MM-DD), also for manual runs, which have no logical date."""
    for key in ("logical_date", "data_interval_start"):
        if context.get(key) is not None:
            return context[key].strftime("%Y-%m-%d")
    run_after = getattr(context.get("dag_run"), "run_after", None)
    return (run_after or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%d")


@task
def prepare_input() -> dict[str, str]:
    """Make sure the day's input exists (the demo generates it) and name the run's paths."""
    day = run_day(get_current_context())
    base = data_dir()
    input_dir = base / "input" / day
    if not any(input_dir.glob("*.txt")):
        from flink_runtime.demo import generate_corpus

        # Generated next to the folder and renamed into place: a reader never sees half a day.
        staging = base / "input" / f".{day}.staging"
        generate_corpus(staging, files=4, lines_per_file=500, seed=int(day.replace("-", "")))
        staging.rename(input_dir)
        log.info("generated a demo corpus in %s", input_dir)
    return {"day": day, "input": str(input_dir), "output": str(base / "output" / day)}


def word_count_pipeline(context: Any, jinja_env: Any = None):
    """The job, built at run time from the paths prepare_input chose.

    Airflow calls a callable in a templated field with `context` and `jinja_env` when it
    renders the task's templates, so the function takes both."""
    from flink_runtime.pipeline import Pipeline

    paths = context["ti"].xcom_pull(task_ids="prepare_input")
    pipeline = Pipeline(f"daily word count {paths['day']}", parallelism=2)
    (
        pipeline.read_text(f"{paths['input']}/*.txt")
        .select(r"explode(split(lower(value), '\\s+')) AS word")
        .filter("word != ''")
        .key_by("word")
        .agg("count(*) AS count")
        .write_parquet(paths["output"], mode="overwrite")
    )
    return pipeline


@task
def report_top_words(paths: dict[str, str]) -> list[list[Any]]:
    """Log the day's most frequent words, read from the job's Parquet output."""
    import pyarrow.parquet as pq

    table = pq.read_table(paths["output"]).sort_by([("count", "descending"), ("word", "ascending")])
    top = [[row["word"], row["count"]] for row in table.slice(0, TOP_WORDS).to_pylist()]
    log.info("%s: %d distinct words; top %d: %s", paths["day"], table.num_rows, len(top), top)
    return top


with DAG(
    dag_id="daily_word_count",
    description="Count each day's words on a flink-runtime cluster",
    # A data-interval schedule: the run for day D starts when D is over (D+1 00:00 UTC),
    # with ds = D. Airflow 3 reads a bare "@daily" as a CronTriggerTimetable (unless
    # [scheduler] create_cron_data_intervals is on), whose run at the start of D has
    # ds = D: it would count a day whose files are still arriving.
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    max_active_runs=4,
    tags=["flink-runtime", "example"],
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": datetime.timedelta(minutes=1)},
):
    paths = prepare_input()
    count = SubmitJobOperator(
        task_id="word_count",
        job_graph=word_count_pipeline,
        flink_runtime_conn_id=CONN_ID,
        wait_for_completion=True,
        timeout=3600,
        # The output's path is the run's own: an alias gets one Asset event per output.
        outlets=[AssetAlias("daily_word_counts")],
    )
    paths >> count >> report_top_words(paths)
