"""Global order and top-N: the runtime's order_by / limit against plain PySpark's orderBy / limit.

    .venv/bin/python benchmarks/bench_order_by.py [--size 200m] [--work-dir /tmp/flink-runtime-bench-order]

The CSV data set of gen_text.py (category, region, amount; 1 MiB files) is sorted by
`amount DESC, category, region` into Parquet, and its top 100 rows in that order are
written, each side in a fresh process of its own (local[2], the runtime's Spark
defaults on both sides):

- plain: spark.read.csv(...).orderBy(...).write.parquet(...), then .limit(100);
- runtime: a MiniCluster of 1 TaskManager x 2 slots, the Pipeline API at parallelism 2:
  read_csv -> order_by -> write_parquet, and read_csv -> order_by -> limit(100) ->
  write_parquet, timed from submit to FINISHED.

Each job runs twice (the second is a warm repeat). Correctness: the runtime's sorted
output, read file by file in subtask order, has the plain output's row count and its
amounts never increase; the top 100 equal plain PySpark's (amount, category, region).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

CORES = 2
SCHEMA = "category STRING, region STRING, amount DOUBLE"
ORDER = ("amount DESC", "category", "region")
TOP = 100
RESULT_PREFIX = "BENCH-RESULT "


def spark_settings() -> dict[str, str]:
    from flink_runtime.spark.session import spark_properties

    return spark_properties({"spark.master": f"local[{CORES}]"})


def run_plain(data: Path, out: Path, runs: int) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: N812

    from flink_runtime.spark.session import acquire_session, release_session

    spark = acquire_session(spark_settings(), default_cores=CORES)
    result: dict[str, Any] = {"runs": []}
    try:
        df = spark.read.csv(str(data), schema=SCHEMA, header=True)
        ordered = df.orderBy(F.col("amount").desc(), "category", "region")
        for run in range(1, runs + 1):
            for job in ("order_by", "top_n"):
                started = time.perf_counter()
                target = ordered if job == "order_by" else ordered.limit(TOP)
                target.write.mode("overwrite").parquet(str(out / job))
                result["runs"].append({"job": job, "run": run, "seconds": time.perf_counter() - started})
        result["rows"] = spark.read.parquet(str(out / "order_by")).count()
        top = spark.read.parquet(str(out / "top_n")).orderBy(F.col("amount").desc(), "category", "region")
        result["top"] = [list(row) for row in top.select("amount", "category", "region").collect()]
    finally:
        release_session()
    return result


def run_runtime(data: Path, out: Path, scratch: Path, runs: int) -> dict[str, Any]:
    from flink_runtime.client.job_client import JobClient
    from flink_runtime.configuration import Configuration
    from flink_runtime.minicluster import MiniCluster
    from flink_runtime.pipeline import Pipeline

    config = Configuration({**spark_settings(), "io.tmp.dirs": str(scratch / "runtime-data")})
    result: dict[str, Any] = {"runs": []}
    cluster_config = {"num_taskmanagers": 1, "slots_per_taskmanager": CORES}
    with MiniCluster(config, **cluster_config) as cluster, JobClient(cluster.rest_url, timeout=60) as client:
        for run in range(1, runs + 1):
            for job in ("order_by", "top_n"):
                p = Pipeline(f"{job} run {run}", parallelism=CORES)
                ordered = p.read_csv(str(data), schema=SCHEMA, header=True).order_by(*ORDER)
                (ordered if job == "order_by" else ordered.limit(TOP)).write_parquet(str(out / job), mode="overwrite")
                started = time.perf_counter()
                job_id = client.submit(p.job_graph())
                status = client.wait(job_id, timeout=3600)
                if status.value != "FINISHED":
                    raise RuntimeError(f"{job}: {client.exceptions(job_id).get('root-exception')}")
                result["runs"].append({"job": job, "run": run, "seconds": time.perf_counter() - started})
    result.update(check_runtime_output(out))
    return result


def check_runtime_output(out: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    files = sorted((out / "order_by").glob("subtask-*.parquet"), key=lambda p: int(p.name.split("-")[1]))
    rows, previous, ordered = 0, float("inf"), True
    for path in files:
        amounts = pq.read_table(path, columns=["amount"]).column("amount").to_pylist()
        for amount in amounts:
            ordered = ordered and amount is not None and amount <= previous
            previous = amount if amount is not None else previous
        rows += len(amounts)
    top_files = sorted((out / "top_n").glob("subtask-*.parquet"))
    top = [
        row for path in top_files for row in pq.read_table(path).select(["amount", "category", "region"]).to_pylist()
    ]
    return {"rows": rows, "amounts_never_increase": ordered, "top": [list(r.values()) for r in top]}


def worker(side: str, args: argparse.Namespace) -> None:
    data, out = Path(args.work_dir) / "data" / "csv", Path(args.work_dir) / f"out-{side}"
    if side == "plain":
        result = run_plain(data, out, args.runs)
    else:
        result = run_runtime(data, out, Path(args.work_dir) / "scratch", args.runs)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="200m")
    parser.add_argument("--work-dir", default="/tmp/flink-runtime-bench-order")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--side", choices=("plain", "runtime"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        worker(args.side, args)
        return
    gen_text.generate(Path(args.work_dir) / "data", args.size, files=max(1, gen_text.parse_size(args.size) >> 20))
    results = {}
    for side in ("plain", "runtime"):
        command = [sys.executable, __file__, "--side", side, "--work-dir", args.work_dir, "--runs", str(args.runs)]
        output = subprocess.run(command, capture_output=True, text=True, check=False)
        line = next((line for line in output.stdout.splitlines() if line.startswith(RESULT_PREFIX)), None)
        if line is None:
            raise SystemExit(f"{side} failed:\n{output.stdout[-3000:]}\n{output.stderr[-3000:]}")
        results[side] = json.loads(line[len(RESULT_PREFIX) :])
    plain, runtime = results["plain"], results["runtime"]
    print(f"{'job':10} {'run':>3} {'plain s':>9} {'runtime s':>10} {'ratio':>6}")
    for mine, theirs in zip(runtime["runs"], plain["runs"], strict=True):
        ratio = mine["seconds"] / theirs["seconds"]
        print(f"{mine['job']:10} {mine['run']:>3} {theirs['seconds']:9.2f} {mine['seconds']:10.2f} {ratio:6.2f}")
    print(
        f"rows: plain {plain['rows']}, runtime {runtime['rows']}; amounts never increase: "
        f"{runtime['amounts_never_increase']}; top {TOP} equal: {runtime['top'] == plain['top']}"
    )
    correct = plain["rows"] == runtime["rows"] and runtime["amounts_never_increase"] and runtime["top"] == plain["top"]
    print("CORRECT" if correct else "WRONG OUTPUT")


if __name__ == "__main__":
    main()
