"""`make demo`: run the main job on the embedded default cluster and show the result.

Starts a MiniCluster (a JobManager, its REST API and two TaskManagers talking over
loopback), submits a three-vertex JobGraph through the REST API and waits on its
JobStatusChanged events:

    numbers (number-source, 4 subtasks, 16 input splits)
      --hash(key)--> sum (modulo-sum, 3 subtasks)
      --rebalance--> sink (collect-sink, 1 subtask)

then checks the result against a plain Python computation.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner
from flink_runtime.minicluster import MiniCluster

COUNT = 1_000_000
MODULO = 10


def build_job(output_dir: Path) -> JobGraph:
    graph = JobGraph(
        name="modulo sums",
        vertices=[
            JobVertex(
                id="numbers", name="Numbers", invokable="number-source", parallelism=4,
                config={"count": COUNT, "splits": 16, "modulo": MODULO},
            ),
            JobVertex(id="sum", name="Sum per key", invokable="modulo-sum", parallelism=3),
            JobVertex(
                id="sink", name="Collect", invokable="collect-sink", parallelism=1,
                config={"path": str(output_dir)},
            ),
        ],
    )  # fmt: skip
    graph.connect("numbers", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    return graph


def main() -> int:
    work_dir = Path(tempfile.mkdtemp(prefix="flink-runtime-demo-"))
    output_dir = work_dir / "output"
    config = Configuration({"io.tmp.dirs": str(work_dir / "partitions")})
    started = time.monotonic()
    with MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=2) as cluster:
        print(f"MiniCluster up in {time.monotonic() - started:.2f} s: REST API at {cluster.rest_url}")
        with JobClient(cluster.rest_url) as client:
            job_id = client.submit(build_job(output_dir))
            print(f"Submitted job {job_id}")
            final = client.wait(
                job_id,
                timeout=300,
                on_event=lambda event: print(f"  JobStatusChanged {event.old_state.value} -> {event.new_state.value}"),
            )
            details = client.details(job_id)
            for vertex in details["vertices"]:
                print(f"  {vertex['name']:<12} x{vertex['parallelism']}  {vertex['status']}  {vertex['duration']} ms")
            if final.value != "FINISHED":
                print(client.exceptions(job_id)["root-exception"], file=sys.stderr)
                return 1
    records = json.loads((output_dir / "part-0.json").read_text())
    expected = {key: sum(range(key, COUNT, MODULO)) for key in range(MODULO)}
    actual = {record["key"]: record["sum"] for record in records}
    print(f"Job {final.value} in {details['duration']} ms. Sum of n per n % {MODULO} over n < {COUNT:,}:")
    for key in sorted(actual):
        print(f"  {key}: {actual[key]:,}")
    print(f"Output: {output_dir / 'part-0.json'}")
    if actual != expected:
        print("error: result differs from the plain Python computation", file=sys.stderr)
        return 1
    print("Result matches a plain Python computation.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
