"""A small split's Spark work, with and without its shuffle, alternating in one process.

    cd /tmp && PYTHONPATH=<checkout> .venv/bin/python benchmarks/bench_small_split.py TEXT_FILE [--rounds 16]
    cd /tmp && PYTHONPATH=<checkout> .venv/bin/python benchmarks/bench_small_split.py --plan-check TEXT_FILE
    cd /tmp && PYTHONPATH=<checkout> .venv/bin/python benchmarks/bench_small_split.py --phases TEXT_FILE

Default: the Spark calls of a 1 MB word count's two subtasks (operators/spark/task.py),
in a child session with adaptive execution off on `local[2]`: the source's (text read,
partial count, a row-count observation, the exchange's Parquet write split into
subpartition folders) and a final subtask's (its subpartition read with a schema,
merged in one partition, the sink's write). `shuffle` reads the split as Spark cuts it
(the partial aggregate shuffles), `one-partition` reads it in one partition (task.py
`small_split_in_one_partition`). The two alternate, round after round, so a shared
machine's load falls on both; reported: the median wall of each subtask's part and the
CPU of this process tree per round (steadier under load).

--phases: where each Spark action's wall goes, from Spark's own event log (not
compressed, read at the end): the driver before the job (building the DataFrame through
py4j, Spark's planning, the write's set-up), the job(s), and the driver after (the
commit), for the source's write, a final subtask's read-merge-write, and plain PySpark's
whole word count (adaptive execution on, as its defaults).

--plan-check: the JobManager's plan check of both vertices (plan.resolve_vertex) on
`local[1]`, alternating `createDataFrame([])` and spark/frames.py's empty_frame (built in
the JVM) for its empty DataFrames.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import tree_cpu_seconds  # noqa: E402 - benchmarks/ is not a package


def _observation() -> Any:
    from pyspark.sql.observation import Observation

    observation = object.__new__(Observation)
    observation.__init__()
    return observation


def one_round(spark: Any, text: str, work: str, one_partition: bool) -> tuple[float, float, float]:
    """(source s, final s, CPU s) of one word count's two subtasks."""
    from pyspark.sql import functions as F  # noqa: N812

    shutil.rmtree(work, ignore_errors=True)
    cpu, started = tree_cpu_seconds(), time.perf_counter()
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    lines = session.read.text(text)
    if one_partition:
        lines = lines.coalesce(1)
    words = lines.selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
    partials = words.groupBy("word").agg(F.count(F.lit(1)).alias("n"))
    observation = _observation()
    observed = partials.observe(observation, F.count(F.lit(1)).alias("rows"))
    subpartition = F.pmod(F.hash(F.col("word")), F.lit(2))
    observed.withColumn("__sub", subpartition).write.mode("append").partitionBy("__sub").parquet(f"{work}/exchange")
    observation.get  # noqa: B018 - waits for the count, as the task does
    source_done = time.perf_counter()
    files = glob.glob(f"{work}/exchange/__sub=0/*.parquet")
    merged = session.read.schema(partials.schema).parquet(*files).coalesce(1)
    observation = _observation()
    counts = merged.groupBy("word").agg(F.sum("n").alias("n")).observe(observation, F.count(F.lit(1)).alias("rows"))
    counts.write.mode("append").format("parquet").save(f"{work}/sink")
    observation.get  # noqa: B018
    ended = time.perf_counter()
    shutil.rmtree(work, ignore_errors=True)
    return source_done - started, ended - source_done, tree_cpu_seconds() - cpu


def bench_split(text: str, rounds: int) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    work = tempfile.mkdtemp(prefix="bench-small-split-")
    variants = {"shuffle": False, "one-partition": True}
    for name, one_partition in variants.items():  # warm-up: code generation of both shapes
        for _ in range(3):
            one_round(spark, text, f"{work}/{name}", one_partition)
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for index in range(rounds):
        for name in list(variants) if index % 2 == 0 else list(variants)[::-1]:
            results[name].append(one_round(spark, text, f"{work}/{name}", variants[name]))
    for name, rows in results.items():
        source, final, cpu = (statistics.median(row[i] for row in rows) * 1000 for i in range(3))
        print(f"{name:14s} source {source:6.0f} ms  final {final:6.0f} ms  CPU {cpu:6.0f} ms  ({len(rows)} rounds)")
    shutil.rmtree(work, ignore_errors=True)


