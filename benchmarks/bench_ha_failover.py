"""Failover time of a standby JobManager: kill -9 of the leader -> job RUNNING again.

Real processes and a real PostgreSQL server (started here from Debian's binaries, as
the tests do): two JobManagers on one job store (high-availability.type: database),
two TaskManagers, a checkpointed sleep job. Each trial kills the leading JobManager
with SIGKILL while the job runs, and measures from the kill:

- leader: the standby answers GET /leader with is-leader true (the lease expired by
  the database's clock and the standby took it: about lease-duration + retry-period);
- running: the recovered job is RUNNING again on the new leader (TaskManagers found
  it in the lease row and registered, its tasks were deployed).

The killed JobManager is started again as the next trial's standby, and given
--standby-warm-up seconds before the next kill: a standby normally runs for long before
it is needed, its planner process and SparkSession started (jobmanager.planner.warm-up);
a standby still warming up when it takes over plans the recovered job only once that
is done (90 s instead of 6 s here, measured on a loaded 2-core machine).

    .venv/bin/python benchmarks/bench_ha_failover.py [--trials 3] [--lease-duration "15 s"]
        [--renew-deadline "10 s"] [--retry-period "5 s"] [--standby-warm-up 40]
        (the timeouts' defaults are this project's)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster, free_port
from flink_runtime.jobgraph import JobGraph, JobVertex
from tests.helpers.postgres import postgres_server


def is_leader(process: ClusterProcess) -> bool:
    try:
        return bool(httpx.get(f"{process.rest_url}/leader", timeout=2).json()["is-leader"])
    except httpx.HTTPError:
        return False


def wait_for(condition, timeout: float = 120.0) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - started


def job_running(process: ClusterProcess, job_id: str) -> bool:
    try:
        answer = httpx.get(f"{process.rest_url}/jobs/{job_id}", timeout=2)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200 and answer.json().get("state") == "RUNNING"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--lease-duration", default="15 s")
    parser.add_argument("--renew-deadline", default="10 s")
    parser.add_argument("--retry-period", default="5 s")
    parser.add_argument("--standby-warm-up", type=float, default=40.0, help="seconds between a start and a kill")
    args = parser.parse_args()
    prefix = "high-availability.database.leader-election"
    with postgres_server() as postgres, tempfile.TemporaryDirectory() as work:
        properties = {
            "jobstore.url": postgres.new_database("bench"),
            "high-availability.type": "database",
            f"{prefix}.lease-duration": args.lease_duration,
            f"{prefix}.renew-deadline": args.renew_deadline,
            f"{prefix}.retry-period": args.retry_period,
            "heartbeat.interval": "1 s",
            "heartbeat.timeout": "60 s",
            "cluster.registration.refused-registration-delay": "500 ms",
        }
        with StandaloneCluster(Path(work) / "cluster", properties=properties) as cluster:
            leader = cluster.start_jobmanager()
            wait_for(lambda: is_leader(leader))
            standby = cluster.start_jobmanager(
                name="jobmanager-1", **{"jobmanager.rpc.port": free_port(), "rest.port": free_port()}
            )
            for index in range(2):
                cluster.start_taskmanager(f"tm-{index}", wait=False, **{"taskmanager.numberOfTaskSlots": 1})
            cluster.wait_for_taskmanagers(lambda ids: {"tm-0", "tm-1"} <= ids)
            graph = JobGraph(
                name="long sleeper",
                vertices=[JobVertex(id="zzz", name="Sleep", invokable="sleep", parallelism=2,
                                    config={"seconds": 3600})],
                config={"execution.checkpointing.interval": "1 s",
                        "state.checkpoints.dir": str(Path(work) / "checkpoints")},
            )  # fmt: skip
            answer = httpx.post(
                f"{leader.rest_url}/jobs", content=graph.to_json(), timeout=60,
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            job_id = answer.raise_for_status().json()["jobid"]
            wait_for(lambda: job_running(leader, job_id))
            time.sleep(args.standby_warm_up)
            results: list[tuple[float, float]] = []
            for trial in range(args.trials):
                time.sleep(2.0)  # a checkpoint or two
                leader.kill()
                killed = time.monotonic()
                wait_for(lambda standby=standby: is_leader(standby))
                elected = time.monotonic() - killed
                wait_for(lambda standby=standby: job_running(standby, job_id))
                running = time.monotonic() - killed
                results.append((elected, running))
                print(f"trial {trial + 1}: standby leading after {elected:.2f} s, job RUNNING after {running:.2f} s")
                restarted = cluster.start_jobmanager(
                    name=f"jobmanager-{trial + 2}", **{"jobmanager.rpc.port": free_port(), "rest.port": free_port()}
                )
                leader, standby = standby, restarted
                time.sleep(args.standby_warm_up)
    elected_all, running_all = [r[0] for r in results], [r[1] for r in results]
    print(
        f"lease-duration {args.lease_duration}, renew-deadline {args.renew_deadline}, retry-period "
        f"{args.retry_period}, {args.trials} trials: standby leading after median "
        f"{statistics.median(elected_all):.2f} s (max {max(elected_all):.2f}), job RUNNING again after median "
        f"{statistics.median(running_all):.2f} s (max {max(running_all):.2f})"
    )


if __name__ == "__main__":
    main()
