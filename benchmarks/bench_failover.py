"""Time to detect a killed TaskManager and to resume its work elsewhere.

Real processes: a JobManager and four one-slot TaskManagers (flink-runtime CLI).
A three-subtask job (sleep) runs with a fixed-delay restart strategy (no delay); one
TaskManager running a subtask is killed with SIGKILL. Measured from the kill:

- detected: the JobManager has removed the TaskManager (closed connection, probed at
  once; otherwise heartbeat.timeout);
- resumed: the failed subtask's next attempt is RUNNING on the spare TaskManager.

    .venv/bin/python benchmarks/bench_failover.py [--trials 3] [--heartbeat-timeout "50 s"]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.jobgraph import JobGraph, JobVertex


def trial(cluster: StandaloneCluster, client: httpx.Client) -> tuple[float, float]:
    graph = JobGraph(
        name="victim",
        vertices=[JobVertex(id="sleep", name="Sleep", invokable="sleep", parallelism=3, config={"seconds": 30})],
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                "restart-strategy.fixed-delay.delay": "0 ms"},
    )  # fmt: skip
    job_id = client.post("/jobs", content=graph.to_json()).json()["jobid"]
    while True:
        subtasks = client.get(f"/jobs/{job_id}/vertices/sleep").json()["subtasks"]
        if all(s["status"] == "RUNNING" for s in subtasks):
            break
        time.sleep(0.02)
    victim_id = subtasks[0]["taskmanager-id"]
    victim = next(tm for tm in cluster.taskmanagers if tm.name.endswith(victim_id))
    killed = time.monotonic()
    victim.kill()
    detected = resumed = None
    while resumed is None:
        now = time.monotonic() - killed
        if detected is None and victim_id not in {t["id"] for t in client.get("/taskmanagers").json()["taskmanagers"]}:
            detected = now
        first = client.get(f"/jobs/{job_id}/vertices/sleep").json()["subtasks"][0]
        if first["attempt"] >= 1 and first["status"] == "RUNNING":
            resumed = now
        if now > 120:
            raise TimeoutError("the subtask did not resume within 120 s")
        time.sleep(0.01)
    client.patch(f"/jobs/{job_id}", params={"mode": "cancel"})
    cluster.start_taskmanager(f"spare-{int(killed)}", **{"taskmanager.numberOfTaskSlots": 1})
    return detected or resumed, resumed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--heartbeat-timeout", default="50 s", help="Flink's default is 50 s")
    args = parser.parse_args()
    properties = {"heartbeat.interval": "10 s", "heartbeat.timeout": args.heartbeat_timeout}
    with tempfile.TemporaryDirectory() as work_dir, StandaloneCluster(Path(work_dir), properties=properties) as cluster:
        cluster.start(taskmanagers=4, slots=1)
        with httpx.Client(base_url=cluster.rest_url, timeout=30) as client:
            results = [trial(cluster, client) for _ in range(args.trials)]
    detected = [d for d, _ in results]
    resumed = [r for _, r in results]
    print(
        f"killed TaskManager (SIGKILL), heartbeat.timeout {args.heartbeat_timeout}, {args.trials} trials: "
        f"detected after median {statistics.median(detected) * 1000:.0f} ms "
        f"(max {max(detected) * 1000:.0f} ms); subtask RUNNING again after median "
        f"{statistics.median(resumed) * 1000:.0f} ms (max {max(resumed) * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
