"""Job FINISHED -> deferred JobStatusSensor task success, under a real Airflow deployment.

Airflow's scheduler, triggerer, dag-processor and api-server run as separate processes
(LocalExecutor, SQLite; tests/helpers/airflow_deployment.py), the jobs on a MiniCluster
in this process. Each DAG run submits a job that sleeps ``--job-seconds`` and waits
for it with a deferrable JobStatusSensor, one run at a time:

- ``e2e_sensor``: the sensor ends from the triggerer (the default; TaskSuccessEvent);
- ``e2e_sensor_on_worker``: ``end_from_trigger=False``, the task resumes on a worker
  after the trigger fired (execute_complete), as every deferrable sensor did before.

Measured per run: the job's end time (the JobManager's clock) to the sensor task
instance's ``end_date`` (Airflow's), both on this host. Target: median <= 0.3 s.

    .venv/bin/python benchmarks/bench_airflow_real_sensor.py [--runs 7] [--job-seconds 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flink_runtime.minicluster import MiniCluster  # noqa: E402
from tests.conftest import fast_config  # noqa: E402
from tests.helpers.airflow_deployment import AirflowDeployment  # noqa: E402

DAGS = ROOT / "tests" / "airflow" / "e2e_dags"
TARGET_SECONDS = 0.3


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def measure(airflow: AirflowDeployment, cluster: httpx.Client, dag_id: str, job_seconds: float) -> float:
    run_id = airflow.trigger(dag_id, {"seconds": job_seconds})
    ti = airflow.wait_for_task(dag_id, run_id, "wait", ["success"], timeout=job_seconds + 120)
    if ti["try_number"] != 1:
        raise SystemExit(f"{dag_id} {run_id}: the sensor took {ti['try_number']} tries")
    job_id = airflow.xcom(dag_id, run_id, "submit", key="job_id")
    job = cluster.get(f"/jobs/{job_id}").json()
    return _seconds(ti["end_date"]) - job["end-time"] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--job-seconds", type=float, default=6.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-real-airflow-") as work:
        config = fast_config(**{"io.tmp.dirs": f"{work}/data"})
        with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as minicluster:
            host, port = minicluster.rest_url.removeprefix("http://").rsplit(":", 1)
            connection = {"conn_type": "flink_runtime", "host": host, "port": int(port)}
            started = time.monotonic()
            with (
                AirflowDeployment(
                    Path(work) / "home", DAGS, {"flink_runtime_e2e": connection}, env={"FLINK_RUNTIME_E2E_DIR": work}
                ) as airflow,
                httpx.Client(base_url=minicluster.rest_url, timeout=30) as cluster,
            ):
                for dag_id in ("e2e_sensor", "e2e_sensor_on_worker"):
                    airflow.wait_for_dag(dag_id)
                print(f"Airflow deployment up in {time.monotonic() - started:.1f} s")
                for dag_id in ("e2e_sensor", "e2e_sensor_on_worker"):
                    latencies = []
                    for _ in range(args.runs):
                        latencies.append(measure(airflow, cluster, dag_id, args.job_seconds))
                        print(f"  {dag_id}: {latencies[-1]:.3f} s", flush=True)
                    median = statistics.median(latencies)
                    verdict = "meets" if median <= TARGET_SECONDS else "misses"
                    print(
                        f"{dag_id}: FINISHED -> task success over {len(latencies)} runs: median {median:.3f} s, "
                        f"min {min(latencies):.3f} s, max {max(latencies):.3f} s "
                        f"({verdict} the {TARGET_SECONDS} s target)"
                    )


if __name__ == "__main__":
    main()
