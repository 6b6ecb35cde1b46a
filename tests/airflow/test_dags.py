"""The example DAGs in dags/: they import cleanly, and run for real with dag.test().

The runs go against a real embedded cluster (a detached MiniCluster process, started by
the first task that uses the connection, as under a real executor) and Airflow's
default SQLite metadata database. Deferral is included: dag.test() runs the
trigger inline and resumes the sensor with its event.
"""

from __future__ import annotations

import collections
import datetime
import json
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

pytestmark = [
    pytest.mark.xdist_group("airflow-db"),  # one worker makes the in-process metadata DB (make test: -n 2)
    # dag.test() runs the tasks in this process; once, a stop whose savepoint never completed
    # kept a task waiting and pytest-timeout's signal method did not fire for 27 minutes,
    # holding up the whole run. The thread method ends this process instead; xdist reports
    # the test as failed and starts another worker.
    pytest.mark.timeout(300, method="thread"),
]

ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = ROOT / "dags"
EXAMPLE_DAGS = {"daily_word_count", "savepoint_resume", "long_job_deferrable", "partitioned_backfill", "nightly_orders"}
SAVEPOINT_VARIABLE = "flink_runtime_savepoint_resume"
DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def load_dag_bag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)


@pytest.fixture(scope="module")
def dag_bag(airflow_db: Any) -> Any:
    return load_dag_bag()


# -- importing ---------------------------------------------------------------------------------------


