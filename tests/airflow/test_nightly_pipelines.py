"""The example DAGs of dags/ under one real Airflow (scheduler, dag-processor, triggerer,
api-server; LocalExecutor: tests/helpers/airflow_deployment.py) against a standalone
cluster (JobManager and TaskManagers as processes, so one can be killed with SIGKILL)
and the session's real PostgreSQL server. One deployment and one cluster for both, as a
team would run them:

- dags/nightly_orders.py for one day: the summary table holds exactly the day's rows
  (other days' rows untouched), the day's Parquet folder exactly the day's enriched orders;
- dags/partitioned_backfill.py: a backfill of three days, then day 2 re-run with changed
  input while a TaskManager is killed. Days 1 and 3 stay byte for byte what the backfill
  wrote; day 2 is exactly the new input's totals.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pyarrow.parquet as pq
import pytest

from flink_runtime.client.local_cluster import StandaloneCluster
from tests.helpers.airflow_deployment import AirflowDeployment
from tests.helpers.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAGS = Path(__file__).resolve().parents[2] / "dags"
DAG_ID = "partitioned_backfill"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")
TASK = "daily_totals"
# A night long past, run by hand. The scheduler makes no runs by itself here (use_job_schedule
# off): each DAG's run for the latest day would be one more job beside the tests' (a whole
# JDBC pipeline, with a retry once on a loaded machine) and prove nothing more.
NIGHT = "2024-03-05"


def fill(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (customer_id integer PRIMARY KEY, region text NOT NULL)")
        conn.execute("INSERT INTO customers VALUES (1, 'eu'), (2, 'eu'), (3, 'us')")
        conn.execute(
            "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount bigint, ordered_at timestamp)"
        )
        conn.execute(
            "INSERT INTO orders VALUES "
            "(1, 1, 10, '2024-03-04 23:59:59'),"  # the day before: not this run's
            "(2, 1, 20, '2024-03-05 00:00:00'), (3, 2, 5, '2024-03-05 12:00:00'),"
            "(4, 3, 7, '2024-03-05 23:59:59'), (5, 3, 1, '2024-03-06 00:00:00')"
        )
        # A summary row of another day, written by an earlier run: kept as it is.
        conn.execute(
            "CREATE TABLE daily_region_summary (day date, region text, orders bigint, revenue bigint, "
            "PRIMARY KEY (day, region))"
        )
        conn.execute("INSERT INTO daily_region_summary VALUES ('2024-03-04', 'eu', 1, 10)")


def write_orders(base: Path, day: str, scale: int, files: int = 4) -> dict[str, tuple[int, int]]:
    """The day's orders as CSV files; returns the expected totals: item -> (orders, total)."""
    directory = base / "orders" / day
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    totals: dict[str, list[int]] = {}
    for index in range(files):
        lines = ["item,amount"]
        for n in range(1, 21):
            item, amount = f"i{(n + index) % 4}", n * scale + index
            totals.setdefault(item, []).append(amount)
            lines.append(f"{item},{amount}")
        (directory / f"part-{index}.csv").write_text("\n".join(lines) + "\n")
    return {item: (len(amounts), sum(amounts)) for item, amounts in totals.items()}


