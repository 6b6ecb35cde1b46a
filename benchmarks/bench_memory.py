"""Resident memory of a standalone JobManager and its planner, and what a job waits for.

Starts a JobManager and one TaskManager as processes (flink-runtime CLI, the cluster's
own defaults: no test settings) and prints the resident set size (RSS) of

- the JobManager process,
- its planner process(es) (Python children of the JobManager),
- the planner's JVM (a java process under the planner),

and, on a line of its own, the TaskManager's (its Python process and its Spark JVM: it
resolves the planner's Spark plans while the planner has no JVM, planner/remote_plan.py),
four times: before any job, after a no-op job, after a small Spark job (a word count
over one generated text file, whose plan check needs Spark), and once the planner has
been idle for `jobmanager.planner.idle-timeout` (`--idle-timeout`, default 30 s here) and
was replaced by a fresh one without a JVM. It also prints how long each job took from
POST /jobs to FINISHED.

Target: JobManager + planner (with its JVM) <= 300 MB.

    .venv/bin/python benchmarks/bench_memory.py [--settle 20] [--idle-timeout 30] [-D key=value ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

from flink_runtime.client.job_client import JobClient  # noqa: E402
from flink_runtime.client.local_cluster import StandaloneCluster  # noqa: E402
from flink_runtime.jobgraph import JobGraph, JobVertex  # noqa: E402

MB = 2**20


def rss(pid: int) -> dict[str, float]:
    """MB of the JobManager, its Python children (the planner) and their JVMs."""
    jobmanager = psutil.Process(pid)
    planner = jvm = 0.0
    for child in jobmanager.children(recursive=True):
        try:
            size = child.memory_info().rss / MB
            if "java" in child.name():
                jvm += size
            else:
                planner += size
        except psutil.NoSuchProcess:
            continue
    own = jobmanager.memory_info().rss / MB
    return {"jobmanager": own, "planner": planner, "planner_jvm": jvm, "total": own + planner + jvm}


def taskmanager_rss(pid: int) -> str:
    """The TaskManager's Python process and its JVM(s), in MB, as a line of its own."""
    process = psutil.Process(pid)
    jvm = sum(c.memory_info().rss for c in process.children(recursive=True) if "java" in c.name()) / MB
    own = process.memory_info().rss / MB
    return f"{'':<22} TaskManager {own:5.0f} MB  its JVM {jvm:6.0f} MB  total {own + jvm:6.0f} MB"


def show(stage: str, sizes: dict[str, float], seconds: float | None = None, taskmanager: int | None = None) -> None:
    took = f"  job took {seconds:5.2f} s" if seconds is not None else ""
    print(
        f"{stage:<22} JobManager {sizes['jobmanager']:6.0f} MB  planner {sizes['planner']:6.0f} MB  "
        f"planner JVM {sizes['planner_jvm']:6.0f} MB  total {sizes['total']:6.0f} MB "
        f"(target <= 300: {'PASS' if sizes['total'] <= 300 else 'FAIL'}){took}",
        flush=True,
    )
    if taskmanager is not None:
        print(taskmanager_rss(taskmanager), flush=True)


def run(client: JobClient, graph: JobGraph) -> float:
    started = time.perf_counter()
    job_id = client.submit(graph)
    status = client.wait(job_id, timeout=600)
    if status.value != "FINISHED":
        raise RuntimeError(f"{graph.name} ended {status.value}: {client.exceptions(job_id).get('root-exception')}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait before the first sample")
    parser.add_argument("-D", dest="properties", action="append", default=[], help="key=value for every process")
    parser.add_argument("--idle-timeout", type=float, default=30.0, help="jobmanager.planner.idle-timeout in seconds")
    args = parser.parse_args()
    properties = {"jobmanager.planner.idle-timeout": f"{args.idle_timeout:g} s"}
    properties.update(item.split("=", 1) for item in args.properties)

    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        gen_text.generate(work / "data", 1 * MB, files=1)
        text = work / "data" / "text"
        with StandaloneCluster(work / "cluster", properties=properties) as cluster:
            cluster.start(taskmanagers=1, slots=2)
            assert cluster.jobmanager is not None
            pid = cluster.jobmanager.pid
            tm = cluster.taskmanagers[0].pid
            # The planner's warm-up (if any) runs in the background after "ready".
            time.sleep(args.settle)
            show("before any job", rss(pid), taskmanager=tm)
            with JobClient(cluster.rest_url, timeout=60) as client:
                noop = JobGraph(name="noop", vertices=[JobVertex(id="noop", name="NoOp", invokable="noop")])
                seconds = run(client, noop)
                show("after a no-op job", rss(pid), seconds, tm)

                from flink_runtime.pipeline import Pipeline

                p = Pipeline("memory word count", parallelism=1)
                words = p.read_text(str(text)).select("explode(split(value, ' ')) AS word").filter("word != ''")
                words.key_by("word").agg("count(*) AS count").write_parquet(str(work / "out"), mode="overwrite")
                seconds = run(client, p.job_graph())
                show("after a Spark job", rss(pid), seconds, tm)
                time.sleep(args.idle_timeout + 10)  # the replacement starts without a JVM
                show("planner idle", rss(pid), taskmanager=tm)


if __name__ == "__main__":
    main()