def bench_phases(text: str, rounds: int) -> None:
    import json

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    events = tempfile.mkdtemp(prefix="bench-small-split-events-")
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", events)
        .config("spark.eventLog.compress", "false")
        .getOrCreate()
    )
    work = tempfile.mkdtemp(prefix="bench-small-split-")

    def partials(session: Any) -> Any:
        lines = session.read.text(text).coalesce(1)
        words = lines.selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
        return words.groupBy("word").agg(F.count(F.lit(1)).alias("n"))

    def source(session: Any) -> None:
        sub = F.pmod(F.hash(F.col("word")), F.lit(2))
        partials(session).withColumn("__sub", sub).write.mode("append").partitionBy("__sub").parquet(f"{work}/exchange")

    def final(session: Any) -> None:
        files = glob.glob(f"{work}/exchange/__sub=0/*.parquet")[:1]
        merged = session.read.schema("word string, n long").parquet(*files).coalesce(1)
        merged.groupBy("word").agg(F.sum("n").alias("n")).write.mode("append").parquet(f"{work}/sink")

    def plain(session: Any) -> None:
        words = session.read.text(text).selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
        words.groupBy("word").count().write.mode("overwrite").parquet(f"{work}/plain")

    actions = {"source": source, "final": final, "plain": plain}
    spans: dict[str, list[tuple[float, float]]] = {name: [] for name in actions}
    for _ in range(rounds + 3):
        shutil.rmtree(f"{work}/exchange", ignore_errors=True)
        shutil.rmtree(f"{work}/sink", ignore_errors=True)
        for name, action in actions.items():
            session = spark.newSession()
            session.conf.set("spark.sql.adaptive.enabled", "true" if name == "plain" else "false")
            started = time.time()
            action(session)
            spans[name].append((started, time.time()))
    spark.stop()
    jobs: dict[int, dict[str, float]] = {}
    for path in glob.glob(f"{events}/**/*", recursive=True):
        if os.path.isfile(path):
            for line in open(path):  # noqa: SIM115 - read once, at the end
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart":
                    jobs[event["Job ID"]] = {"start": event["Submission Time"] / 1000}
                elif event["Event"] == "SparkListenerJobEnd":
                    jobs[event["Job ID"]]["end"] = event["Completion Time"] / 1000
    for name, measured in spans.items():
        rows = []
        for started, ended in measured[3:]:  # after the warm-up rounds
            inside = [job for job in jobs.values() if started <= job["start"] <= ended]
            rows.append(
                (
                    (ended - started) * 1000,
                    (inside[0]["start"] - started) * 1000,
                    sum(job["end"] - job["start"] for job in inside) * 1000,
                    (ended - inside[-1]["end"]) * 1000,
                    len(inside),
                )
            )
        total, before, in_jobs, after, count = (statistics.median(row[i] for row in rows) for i in range(5))
        print(
            f"{name:7s} wall {total:5.0f} ms: driver before the job {before:4.0f}, {count:.0f} Spark job(s) "
            f"{in_jobs:4.0f}, driver after {after:3.0f} ({len(rows)} rounds)"
        )
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(events, ignore_errors=True)


def bench_plan_check(text: str, rounds: int) -> None:
    from pyspark.sql import SparkSession

    from flink_runtime.operators.spark import plan
    from flink_runtime.pipeline import Pipeline
    from flink_runtime.spark.frames import empty_frame

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    pipeline = Pipeline("word count", parallelism=2)
    words = pipeline.read_text(text).select("explode(split(value, ' ')) AS word").filter("word != ''")
    words.key_by("word").agg("count(*) AS count").write_parquet(tempfile.mkdtemp(), mode="overwrite")
    source, final = pipeline.job_graph().vertices
    variants = {"createDataFrame": lambda s, schema: s.createDataFrame([], schema), "jvm": empty_frame}
    results: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds + 4):
        for name in list(variants) if index % 2 == 0 else list(variants)[::-1]:
            plan.empty_frame = variants[name]  # type: ignore[assignment]
            started = time.perf_counter()
            _, output = plan.resolve_vertex(spark, source.config, [], [text])
            plan.resolve_vertex(spark, final.config, [output], [])
            if index >= 4:
                results[name].append((time.perf_counter() - started) * 1000)
    plan.empty_frame = empty_frame
    for name, times in results.items():
        print(f"{name:16s} plan check of both vertices: median {statistics.median(times):.0f} ms ({len(times)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", help="a text file (e.g. bench_peers' 1 MB data: data-1m/text/part-00000.txt)")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--plan-check", action="store_true")
    parser.add_argument("--phases", action="store_true", help="each Spark action's wall, from Spark's event log")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bench = bench_plan_check if args.plan_check else bench_phases if args.phases else bench_split
    bench(args.text, args.rounds)
    sys.stdout.flush()
    os._exit(0)  # skip py4j's finalizers (bench_spark.worker_main)


if __name__ == "__main__":
    main()
