"""A continuous job run in windows: resume from the last savepoint, catch up, stop with a savepoint.

A continuous file source (`read_text(..., monitor_interval=...)`) keeps its job RUNNING
and counts the words of every file that lands in `<base>/events/`. This DAG does not
keep that job up forever: each run resumes it from the savepoint the previous run
took, lets it process what arrived meanwhile, and stops it again with a savepoint
(for a cluster that is shared, or shut down outside working hours, or to redeploy
the job with new code). Each file is read exactly once over all runs, and the word
totals carry on in the job's keyed state:

    prepare_input, last_savepoint -> resume_job -> wait_until_caught_up -> stop_with_savepoint
        -> remember_savepoint;  cancel_on_failure if the wait or the stop fails

- `last_savepoint` reads the Airflow Variable `flink_runtime_savepoint_resume` (None
  on the first run: start from scratch), and `resume_job` submits the pipeline with
  it as `from_savepoint`; the run's XCom shows which savepoint it resumed from.
  `remember_savepoint` sets the Variable to the location the stop returned.
- Why a Variable and not `xcom_pull(..., include_prior_dates=True)`: prior XComs are
  ordered by logical date, which manual runs do not have in Airflow 3, so a mix of
  manual and scheduled runs could resume from an older savepoint. The Variable is
  always the last savepoint taken, survives clearing runs, and an operator can set it
  by hand to rewind the job to any savepoint.
- `wait_until_caught_up` pokes the source's input splits until every file the job
  knows has been read; `stop_with_savepoint` (drain=False) then publishes the output,
  writes the savepoint and ends the job FINISHED.
- If a task fails after the job started, `cancel_on_failure` cancels it, so no
  orphaned job keeps running beside the next run's.
- `prepare_input` stands in for the producer: it adds one file of events per run.

Output: `<base>/savepoint_resume/word_counts` (Parquet, the running totals). `<base>`
as in daily_word_count: Variable `flink_runtime_data`, env FLINK_RUNTIME_DATA, or the
temp dir. Connection: `flink_runtime_default`.
"""

from __future__ import annotations

import datetime
import logging
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, BaseSensorOperator, PokeReturnValue, Variable, get_current_context, task

from flink_runtime.airflow.operators.flink_runtime import CancelJobOperator, StopJobOperator, SubmitJobOperator

CONN_ID = "flink_runtime_default"
DATA_VARIABLE = "flink_runtime_data"
SAVEPOINT_VARIABLE = "flink_runtime_savepoint_resume"
# How often the running job looks for new files.
MONITOR_INTERVAL_SECONDS = 1.0

log = logging.getLogger(__name__)


def data_dir() -> Path:
    base = Variable.get(DATA_VARIABLE, default=None) or os.environ.get("FLINK_RUNTIME_DATA")
    return Path(base or Path(tempfile.gettempdir()) / "flink-runtime-airflow") / "savepoint_resume"


