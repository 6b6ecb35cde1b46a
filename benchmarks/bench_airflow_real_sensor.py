"""Job FINISHED -> deferred JobStatusSensor task success, under a real Airflow deployment.

Airflow's scheduler, triggerer, dag-processor and api-server run as separate processes
(LocalExecutor, SQLite; tests/helpers/airflow_deployment.py), the jobs on a MiniCluster
in this process. Each DAG run submits a job that sleeps ``--job-seconds`` and waits
for it with a deferrable JobStatusSensor, one run at a time:

- ``e2e_sensor``: the sensor ends from the triggerer (the default; TaskSuccessEvent);
- ``e2e_sensor_on_worker``: ``end_from_trigger=False``, the task resumes on a worker
  after the trigger fired (execute_complete), as every deferrable sensor did before.

With ``--openlineage`` every component runs with the OpenLineage provider's listener
on (a file transport under the work folder), as a deployment that sends lineage would.

Measured per run: the job's end time (the JobManager's clock) to the sensor task
instance's ``end_date`` (Airflow's), both on this host. Target: median <= 0.3 s.

    .venv/bin/python benchmarks/bench_airflow_real_sensor.py [--runs 7] [--job-seconds 6] [--openlineage]
"""

from __future__ import annotations

import argparse
import json
import shutil
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
from tests.helpers.airflow_deployment import AirflowDeployment, AirflowDeploymentError  # noqa: E402

DAGS = ROOT / "tests" / "airflow" / "e2e_dags"
TARGET_SECONDS = 0.3
DAG_IDS = ("e2e_sensor", "e2e_sensor_on_worker")


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _trigger_log_times(home: Path, dag_id: str, run_id: str) -> dict[str, float]:
    """When the trigger saw the job end and when its event left it (the trigger's log lines)."""
    times: dict[str, float] = {}
    folder = home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=wait"
    for path in folder.glob("attempt=1.log.trigger.*.log"):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            event = str(record.get("event", ""))
            if "-> FINISHED" in event:
                times["seen"] = _seconds(record["timestamp"])
            elif event == "Trigger fired event":
                times["fired"] = _seconds(record["timestamp"])
    return times


def _lineage_events(work: Path, dag_id: str) -> int:
    """How many OpenLineage events the sensor task's runs have emitted so far (all runs)."""
    path = work / "openlineage.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(1 for line in lines if line.strip() and json.loads(line)["job"]["name"] == f"{dag_id}.wait")


def measure(airflow: AirflowDeployment, cluster: httpx.Client, dag_id: str, job_seconds: float) -> dict[str, float]:
    """Seconds from the job's end to: the trigger seeing it, its event leaving, the task's end."""
    run_id = airflow.trigger(dag_id, {"seconds": job_seconds})
    ti = airflow.wait_for_task(dag_id, run_id, "wait", ["success"], timeout=job_seconds + 120)
    job_id = airflow.xcom(dag_id, run_id, "submit", key="job_id")
    finished = cluster.get(f"/jobs/{job_id}").json()["end-time"] / 1000
    marks = {name: when - finished for name, when in _trigger_log_times(airflow.home, dag_id, run_id).items()}
    return {**marks, "success": _seconds(ti["end_date"]) - finished}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--job-seconds", type=float, default=6.0)
    parser.add_argument("--dags", nargs="+", default=list(DAG_IDS), choices=DAG_IDS, help="the variants to run")
    parser.add_argument("--openlineage", action="store_true", help="the OpenLineage listener on (file transport)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-real-airflow-")
    env = {"FLINK_RUNTIME_E2E_DIR": work}
    if args.openlineage:
        transport = {"type": "file", "log_file_path": f"{work}/openlineage.jsonl", "append": True}
        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(transport)
        env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "flink-runtime-bench"
    keep = False  # a failed run's logs stay for reading
    try:
        config = fast_config(**{"io.tmp.dirs": f"{work}/data"})
        with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as minicluster:
            host, port = minicluster.rest_url.removeprefix("http://").rsplit(":", 1)
            connection = {"conn_type": "flink_runtime", "host": host, "port": int(port)}
            started = time.monotonic()
            with (
                AirflowDeployment(Path(work) / "home", DAGS, {"flink_runtime_e2e": connection}, env=env) as airflow,
                httpx.Client(base_url=minicluster.rest_url, timeout=30) as cluster,
            ):
                for dag_id in args.dags:
                    airflow.wait_for_dag(dag_id)
                print(f"Airflow deployment up in {time.monotonic() - started:.1f} s")
                for dag_id in args.dags:
                    latencies, failures = [], 0
                    for _ in range(args.runs):
                        try:
                            marks = measure(airflow, cluster, dag_id, args.job_seconds)
                        except AirflowDeploymentError as exc:  # counted, shown, not the end of the run
                            failures += 1
                            print(f"  {dag_id}: FAILED: {str(exc).splitlines()[0]}", flush=True)
                            keep = True
                            continue
                        latencies.append(marks["success"])
                        steps = ", ".join(f"{name} {value:.3f} s" for name, value in marks.items())
                        if args.openlineage:
                            steps += f"; the sensor's lineage events so far: {_lineage_events(Path(work), dag_id)}"
                        print(f"  {dag_id}: after FINISHED: {steps}", flush=True)
                    if not latencies:
                        continue
                    median = statistics.median(latencies)
                    verdict = "meets" if median <= TARGET_SECONDS else "misses"
                    print(
                        f"{dag_id}: FINISHED -> task success over {len(latencies)} runs ({failures} failed): "
                        f"median {median:.3f} s, min {min(latencies):.3f} s, max {max(latencies):.3f} s "
                        f"({verdict} the {TARGET_SECONDS} s target)"
                    )
                noise = (airflow.home / "triggerer.out").read_text(errors="replace").count("XCom not found")
                print(f"'XCom not found' in the triggerer's output: {noise} times")
    finally:
        if keep:
            print(f"Logs of the failed runs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