def day_hashes(out: Path, day: str) -> dict[str, str]:
    directory = out / f"day={day}"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def day_totals(out: Path, day: str) -> dict[str, tuple[int, int]]:
    table = pq.read_table(out / f"day={day}")
    return {row["item"]: (row["orders"], row["total"]) for row in table.to_pylist()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A JobManager and two TaskManagers (2 slots each: one left when the other is killed).
    The TaskManagers register while Airflow starts (the tests wait for them then)."""
    properties = {
        "heartbeat.interval": "300 ms",
        "heartbeat.timeout": "4 s",
        "spark.master": "local[2]",
        "taskmanager.numberOfTaskSlots": 2,
        # As a deployment's TaskManagers do: their Spark starts while Airflow does, not in
        # the first task (the tests' default is off).
        "taskmanager.spark.warm-up": "true",
    }
    cluster = StandaloneCluster(tmp_path_factory.mktemp("nightly-cluster"), properties)
    try:
        cluster.start_jobmanager()
        for index in range(2):
            cluster.start_taskmanager(f"tm-{index}", wait=False)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def database(postgres: PostgresServer) -> str:
    """The nightly pipeline's database, filled: its psycopg conninfo."""
    name = postgres.new_database("nightly").rsplit("/", 1)[-1]
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres dbname={name}"
    fill(conninfo)
    return conninfo


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FLINK_RUNTIME_DATA of every Airflow process: the DAGs' shared data directory."""
    return tmp_path_factory.mktemp("nightly-data")


@pytest.fixture(scope="module")
def airflow(
    cluster: StandaloneCluster,
    postgres: PostgresServer,
    database: str,
    base: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AirflowDeployment]:
    work = tmp_path_factory.mktemp("nightly-airflow")
    dags = work / "dags"
    dags.mkdir()
    for name in ("nightly_orders.py", "partitioned_backfill.py"):
        shutil.copy(DAGS / name, dags / name)
    connections = {
        "flink_runtime_default": {"conn_type": "flink_runtime", "host": "127.0.0.1", "port": cluster.rest_port},
        "nightly_orders_db": {
            "conn_type": "postgres",
            "host": "127.0.0.1",
            "port": postgres.port,
            "schema": database.rsplit("dbname=", 1)[-1],
            "login": "postgres",
        },
    }
    env = {"FLINK_RUNTIME_DATA": str(base), "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}
    with AirflowDeployment(work / "home", dags, postgres, connections, env=env) as deployment:
        cluster.wait_for_taskmanagers(lambda ids: {"tm-0", "tm-1"} <= ids, timeout=120)
        yield deployment


def test_one_night_of_orders_into_parquet_and_the_summary_table(
    airflow: AirflowDeployment, database: str, base: Path
) -> None:
    airflow.wait_for_dag("nightly_orders")
    run_id = airflow.trigger("nightly_orders", logical_date=f"{NIGHT}T00:00:00Z")
    airflow.wait_for_task("nightly_orders", run_id, "nightly_orders", ["success"], timeout=420)

    with psycopg.connect(database) as conn:
        summary = conn.execute(
            "SELECT day::text, region, orders, revenue FROM daily_region_summary ORDER BY day, region"
        ).fetchall()
    assert summary == [("2024-03-04", "eu", 1, 10), (NIGHT, "eu", 2, 25), (NIGHT, "us", 1, 7)]
    enriched = pq.read_table(base / "orders" / f"day={NIGHT}")
    assert sorted(zip(enriched.column("id").to_pylist(), enriched.column("region").to_pylist(), strict=True)) == [
        (2, "eu"),
        (3, "eu"),
        (4, "us"),
    ]


def test_backfill_then_a_rerun_of_day_two_with_a_taskmanager_killed(
    airflow: AirflowDeployment, cluster: StandaloneCluster, base: Path
) -> None:
    expected = {day: write_orders(base, day, scale=1) for day in DAYS}
    out = base / "daily_totals"
    airflow.wait_for_dag(DAG_ID)
    # The backfill, as `airflow backfill create --dag-id ... --from-date ... --to-date ...`.
    backfill = airflow._json(
        "POST",
        "/backfills",
        json={
            "dag_id": DAG_ID,
            "from_date": f"{DAYS[0]}T00:00:00Z",
            "to_date": f"{DAYS[-1]}T00:00:00Z",
            # Slow splits (0.5 s each): the re-run still runs when its TaskManager dies.
            "dag_run_conf": {"transform": "tests.helpers.transforms:slow"},
        },
    )
    runs = wait_for_runs(airflow, backfill["id"], len(DAYS))
    for run_id in runs.values():
        airflow.wait_for_task(DAG_ID, run_id, TASK, ["success"], timeout=300)
    # Cleared only once the scheduler has marked the backfill complete, as a user would: a
    # task reads "success" before the scheduler has processed its end, and a run cleared in
    # between was never started again (once, on a loaded machine).
    wait_for_backfill_complete(airflow, backfill["id"])
    for day in DAYS:
        assert day_totals(out, day) == expected[day], day
    before = {day: day_hashes(out, day) for day in DAYS}
    assert all(before.values())

    # Upstream data for day 2 was late: new input, and the day's run cleared; a
    # TaskManager running a task of its job is killed.
    new_day2 = write_orders(base, DAYS[1], scale=7, files=8)
    jobs_before = {job["jid"] for job in jobs(cluster)}
    airflow._json(
        "POST",
        f"/dags/{DAG_ID}/dagRuns/{runs[DAYS[1]]}/clear",
        json={"dry_run": False, "only_failed": False},
    )
    job_id, taskmanager_id = wait_for_new_running_job(cluster, jobs_before, f"daily totals {DAYS[1]}")
    next(tm for tm in cluster.taskmanagers if tm.name == f"taskmanager-{taskmanager_id}").kill()
    airflow.wait_for_task(DAG_ID, runs[DAYS[1]], TASK, ["success"], timeout=300)

    job = httpx.get(f"{cluster.rest_url}/jobs/{job_id}", timeout=10).json()
    assert job["state"] == "FINISHED"
    history = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/exceptions", timeout=10).json()
    assert history["exceptionHistory"]["entries"], "the TaskManager was not killed while the job ran"
    assert day_hashes(out, DAYS[0]) == before[DAYS[0]]
    assert day_hashes(out, DAYS[2]) == before[DAYS[2]]
    assert day_totals(out, DAYS[1]) == new_day2
    assert not (out / "_flink_staging").exists()


def wait_for_backfill_complete(airflow: AirflowDeployment, backfill_id: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not airflow._json("GET", f"/backfills/{backfill_id}").get("completed_at"):
        assert time.monotonic() < deadline, f"backfill {backfill_id} not complete within {timeout} s"
        time.sleep(0.5)


def wait_for_runs(airflow: AirflowDeployment, backfill_id: int, count: int, timeout: float = 60) -> dict[str, str]:
    """The backfill's runs by day, once the scheduler created them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = airflow._json("GET", f"/dags/{DAG_ID}/dagRuns", params={"run_type": "backfill"})["dag_runs"]
        runs = {run["logical_date"][:10]: run["dag_run_id"] for run in listed}
        if len(runs) >= count:
            return runs
        time.sleep(0.5)
    raise AssertionError(f"backfill {backfill_id} made no {count} runs within {timeout} s\n{airflow.output_tails()}")


def jobs(cluster: StandaloneCluster) -> list[dict]:
    return httpx.get(f"{cluster.rest_url}/jobs/overview", timeout=10).json()["jobs"]


def wait_for_new_running_job(
    cluster: StandaloneCluster, known: set[str], name: str, timeout: float = 120
) -> tuple[str, str]:
    """The re-run's job (named `name`: the other DAG's runs share the cluster) and a
    TaskManager running a task of it, once one does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in jobs(cluster):
            if job["jid"] in known or job["name"] != name or job["state"] != "RUNNING":
                continue
            details = httpx.get(f"{cluster.rest_url}/jobs/{job['jid']}", timeout=10).json()
            for vertex in details["vertices"]:
                url = f"{cluster.rest_url}/jobs/{job['jid']}/vertices/{vertex['id']}"
                for subtask in httpx.get(url, timeout=10).json()["subtasks"]:
                    if subtask["status"] == "RUNNING" and subtask.get("taskmanager-id"):
                        return job["jid"], subtask["taskmanager-id"]
        time.sleep(0.1)
    raise AssertionError(f"no new job ran within {timeout} s: {jobs(cluster)}")