def run_stamp(context: Any) -> str:
    """A name for the run's batch: its logical date, or for a manual run (none in Airflow 3)
    the time it was queued for."""
    moment = context.get("logical_date") or getattr(context.get("dag_run"), "run_after", None)
    return (moment or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%S")


@task
def prepare_input() -> dict[str, str]:
    """Deliver this run's batch of events (the demo writes 200 lines of words)."""
    from flink_runtime.demo import VOCABULARY

    stamp = run_stamp(get_current_context())
    base = data_dir()
    events = base / "events"
    events.mkdir(parents=True, exist_ok=True)
    target = events / f"events-{stamp}.txt"
    if not target.exists():
        rng = random.Random(stamp)
        lines = (" ".join(rng.choices(VOCABULARY[:20], k=8)) for _ in range(200))
        # Written under a name the source's glob does not match, then renamed: the
        # source must never see half a file.
        staging = events / f".{target.name}.staging"
        staging.write_text("\n".join(lines) + "\n")
        staging.rename(target)
    return {
        "events": str(events),
        "output": str(base / "word_counts"),
        "savepoints": str(base / "savepoints"),
    }


def continuous_word_count(context: Any, jinja_env: Any = None):
    """The job (built when the task runs; Airflow passes the context and its Jinja env)."""
    from flink_runtime.pipeline import Pipeline

    paths = context["ti"].xcom_pull(task_ids="prepare_input")
    pipeline = Pipeline("continuous word count", parallelism=2)
    (
        pipeline.read_text(f"{paths['events']}/*.txt", monitor_interval=MONITOR_INTERVAL_SECONDS)
        .select("explode(split(value, ' ')) AS word")
        .filter("word != ''")
        .key_by("word")
        .agg("count(*) AS count")
        # The running totals: each round rewrites them from the keyed state.
        .write_parquet(paths["output"], mode="overwrite")
    )
    return pipeline


class CaughtUpSensor(BaseSensorOperator):
    """Done when the job has read every file it found: a continuous source's input
    splits grow as files arrive, and all of them are completed. (A run that brought no
    new file is caught up once the job has looked for files a few times.)"""

    template_fields = ("job_id",)

    def __init__(self, *, job_id: str, flink_runtime_conn_id: str = CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.flink_runtime_conn_id = flink_runtime_conn_id

    def poke(self, context: Any) -> PokeReturnValue:
        import httpx

        from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook

        hook = FlinkRuntimeHook(flink_runtime_conn_id=self.flink_runtime_conn_id)
        job = hook.get_job(self.job_id)
        if job is None or job["state"] != "RUNNING":
            raise RuntimeError(f"job {self.job_id} is {job['state'] if job else 'unknown'}, expected RUNNING")
        total = completed = 0
        for vertex in job["vertices"]:
            # The vertex view (GET /jobs/:id/vertices/:vid) has the splits of source vertices.
            answer = httpx.get(f"{hook.rest_url}/jobs/{self.job_id}/vertices/{vertex['id']}", timeout=30)
            answer.raise_for_status()
            splits = answer.json().get("input-splits") or {}
            total += splits.get("total", 0)
            completed += splits.get("completed", 0)
        running_for = job.get("duration", 0) / 1000
        self.log.info("Job %s: %d of %d input splits read (running %.0f s)", self.job_id, completed, total, running_for)
        caught_up = completed == total and (total > 0 or running_for > 3 * MONITOR_INTERVAL_SECONDS)
        return PokeReturnValue(is_done=caught_up, xcom_value={"splits": total, "completed": completed})


@task
def last_savepoint() -> str | None:
    """Where the previous run stopped the job; None the first time."""
    return Variable.get(SAVEPOINT_VARIABLE, default=None)


@task
def remember_savepoint(location: str) -> str:
    """The next run resumes from here."""
    Variable.set(SAVEPOINT_VARIABLE, location, description="Last savepoint of DAG savepoint_resume")
    return location


with DAG(
    dag_id="savepoint_resume",
    description="Resume a continuous job from the last savepoint, catch up, stop it with a savepoint",
    schedule="@hourly",
    start_date=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    # Two runs at once would start two jobs from the same savepoint.
    max_active_runs=1,
    tags=["flink-runtime", "example", "savepoints"],
    doc_md=__doc__,
):
    paths = prepare_input()
    job = SubmitJobOperator(
        task_id="resume_job",
        job_graph=continuous_word_count,
        flink_runtime_conn_id=CONN_ID,
        # None (no savepoint yet) starts the job from scratch.
        from_savepoint=last_savepoint(),
        wait_for_completion=False,
    )
    # XCom key job_id: the job's id (the return value is a dict with its state and outputs).
    job_id = job.output["job_id"]
    caught_up = CaughtUpSensor(
        task_id="wait_until_caught_up", job_id=job_id, poke_interval=1, timeout=1800, mode="poke"
    )
    stop = StopJobOperator(
        task_id="stop_with_savepoint",
        job_id=job_id,
        target_directory="{{ ti.xcom_pull(task_ids='prepare_input')['savepoints'] }}",
        flink_runtime_conn_id=CONN_ID,
        drain=False,
    )
    cancel = CancelJobOperator(
        task_id="cancel_on_failure",
        job_id=job_id,
        flink_runtime_conn_id=CONN_ID,
        trigger_rule="one_failed",
    )
    paths >> job >> caught_up >> stop >> remember_savepoint(stop.output)
    [caught_up, stop] >> cancel