def test_every_example_dag_imports_without_errors_or_deprecations(airflow_db: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = load_dag_bag()
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == EXAMPLE_DAGS
    assert {path for path in bag.captured_warnings} == set(), bag.captured_warnings
    from_dags = [w for w in caught if issubclass(w.category, DEPRECATIONS) and str(DAGS_FOLDER) in str(w.filename)]
    assert from_dags == []
    for path in DAGS_FOLDER.glob("*.py"):
        assert str(path) in bag.file_last_changed, f"{path.name} was not parsed"


def test_example_dags_follow_the_conventions(dag_bag: Any) -> None:
    for dag_id in EXAMPLE_DAGS:
        dag = dag_bag.get_dag(dag_id)
        assert dag.catchup is False, dag_id
        assert "flink-runtime" in dag.tags, dag_id
        assert dag.schedule is not None, f"{dag_id} has no schedule"
        assert dag.doc_md and len(dag.doc_md) > 200, f"{dag_id} should explain itself"
        for task in dag.tasks:
            conn_id = getattr(task, "flink_runtime_conn_id", None)
            assert conn_id in (None, "flink_runtime_default"), f"{dag_id}.{task.task_id}"


def test_compose_connection_points_at_the_jobmanager(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection docker/docker-compose.yaml gives Airflow is read by the hook as http://jobmanager:8081."""
    import yaml

    from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook

    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yaml").read_text())
    value = compose["services"]["airflow"]["environment"]["AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT"]
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_COMPOSE", value)
    assert FlinkRuntimeHook("flink_runtime_compose").rest_url == "http://jobmanager:8081"


# -- running -----------------------------------------------------------------------------------------


class Env:
    """What a DAG run test needs: where the data goes, and the cluster's REST URL."""

    def __init__(self, data: Path, state_dir: Path) -> None:
        self.data = data
        self.state_dir = state_dir

    @property
    def rest_url(self) -> str:
        return json.loads((self.state_dir / "minicluster.json").read_text())["rest_url"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def env(airflow_db: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from flink_runtime.airflow.embedded import stop_embedded_cluster

    state_dir = tmp_path_factory.mktemp("embedded-cluster")
    data = tmp_path_factory.mktemp("dag-data")
    connection = {
        "conn_type": "flink_runtime",
        # A free port, not the embedded default 18081: another test run on this host may hold that.
        "port": free_port(),
        "extra": {"embedded": True, "state_dir": str(state_dir), "taskmanagers": 2, "slots": 2},
    }
    # dag.test() writes the DAG to the metadata DB from its bundle: ours is dags/.
    bundles = [
        {
            "name": "flink-runtime-examples",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(DAGS_FOLDER)},
        }
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", json.dumps(connection))
        patch.setenv("FLINK_RUNTIME_DATA", str(data))
        patch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
        try:
            yield Env(data, state_dir)
        finally:
            stop_embedded_cluster(state_dir)


def run(dag: Any, **kwargs: Any) -> tuple[Any, dict[str, str]]:
    """dag.test() with retries off (a failure must fail the test now, not after a retry delay)."""
    for task in dag.tasks:
        task.retries = 0
    dag_run = dag.test(**kwargs)
    return dag_run, task_states(dag_run)


def task_states(dag_run: Any) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        instances = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id)
        )
        return {ti.task_id: str(ti.state) for ti in instances}


def xcom(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key)
        row = session.scalars(query).first()
        assert row is not None, f"no XCom {key!r} from {task_id}"
        return XComModel.deserialize_value(row)


def asset_events(dag_run: Any) -> dict[str, tuple[str, int, list[str]]]:
    """uri -> (job id, records, source aliases) of the asset events a run recorded."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetModel.uri, AssetEvent)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_run_id == dag_run.run_id)
        ).all()
        return {
            uri: (event.extra["job_id"], event.extra["records"], [a.name for a in event.source_aliases])
            for uri, event in rows
        }


def rendered_field(dag_run: Any, task_id: str, field: str) -> Any:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rendered = session.scalars(
            select(RenderedTaskInstanceFields.rendered_fields).where(
                RenderedTaskInstanceFields.dag_id == dag_run.dag_id,
                RenderedTaskInstanceFields.run_id == dag_run.run_id,
                RenderedTaskInstanceFields.task_id == task_id,
            )
        ).first()
        assert rendered is not None, f"{task_id} has no rendered fields"
        return rendered[field]


def words_in(*paths: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in paths:
        counts.update(path.read_text().lower().split())
    return counts


def parquet_dict(path: str | Path, key: str, value: str) -> dict[Any, int]:
    table = pq.read_table(path)
    return dict(zip(table.column(key).to_pylist(), table.column(value).to_pylist(), strict=True))


def source_splits(rest_url: str, job_id: str) -> dict[str, int]:
    totals = collections.Counter()
    for vertex in httpx.get(f"{rest_url}/jobs/{job_id}").json()["vertices"]:
        splits = httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{vertex['id']}").json().get("input-splits") or {}
        totals.update({key: splits.get(key, 0) for key in ("total", "completed")})
    return dict(totals)


@pytest.mark.integration
def test_daily_word_count_scheduled_and_manual_runs(env: Env, dag_bag: Any) -> None:
    dag = dag_bag.get_dag("daily_word_count")

    # A scheduled run: the day is its logical date.
    dag_run, states = run(dag, logical_date=datetime.datetime(2024, 3, 5, tzinfo=datetime.UTC))
    assert states == {"prepare_input": "success", "word_count": "success", "report_top_words": "success"}
    assert str(dag_run.state) == "success"
    inputs = sorted((env.data / "input" / "2024-03-05").glob("*.txt"))
    assert len(inputs) == 4, "prepare_input generates the demo corpus"
    expected = words_in(*inputs)
    output = env.data / "output" / "2024-03-05"
    assert parquet_dict(output, "word", "count") == dict(expected)
    top = xcom(dag_run, "report_top_words")
    assert [word for word, _ in top[:3]] == [word for word, _ in expected.most_common(3)]
    assert xcom(dag_run, "word_count", "job_url").startswith(env.rest_url)
    # The XCom names the output and what was written; the alias recorded its Asset event.
    result = xcom(dag_run, "word_count")
    assert [(o["uri"], o["records"]) for o in result["outputs"]] == [(f"file://{output}", len(expected))]
    assert asset_events(dag_run) == {f"file://{output}": (result["job_id"], len(expected), ["daily_word_counts"])}

    # A manual run has no logical date (so no {{ ds }}): the day it was queued for is used.
    queued = datetime.datetime(2024, 3, 9, 12, 30, tzinfo=datetime.UTC)
    dag_run, states = run(dag, logical_date=None, run_after=queued)
    assert dag_run.logical_date is None
    assert set(states.values()) == {"success"} and str(dag_run.state) == "success"
    manual_inputs = sorted((env.data / "input" / "2024-03-09").glob("*.txt"))
    assert parquet_dict(env.data / "output" / "2024-03-09", "word", "count") == dict(words_in(*manual_inputs))


@pytest.mark.integration
def test_long_job_waits_in_a_deferrable_sensor(env: Env, dag_bag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from flink_runtime.airflow.triggers.flink_runtime import JobStatusTrigger

    fired: list[dict[str, Any]] = []
    original_run = JobStatusTrigger.run

    async def recording_run(trigger: JobStatusTrigger):  # type: ignore[no-untyped-def]
        async for event in original_run(trigger):
            fired.append(event.payload)
            yield event

    monkeypatch.setattr(JobStatusTrigger, "run", recording_run)
    dag = dag_bag.get_dag("long_job_deferrable")
    # Big enough that the job still runs when the sensor first looks (a loaded machine
    # once finished 3 x 300 lines before that), so the sensor defers.
    dag_run, states = run(dag, run_conf={"files": 4, "lines": 20000})
    assert str(dag_run.state) == "success"
    assert states == {
        "prepare_corpus": "success",
        "submit_job": "success",
        "wait_for_job": "success",
        "report": "success",
    }
    job_id = xcom(dag_run, "submit_job")["job_id"]
    assert xcom(dag_run, "submit_job", "job_id") == job_id  # what submit.output["job_id"] reads
    # The sensor deferred: its trigger ran and fired once, for this job.
    assert fired == [
        {"status": "success", "job_id": job_id, "state": "FINISHED", "message": f"job {job_id} reached FINISHED"}
    ]
    assert httpx.get(f"{env.rest_url}/jobs/{job_id}").json()["state"] == "FINISHED"

    text = words_in(*sorted((env.data / "long_job" / "input" / "4x20000").glob("*.txt")))
    lengths = collections.Counter()
    for word, count in text.items():
        lengths[len(word)] += count
    assert parquet_dict(env.data / "long_job" / "word_lengths", "length", "words") == dict(lengths)
    assert xcom(dag_run, "report") == [[length, lengths[length]] for length in sorted(lengths)]


@pytest.mark.integration
def test_savepoint_resume_continues_from_the_previous_runs_savepoint(env: Env, dag_bag: Any) -> None:
    from airflow.models.variable import Variable

    Variable.delete(SAVEPOINT_VARIABLE)
    dag = dag_bag.get_dag("savepoint_resume")
    events = env.data / "savepoint_resume" / "events"
    output = env.data / "savepoint_resume" / "word_counts"
    expected_states = {
        "prepare_input": "success",
        "last_savepoint": "success",
        "resume_job": "success",
        "wait_until_caught_up": "success",
        "stop_with_savepoint": "success",
        "remember_savepoint": "success",
        "cancel_on_failure": "skipped",
    }

    first_run, states = run(dag, logical_date=datetime.datetime(2024, 3, 5, 10, tzinfo=datetime.UTC))
    assert states == expected_states and str(first_run.state) == "success"
    assert rendered_field(first_run, "resume_job", "from_savepoint") in (None, "None")
    first_job = xcom(first_run, "resume_job")["job_id"]
    first_savepoint = xcom(first_run, "stop_with_savepoint")
    assert Path(first_savepoint, "_metadata").is_file()
    assert Variable.get(SAVEPOINT_VARIABLE) == first_savepoint
    assert httpx.get(f"{env.rest_url}/jobs/{first_job}").json()["state"] == "FINISHED"
    first_file = [events / "events-20240305T100000.txt"]
    assert parquet_dict(output, "word", "count") == dict(words_in(*first_file))

    second_run, states = run(dag, logical_date=datetime.datetime(2024, 3, 5, 11, tzinfo=datetime.UTC))
    assert states == expected_states and str(second_run.state) == "success"
    # Resumed from the first run's savepoint ...
    assert rendered_field(second_run, "resume_job", "from_savepoint") == first_savepoint
    second_job = xcom(second_run, "resume_job")["job_id"]
    assert second_job != first_job
    # ... it read only the file that arrived since, and its totals carry on from the state.
    assert source_splits(env.rest_url, second_job) == {"total": 1, "completed": 1}
    both_files = [*first_file, events / "events-20240305T110000.txt"]
    assert parquet_dict(output, "word", "count") == dict(words_in(*both_files))
    assert Variable.get(SAVEPOINT_VARIABLE) == xcom(second_run, "stop_with_savepoint") != first_savepoint
