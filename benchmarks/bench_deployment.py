"""Task deployment throughput and submit latency through real processes.

Starts a JobManager and TaskManagers as separate processes (flink-runtime CLI) on
loopback, then measures:

1. no-op task deployments per second: one job of N no-op subtasks on fewer slots,
   so every slot is deployed into many times; rate = N / (submit -> FINISHED), and the
   CPU time the JobManager and the TaskManagers spent per 1,000 deployments.
   Each subtask goes the full path: slot request, SubmitTask, TaskOperationResult,
   a thread on the TaskManager, INITIALIZING/RUNNING/FINISHED updates back.
2. submit -> RUNNING latency with warm TaskManagers: POST /jobs answers once the
   sources run (Success), so the POST round trip is that latency.

Targets: >= 5,000 deployments/s on 2 cores (issue 26; it was 2,000); <= 100 ms submit -> RUNNING.

    .venv/bin/python benchmarks/bench_deployment.py [--tasks 10000] [--taskmanagers 2] [--slots 8]

To measure another checkout's code with this file: PYTHONPATH=<checkout> (the cluster's
processes start in a temporary folder, so that is the code they import).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.jobgraph import JobGraph, JobVertex


def noop_job(parallelism: int, name: str) -> bytes:
    return JobGraph(
        name=name, vertices=[JobVertex(id="noop", name="NoOp", invokable="noop", parallelism=parallelism)]
    ).to_json()


def run_to_end(client: httpx.Client, body: bytes) -> tuple[float, str]:
    started = time.perf_counter()
    job_id = client.post("/jobs", content=body).json()["jobid"]
    since = 0
    while True:
        answer = client.get(f"/jobs/{job_id}/events", params={"since": since, "timeout": 30}).json()
        since = answer["next"]
        if answer["state"] in ("FINISHED", "FAILED", "CANCELED"):
            return time.perf_counter() - started, answer["state"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc): unlike wall time, it hardly
    depends on what else runs on a shared machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu(cluster: StandaloneCluster) -> dict[str, float]:
    assert cluster.jobmanager is not None
    taskmanagers = sum(cpu_seconds(tm.pid) for tm in cluster.taskmanagers)
    return {"jobmanager": cpu_seconds(cluster.jobmanager.pid), "taskmanagers": taskmanagers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--taskmanagers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--latency-runs", type=int, default=30)
    args = parser.parse_args()

    # No-op tasks need no Spark: no JVM start competing with the measured deployments.
    properties = {"taskmanager.spark.warm-up": "false"}
    with tempfile.TemporaryDirectory() as work_dir, StandaloneCluster(Path(work_dir), properties) as cluster:
        # The processes start in the temporary folder: `python -m` puts its working directory
        # first on sys.path, so started from a checkout they would run that checkout's code
        # whatever PYTHONPATH says (main's code measured from a branch's worktree was the branch's).
        os.chdir(work_dir)
        cluster.start(taskmanagers=args.taskmanagers, slots=args.slots)
        # POST /jobs takes only a JSON body that says so (415 otherwise).
        headers = {"Content-Type": "application/json"}
        with httpx.Client(base_url=cluster.rest_url, timeout=120, headers=headers) as client:
            # Warm-up: imports, connections, thread pools.
            run_to_end(client, noop_job(args.taskmanagers * args.slots, "warm-up"))

            cpu_before = cluster_cpu(cluster)
            elapsed, state = run_to_end(client, noop_job(args.tasks, "throughput"))
            cpu_after = cluster_cpu(cluster)
            rate = args.tasks / elapsed
            print(
                f"deployments: {args.tasks} no-op subtasks on {args.taskmanagers} TaskManagers x {args.slots} slots "
                f"-> {state} in {elapsed:.2f} s = {rate:,.0f} deployments/s "
                f"(target >= 5,000/s: {'PASS' if rate >= 5000 and state == 'FINISHED' else 'FAIL'})"
            )
            # CPU per deployment: what a loaded machine's wall-clock rate hides.
            per_1000 = {name: (cpu_after[name] - cpu_before[name]) * 1000 / args.tasks for name in cpu_after}
            print(
                f"CPU per 1,000 deployments: JobManager {per_1000['jobmanager']:.2f} s, "
                f"TaskManagers {per_1000['taskmanagers']:.2f} s (all {args.taskmanagers})"
            )

            latencies = []
            for run in range(args.latency_runs):
                body = noop_job(1, f"latency-{run}")
                started = time.perf_counter()
                response = client.post("/jobs", content=body)
                latencies.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 202, response.text
                run_to_end_job = response.json()["jobid"]
                while client.get(f"/jobs/{run_to_end_job}").json()["state"] == "RUNNING":
                    time.sleep(0.005)
            latencies.sort()
            p95 = latencies[int(len(latencies) * 0.95) - 1]
            median = statistics.median(latencies)
            print(
                f"submit -> RUNNING (POST /jobs round trip, warm TaskManagers, {args.latency_runs} runs): "
                f"median {median:.1f} ms, p95 {p95:.1f} ms, min {latencies[0]:.1f} ms "
                f"(target <= 100 ms: {'PASS' if median <= 100 else 'FAIL'})"
            )


if __name__ == "__main__":
    main()
