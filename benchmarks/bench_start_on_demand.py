"""How long a job waits for TaskManagers the JobManager starts for it.

    .venv/bin/python benchmarks/bench_start_on_demand.py [--runs 3] [--slots 3] [--spark]
        [--driver process|docker] [--work-dir /tmp/flink-runtime-bench-rm]

A standalone JobManager with `resourcemanager.driver: process` (or `docker`: containers
of flink-runtime:0.1.0, which `make docker-image` builds; the work dir is mounted into
them at the same path), no TaskManager and a
warm planner runs a job needing `--slots` slots (TaskManagers of 1 slot) `--runs` times,
waiting each time until the TaskManagers of the run before stopped idle
(resourcemanager.taskmanager-timeout 2 s). From the JobManager's log: submission ->
first TaskManager started -> first registered, and the submission -> job FINISHED time
the client sees (the job's tiny tasks need not wait for every TaskManager).

--spark: the job is a Pipeline word count over a small text (parallelism `--slots`), whose
plan needs Spark, and the planner is cold at every run (jobmanager.planner.idle-timeout
1 s replaces a planner that started a JVM): the figures then include the Spark JVM starts
the job waits for, the planner's (if it starts one) and the TaskManagers'.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from flink_runtime.client import JobClient  # noqa: E402
from flink_runtime.client.local_cluster import StandaloneCluster  # noqa: E402
from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner  # noqa: E402

_STAMP = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(Received JobGraph submission '(?P<job>[^']+)'|"
    r"Starting TaskManager (?P<start>\S+)|Registered TaskManager (?P<reg>\S+))"
)


def job(slots: int, out: Path, name: str) -> JobGraph:
    graph = JobGraph(
        name=name,
        vertices=[
            JobVertex(id="src", name="Numbers", invokable="number-source", parallelism=slots, config={"count": 3000}),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=slots),
            JobVertex(id="sink", name="Sink", invokable="collect-sink", config={"path": str(out)}),
        ],
    )
    graph.connect("src", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    return graph


def word_count(slots: int, text: Path, out: Path, name: str) -> JobGraph:
    from flink_runtime.pipeline import Pipeline

    pipeline = Pipeline(name, parallelism=slots)
    words = pipeline.read_text(str(text)).select("explode(split(value, ' ')) AS word").filter("word != ''")
    words.key_by("word").agg("count(*) AS n").write_parquet(str(out), mode="overwrite")
    return pipeline.job_graph()


def timeline(log: str, name: str) -> dict[str, float]:
    """Seconds from the submission of job `name` to its first start and registrations."""
    marks: dict[str, float] = {}
    registered: list[float] = []
    started = False
    for line in log.splitlines():
        match = _STAMP.match(line)
        if match is None:
            continue
        at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if match["job"] == name:
            marks["submitted"], started = at, True
        elif started and match["start"] and "first start" not in marks:
            marks["first start"] = at
        elif started and match["reg"]:
            registered.append(at)
    base = marks.pop("submitted")
    result = {key: value - base for key, value in marks.items()}
    result["first registered"] = registered[0] - base
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--driver", choices=("process", "docker"), default="process")
    parser.add_argument("--spark", action="store_true", help="a Spark word count, the planner cold each run")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/flink-runtime-bench-rm"))
    args = parser.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    properties: dict[str, object] = {
        "resourcemanager.driver": args.driver,
        "taskmanager.numberOfTaskSlots": 1,
        "resourcemanager.taskmanager-timeout": "2 s",
        "heartbeat.interval": "500 ms",
        "rest.submit.wait-timeout": "100 ms",
    }
    if args.driver == "docker":
        shared = args.work_dir / "shared"
        shared.mkdir(parents=True)
        shared.chmod(0o777)  # the image runs as uid 50000
        properties |= {
            "resourcemanager.docker.volumes": f"{shared}:{shared}",
            "io.tmp.dirs": str(shared / "data"),
            "high-availability.cluster-id": "bench-start-on-demand",
        }
        outputs = shared
    else:
        outputs = args.work_dir
    if args.spark:
        properties["jobmanager.planner.idle-timeout"] = "1 s"
        text = outputs / "text"
        text.mkdir(parents=True, exist_ok=True)
        (text / "part-0.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 2000)
    rows: list[dict[str, float]] = []
    with StandaloneCluster(args.work_dir, properties=properties) as cluster:
        cluster.start_jobmanager()
        with JobClient(cluster.rest_url, timeout=120) as client:
            # Warm the planner (its SparkSession start is not what is measured).
            client.wait(client.submit(job(1, outputs / "warm", "warm-up")), timeout=300)
            for run in range(args.runs):
                while httpx.get(f"{cluster.rest_url}/taskmanagers", timeout=5).json()["taskmanagers"]:
                    time.sleep(0.2)  # the TaskManagers of the run before stopped idle
                name = f"run-{run}"
                submitted = time.monotonic()
                graph = (
                    word_count(args.slots, text, outputs / name, name)
                    if args.spark
                    else job(args.slots, outputs / name, name)
                )
                state = client.wait(client.submit(graph), timeout=300)
                row = timeline(cluster.jobmanager.log() if cluster.jobmanager else "", name)
                row["finished"] = time.monotonic() - submitted
                rows.append(row)
                print(f"run {run}: {state.value} " + ", ".join(f"{k} {v:.2f} s" for k, v in row.items()), flush=True)
    for key in rows[0]:
        values = [row[key] for row in rows]
        print(f"{key:>16}: median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
