"""The provider under a real Airflow: scheduler, triggerer, dag-processor and api-server
as separate processes (LocalExecutor, SQLite), driven through Airflow's REST API.

The DAGs are tests/airflow/e2e_dags/flink_runtime_e2e.py; their jobs run on the
session's MiniCluster, reached over REST from Airflow's task and trigger processes.
Most runs are triggered at once when the deployment is up (a run takes seconds, the
deployment's start half a minute), and each test then follows its own run. A job that
must still run when something happens (a sensor defers, a retry re-attaches) runs until
the test releases it (tests/helpers/released.py), not for a duration long enough for a
loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from flink_runtime.minicluster import MiniCluster
from tests.helpers.airflow_deployment import AirflowDeployment
from tests.helpers.postgres import PostgresServer
from tests.helpers.released import release
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration

E2E_DAGS = Path(__file__).parent / "e2e_dags"
PLUGINS_FOLDER = Path(__file__).resolve().parents[2] / "plugins"
CONN_ID = "flink_runtime_e2e"


class Runs(dict[str, str]):
    """The run id of each scenario, triggered together."""


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-airflow")


@pytest.fixture(scope="module")
def airflow(minicluster: MiniCluster, postgres: PostgresServer, work_dir: Path) -> Iterator[AirflowDeployment]:
    host, port = minicluster.rest_url.removeprefix("http://").rsplit(":", 1)
    connection = {"conn_type": "flink_runtime", "host": host, "port": int(port)}
    # The provider's plugin, as a deployment installs it: the job link's redirect is its route.
    env = {"FLINK_RUNTIME_E2E_DIR": str(work_dir), "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER)}
    with AirflowDeployment(work_dir / "home", E2E_DAGS, postgres, {CONN_ID: connection}, env=env) as deployment:
        for dag_id in ("e2e_sensor", "e2e_retry", "e2e_deferred_submit", "e2e_lineage"):
            deployment.wait_for_dag(dag_id)
        yield deployment


@pytest.fixture(scope="module")
def orders(work_dir: Path) -> Path:
    data = work_dir / "orders"
    (data / "in").mkdir(parents=True)
    (data / "in" / "orders.csv").write_text("region,amount\neu,10\nus,5\neu,-1\neu,2.5\n")
    return data


@pytest.fixture(scope="module")
def runs(airflow: AirflowDeployment, work_dir: Path) -> Iterator[Runs]:
    triggered = Runs(
        sensor_success=airflow.trigger("e2e_sensor", {"until_released": True}),
        sensor_failure=airflow.trigger("e2e_sensor", {"invokable": "fail"}),
        marked_failed=airflow.trigger("e2e_deferred_submit", {"seconds": 120}),
    )
    yield triggered
    # A job its test did not release (deselected, or failed first) must not hold a slot
    # of the session's MiniCluster until released.MAX_WAIT.
    release(work_dir / "released" / triggered["sensor_success"])


@pytest.fixture(scope="module")
def cluster(minicluster: MiniCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=minicluster.rest_url, timeout=30) as client:
        yield client


def jobs_named(cluster: httpx.Client, name: str) -> list[dict]:
    return [job for job in cluster.get("/jobs/overview").json()["jobs"] if job["name"] == name]


def release_after_deferral(airflow: AirflowDeployment, work_dir: Path, dag_id: str, run_id: str) -> None:
    """Let the run's job (``until_released``) end once its ``wait`` sensor has deferred and
    the scheduler has handled that (AirflowDeployment.wait_for_deferral says why)."""
    airflow.wait_for_task(dag_id, run_id, "wait", ["deferred"], timeout=120)
    airflow.wait_for_deferral(dag_id, run_id, "wait")
    release(work_dir / "released" / run_id)


def _utc_seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_task_flink_runtime_gets_rendered_arguments_and_runs_its_function_once_per_try(
    airflow: AirflowDeployment, cluster: httpx.Client
) -> None:
    """An upstream task's output (an XComArg) and ``day="{{ ds }}"`` reach the decorated
    function rendered, on a worker and across a deferral, and it is called once."""
    airflow.wait_for_dag("e2e_taskflow")
    run_id = airflow.trigger("e2e_taskflow", logical_date="2024-03-05T00:00:00Z")
    # The deferred task's job holds its data until the scheduler has handled the deferral.
    airflow.wait_for_deferral("e2e_taskflow", run_id, "deferred")
    release(Path(airflow.xcom("e2e_taskflow", run_id, "landed_file")) / "released")
    for task_id in ("on_worker", "deferred"):
        ti = airflow.wait_for_task("e2e_taskflow", run_id, task_id, ["success"], timeout=180)
        assert ti["try_number"] == 1
        folder = Path(airflow.xcom("e2e_taskflow", run_id, "landed_file"))
        # Called once, with the upstream folder and the rendered date (not "XComArg(...)"
        # nor "{{ ds }}"): a second call would add a line, the deferral's resumption too.
        calls = (folder / f"calls-{task_id}.log").read_text().splitlines()
        assert [line.split(" pid=")[0] for line in calls] == [f"{folder} 2024-03-05"], calls
        result = airflow.xcom("e2e_taskflow", run_id, task_id)
        result = json.loads(result) if isinstance(result, str) else result
        assert result["state"] == "FINISHED"
        # The job read the upstream folder and wrote where the templated day said: 3 words.
        out = f"{folder}/{task_id}/day=2024-03-05"
        assert [(o["path"], o["records"]) for o in result["outputs"]] == [(out, 3)]
        counts = {}
        for part in Path(out).glob("*.json"):
            for line in part.read_text().splitlines():
                row = json.loads(line)
                counts[row["word"]] = row["n"]
        assert counts == {"a": 2, "b": 1, "c": 1}
        assert cluster.get(f"/jobs/{result['job_id']}").json()["name"] == f"e2e taskflow {task_id} 2024-03-05"


def test_the_job_link_opens_the_jobs_dashboard_page_through_the_plugin(
    airflow: AirflowDeployment, minicluster: MiniCluster
) -> None:
    """The "Flink Runtime Job" button, as the UI reads it from Airflow's API: the plugin's
    route, which redirects to the job's page on the cluster's dashboard (not raw JSON)."""
    airflow.wait_for_dag("e2e_taskflow")
    run_id = airflow.trigger("e2e_taskflow", logical_date="2024-03-06T00:00:00Z")
    airflow.wait_for_task("e2e_taskflow", run_id, "on_worker", ["success"], timeout=180)
    # This run's deferred task is not followed: its job need not wait for a release.
    release(Path(airflow.xcom("e2e_taskflow", run_id, "landed_file")) / "released")
    job_id = airflow.xcom("e2e_taskflow", run_id, "on_worker", key="job_id")
    links = airflow._json("GET", f"/dags/e2e_taskflow/dagRuns/{run_id}/taskInstances/on_worker/links")
    link = links["extra_links"]["Flink Runtime Job"]
    assert link == f"/flink-runtime/jobs/{job_id}?conn_id={CONN_ID}"
    answer = httpx.get(f"{airflow.base_url}{link}", follow_redirects=False, timeout=30)
    assert answer.status_code == 302, answer.text
    assert answer.headers["location"] == f"{minicluster.rest_url}/#/jobs/{job_id}"
    page = httpx.get(answer.headers["location"], timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")  # the dashboard


def test_a_deferred_sensor_is_ended_by_the_triggerer_without_a_worker(
    airflow: AirflowDeployment, runs: Runs, cluster: httpx.Client, work_dir: Path
) -> None:
    run_id = runs["sensor_success"]
    release_after_deferral(airflow, work_dir, "e2e_sensor", run_id)
    ti = airflow.wait_for_task("e2e_sensor", run_id, "wait", ["success"], timeout=120)
    # The state the triggerer pushed, as a downstream task pulls it.
    airflow.wait_for_task("e2e_sensor", run_id, "downstream", ["success"], timeout=60)
    assert airflow.xcom("e2e_sensor", run_id, "downstream") == repr("FINISHED")
    log = airflow.task_log("e2e_sensor", run_id, "wait", ti)
    assert "the task succeeds (ended by the triggerer)" in log
    # Deferred once and never handed back: a worker started the task exactly once.
    assert log.count("Worker startup parse complete") == 1, log
    # The trigger asked for no XCom that does not exist (the triggerer logged an ERROR then).
    triggerer_output = (airflow.home / "triggerer.out").read_text(errors="replace")
    assert "XCom not found" not in triggerer_output, triggerer_output[-3000:]
    job_id = airflow.xcom("e2e_sensor", run_id, "submit", key="job_id")
    job = cluster.get(f"/jobs/{job_id}").json()
    assert job["state"] == "FINISHED"
    latency = _utc_seconds(ti["end_date"]) - job["end-time"] / 1000
    print(f"job FINISHED -> sensor task success: {latency:.3f} s")
    assert latency >= -0.05  # the task cannot end before the job did (clocks are the same host's)


def test_a_failed_job_fails_the_deferred_sensor_from_the_triggerer_with_the_root_exception(
    airflow: AirflowDeployment, runs: Runs
) -> None:
    run_id = runs["sensor_failure"]
    ti = airflow.wait_for_task("e2e_sensor", run_id, "wait", ["failed"], timeout=120)
    log = airflow.task_log("e2e_sensor", run_id, "wait", ti)
    assert "Root exception of job" in log
    assert "RuntimeError: e2e failure" in log
    assert log.count("Worker startup parse complete") == 1, log


def test_a_task_killed_with_sigkill_is_retried_onto_the_same_job(
    airflow: AirflowDeployment, cluster: httpx.Client, work_dir: Path
) -> None:
    # Triggered here, not with the others: the kill must come while try 1 still waits.
    run_id = airflow.trigger("e2e_retry", {"until_released": True})
    name = f"e2e e2e_retry {run_id}"
    pid_file = work_dir / "e2e_retry.submit.1.pid"
    eventually(lambda: pid_file.exists() and jobs_named(cluster, name), 90, "try 1 to submit its job")
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    # The job ends once try 2 has re-attached to it (a retry attaches to a running job only).
    # Which path re-attaches depends on where the kill fell: after try 1 stored the job's
    # id in the task state store, Airflow's ResumableJobMixin reconnects ("Reconnecting to
    # existing job"); before, the operator finds it by the deterministic id try 1 submitted
    # it under ("Re-attaching to job"). The assertions below hold for both.
    deadline = time.monotonic() + 120
    while not any(
        line in airflow.task_log("e2e_retry", run_id, "submit")
        for line in ("Re-attaching to job", "Reconnecting to existing job")
    ):
        assert time.monotonic() < deadline, "try 2 did not re-attach to the job within 120 s"
        time.sleep(0.5)  # the log comes through the api-server: a busy poll would load it
    release(work_dir / "released" / run_id)

    ti = airflow.wait_for_task("e2e_retry", run_id, "submit", ["success"], timeout=120)
    assert ti["try_number"] == 2
    jobs = jobs_named(cluster, name)
    assert len(jobs) == 1, jobs  # the retry re-attached instead of submitting again
    assert jobs[0]["state"] == "FINISHED"
    assert airflow.xcom("e2e_retry", run_id, "submit", key="job_id") == jobs[0]["jid"]


def test_marking_a_deferred_submit_failed_cancels_its_job_within_seconds(
    airflow: AirflowDeployment, runs: Runs, cluster: httpx.Client
) -> None:
    run_id = runs["marked_failed"]
    airflow.wait_for_task("e2e_deferred_submit", run_id, "submit", ["deferred"], timeout=120)
    [job] = jobs_named(cluster, f"e2e e2e_deferred_submit {run_id}")
    assert job["state"] == "RUNNING"
    # Only a trigger the triggerer runs is cancelled when its task is marked failed; a fresh
    # triggerer can take tens of seconds to pick a new one up (run alone, this test met that).
    eventually(
        lambda: f"Job {job['jid']}: CREATED -> RUNNING" in airflow.task_log("e2e_deferred_submit", run_id, "submit"),
        120,
        "the triggerer to run the submit's trigger",
    )

    marked = time.monotonic()
    airflow.mark_task("e2e_deferred_submit", run_id, "submit", "failed")
    eventually(lambda: cluster.get(f"/jobs/{job['jid']}").json()["state"] == "CANCELED", 30, "the job to be CANCELED")
    elapsed = time.monotonic() - marked
    print(f"task marked failed -> job CANCELED: {elapsed:.2f} s")
    assert elapsed < 15
    assert airflow.task_instance("e2e_deferred_submit", run_id, "submit")["state"] == "failed"


@pytest.fixture(scope="module")
def openlineage(airflow: AirflowDeployment, work_dir: Path) -> Path:
    """The OpenLineage provider turned on as a deployment would: its transport configured
    and the components that run tasks, parse DAGs and run triggers restarted (its
    listener then writes every task's events to this file). The tests using it come last."""
    events = work_dir / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    env = {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "flink-runtime-e2e",
    }
    airflow.restart(["scheduler", "dag-processor", "triggerer"], env=env)
    return events


def lineage_events(path: Path, job_name: str) -> dict[str, list[dict]]:
    """The OpenLineage events of one Airflow task, by OpenLineage run (a task try's run id)."""
    runs: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        if event["job"]["name"] == job_name:
            runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def test_lineage_reaches_openlineage_and_the_outputs_are_asset_events(
    airflow: AirflowDeployment, orders: Path, work_dir: Path, openlineage: Path
) -> None:
    run_id = airflow.trigger("e2e_lineage", {"data": str(orders)})
    airflow.wait_for_task("e2e_lineage", run_id, "submit", ["success"], timeout=180)
    result = airflow.xcom("e2e_lineage", run_id, "submit")
    result = json.loads(result) if isinstance(result, str) else result
    assert result["state"] == "FINISHED"
    assert [(o["uri"], o["format"], o["records"]) for o in result["outputs"]] == [
        (f"file://{orders}/out", "json", 3)  # the negative amount is filtered out
    ]

    # OpenLineage: START and COMPLETE of the task, with what the job read and wrote.
    events_file = work_dir / "openlineage.jsonl"

    def task_completed() -> bool:
        # The task's own COMPLETE: the DAG run's (job "e2e_lineage") can be written first,
        # as the worker sends the task's from a fork of its own (a loaded run failed so).
        for line in events_file.read_text().splitlines() if events_file.exists() else []:
            try:
                event = json.loads(line)
            except ValueError:  # a line being written
                continue
            if event["job"]["name"] == "e2e_lineage.submit" and event["eventType"] == "COMPLETE":
                return True
        return False

    eventually(task_completed, 30, "the task's COMPLETE event")
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    ours = [e for e in events if e["job"]["name"] == "e2e_lineage.submit" and e["eventType"] in ("START", "COMPLETE")]
    assert sorted(e["eventType"] for e in ours) == ["COMPLETE", "START"]
    complete = next(e for e in ours if e["eventType"] == "COMPLETE")
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [("file", f"{orders}/in")]
    [output] = complete["outputs"]
    assert (output["namespace"], output["name"]) == ("file", f"{orders}/out")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3

    # Data-aware scheduling: the alias received the sink's Asset event.
    response = airflow.client.get("/assets/events", params={"source_dag_id": "e2e_lineage", "source_run_id": run_id})
    assert response.status_code == 200, response.text
    uris = [event["uri"] for event in response.json()["asset_events"]]
    assert uris == [f"file://{orders}/out"]


def triggerer_logged(airflow: AirflowDeployment, text: str, run_id: str) -> bool:
    """Whether the triggerer wrote `text` for `run_id` in its own log. Airflow 3.3's
    triggerer reads a trigger's log lines and its end on two sockets: when the end comes
    first it closes the trigger's log file, and the lines still in flight go to the
    triggerer's own log, tagged with the run (seen once in a full run: the FAIL event was
    sent, its log line was there)."""
    output = (airflow.home / "triggerer.out").read_text(errors="replace")
    return any(text in line and f"run_id={run_id}" in line for line in output.splitlines())


def test_with_openlineage_on_a_deferred_sensor_still_ends_in_the_triggerer_and_its_events_are_sent(
    airflow: AirflowDeployment, openlineage: Path, work_dir: Path
) -> None:
    # The listener sees a task end only on a worker; the trigger sends the COMPLETE or
    # FAIL event it would have sent there, so the sensor need not resume on one.
    # The jobs end once the sensors have deferred (a task's start took 10 s on a loaded machine).
    ended_by_trigger = airflow.trigger("e2e_sensor", {"until_released": True})
    failed_by_trigger = airflow.trigger("e2e_sensor", {"invokable": "fail", "until_released": True})
    on_worker = airflow.trigger("e2e_sensor_on_worker", {"until_released": True})  # the reference: what a worker sends
    for dag_id, run_id in (
        ("e2e_sensor", ended_by_trigger),
        ("e2e_sensor", failed_by_trigger),
        ("e2e_sensor_on_worker", on_worker),
    ):
        release_after_deferral(airflow, work_dir, dag_id, run_id)
    for dag_id, run_id, state in (
        ("e2e_sensor", ended_by_trigger, "success"),
        ("e2e_sensor", failed_by_trigger, "failed"),
        ("e2e_sensor_on_worker", on_worker, "success"),
    ):
        ti = airflow.wait_for_task(dag_id, run_id, "wait", [state], timeout=180)
        if dag_id == "e2e_sensor":
            event = "COMPLETE" if state == "success" else "FAIL"
            sent = f"Sent the task's OpenLineage {event} event"
            # The task's state can be final before the triggerer's last log lines are in its log.
            eventually(
                lambda sent=sent, dag_id=dag_id, run_id=run_id, ti=ti: (
                    sent in airflow.task_log(dag_id, run_id, "wait", ti) or triggerer_logged(airflow, sent, run_id)
                ),
                30,
                f"'{sent}' in the log of {run_id}",
            )
            log = airflow.task_log(dag_id, run_id, "wait", ti)
            assert log.count("Worker startup parse complete") == 1, log  # never resumed on a worker
    assert airflow.xcom("e2e_sensor", ended_by_trigger, "wait") == "FINISHED"

    def by_run(job_name: str, count: int) -> list[list[dict]]:
        """The task's ``count`` runs, each once its end event is in (a worker's listener
        sends it from a fork of its own, maybe after the task's state was written)."""

        def ended() -> bool:
            runs = lineage_events(openlineage, job_name).values()
            return len(runs) == count and all(run[-1]["eventType"] in ("COMPLETE", "FAIL") for run in runs)

        eventually(ended, 30, f"{count} ended runs of {job_name}")
        return list(lineage_events(openlineage, job_name).values())

    # Each try's run: the worker's START (when it deferred), then the trigger's end event.
    ended = sorted(([e["eventType"] for e in run], run) for run in by_run("e2e_sensor.wait", 2))
    assert [types for types, _ in ended] == [["START", "COMPLETE"], ["START", "FAIL"]]
    [(_, complete_run), (_, fail_run)] = ended
    start, complete = complete_run
    fail = fail_run[1]
    assert complete["eventTime"] > start["eventTime"]
    error = fail["run"]["facets"]["errorMessage"]
    assert "e2e failure" in error["message"] and "RuntimeError: e2e failure" in error["stackTrace"]
    # The same event a worker sends: same facets (the parent DAG run's, Airflow's...).
    [reference] = by_run("e2e_sensor_on_worker.wait", 1)
    worker_complete = next(e for e in reference if e["eventType"] == "COMPLETE")
    assert sorted(complete["run"]["facets"]) == sorted(worker_complete["run"]["facets"])
    assert sorted(complete["job"]["facets"]) == sorted(worker_complete["job"]["facets"])
    assert complete["run"]["facets"]["parent"]["run"]["runId"] == start["run"]["facets"]["parent"]["run"]["runId"]
    assert complete["job"]["namespace"] == "flink-runtime-e2e"
