"""One word count, three places for the data work: local Spark, a Spark standalone cluster, Spark Connect.

    .venv/bin/python benchmarks/bench_spark_cluster_modes.py [--size 1g] [--files 64] [--runs 2]
        [--modes local,standalone,connect] [--work-dir /tmp/flink-runtime-bench-modes]

The same cluster each time (a JobManager and one TaskManager with 2 slots, real
processes started through the CLI, job parallelism 2) and the same pipeline
(`gen_text.py` text -> explode(split) -> count per word -> Parquet); only where Spark
runs changes:

- local:      the TaskManager's own SparkSession, `spark.master: local[2]`;
- standalone: a Spark master and one worker with 2 cores (`spark.master: spark://...`):
              the TaskManager is the driver, the worker's executor does the work;
- connect:    a Spark Connect server process on `local[2]` (`spark.remote: sc://...`):
              the TaskManager holds only a gRPC client.

Per mode it prints the start-up (cluster and Spark processes until the TaskManager is
registered and the Spark side answers) and each run's submit-to-FINISHED time; run 1
includes the TaskManager's first Spark work (its SparkSession or Connect session), later
runs are warm. The word counts of every mode are compared with each other.
On 2 cores the Spark side's processes compete with the TaskManager's, so this measures
the cost of each mode's extra hops on one host, not the scale-out a real cluster gives.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

from flink_runtime.client import JobClient  # noqa: E402
from flink_runtime.client.local_cluster import StandaloneCluster  # noqa: E402
from flink_runtime.pipeline import Pipeline  # noqa: E402
from tests.helpers.spark_connect import spark_connect_server  # noqa: E402
from tests.helpers.spark_standalone import spark_standalone  # noqa: E402

PROPERTIES = {"heartbeat.interval": "2 s", "heartbeat.timeout": "60 s", "restart-strategy.type": "none"}


def word_count(text: Path, output: Path) -> Pipeline:
    pipeline = Pipeline("word count", parallelism=2)
    (
        pipeline.read_text(str(text / "*.txt"))
        .select("explode(split(value, ' ')) AS word")
        .where("word != ''")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


@contextmanager
def spark_side(mode: str, work: Path) -> Iterator[tuple[dict[str, Any], Any]]:
    """The Spark properties of the mode, and a `ready()` to call once the cluster runs."""
    if mode == "local":
        yield {"spark.master": "local[2]"}, lambda: None
    elif mode == "standalone":
        with spark_standalone(work / "spark", cores=2, memory="4g", wait=False) as spark:
            yield {"spark.master": spark.master_url, "spark.executor.memory": "3g"}, spark.wait_until_ready
    elif mode == "connect":
        with spark_connect_server(work / "connect", cores=2, wait=False) as server:
            yield {"spark.remote": server.url}, server.wait_until_ready
    else:
        raise SystemExit(f"unknown mode {mode!r}: use local, standalone or connect")


def counts(output: Path) -> dict[str, int]:
    table = pq.read_table(output)
    return dict(zip(table.column("word").to_pylist(), table.column("n").to_pylist(), strict=True))


def run_mode(mode: str, text: Path, work: Path, runs: int) -> tuple[float, list[float], dict[str, int]]:
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    with ExitStack() as stack:
        properties, ready = stack.enter_context(spark_side(mode, work))
        cluster = stack.enter_context(StandaloneCluster(work / "cluster", properties={**PROPERTIES, **properties}))
        cluster.start(taskmanagers=1, slots=2)
        ready()
        startup = time.perf_counter() - started
        times = []
        with JobClient(cluster.rest_url, timeout=120) as client:
            for run in range(runs):
                submitted = time.perf_counter()
                job_id = client.submit(word_count(text, work / f"out-{run}").job_graph())
                status = client.wait(job_id, timeout=3600)
                if status.value != "FINISHED":
                    raise SystemExit(f"{mode}: run {run + 1} ended {status.value}: {client.exceptions(job_id)}")
                times.append(time.perf_counter() - submitted)
                print(f"  {mode:<10} run {run + 1}: {times[-1]:7.1f} s", flush=True)
        result = counts(work / f"out-{runs - 1}")
    return startup, times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1g")
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--modes", default="local,standalone,connect")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/flink-runtime-bench-modes"))
    args = parser.parse_args()
    data = args.work_dir / f"data-{args.size}-{args.files}"
    generated = gen_text.generate(data, args.size, files=args.files)
    print(f"data: {data / 'text'} ({gen_text.parse_size(args.size) / 2**20:.0f} MiB in {args.files} files)")
    if generated.get("generated"):
        print("  (generated now)")
    results: dict[str, tuple[float, list[float], dict[str, int]]] = {}
    for mode in args.modes.split(","):
        results[mode] = run_mode(mode, data / "text", args.work_dir / mode, args.runs)
    print()
    print(f"{'mode':<11} {'start-up s':>10}  " + "  ".join(f"{f'run {i + 1} s':>8}" for i in range(args.runs)))
    for mode, (startup, times, _) in results.items():
        print(f"{mode:<11} {startup:10.1f}  " + "  ".join(f"{t:8.1f}" for t in times))
    reference = next(iter(results.values()))[2]
    same = all(result == reference for _, _, result in results.values())
    print(f"\nword counts identical across modes: {same} ({len(reference)} distinct words)")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
