"""JDBC read and write rows/s: the runtime's read_jdbc / write_jdbc against plain PySpark's
spark.read.jdbc / df.write.jdbc on the same PostgreSQL table.

    .venv/bin/python benchmarks/bench_jdbc.py [--rows 1000000] [--splits 4] [--runs 2]

A private PostgreSQL server (tests/helpers/postgres.py, Debian's postgresql) holds
`orders` (id, customer, amount, day: --rows rows). Both sides run Spark local[2] with
the runtime's Spark defaults and Debian's JDBC driver jar:

- plain PySpark, one SparkSession: read = spark.read.jdbc(column="id", numPartitions=
  --splits) written to Parquet; write = that Parquet written by df.write.jdbc (mode
  append, Spark's default batch size) into a new table;
- the runtime, a MiniCluster of 1 TaskManager x 2 slots: read = read_jdbc(
  partition_column="id", splits=--splits) -> write_parquet; write = read_parquet ->
  write_jdbc(mode="append"): per-attempt staging tables, then the publishing
  transaction (INSERT ... SELECT) at FINISHED, all inside the timed submit -> FINISHED.

Each side does a small warm-up first (JVM and planner started, driver loaded), then
--runs timed runs; the figure is rows / wall seconds of the best run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402

from flink_runtime.client import JobClient  # noqa: E402
from flink_runtime.configuration import Configuration  # noqa: E402
from flink_runtime.minicluster import MiniCluster  # noqa: E402
from flink_runtime.pipeline import Pipeline  # noqa: E402
from flink_runtime.spark.session import spark_properties  # noqa: E402
from tests.helpers.postgres import postgres_server  # noqa: E402

SECRET = "secret://bench-pg"


def fill(conninfo: str, rows: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS orders")
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, customer text, amount bigint, day date)")
        conn.execute(
            "INSERT INTO orders SELECT i, 'customer-' || (i %% 1000), i * 7 %% 10007, "
            "date '2026-01-01' + (i %% 365)::int FROM generate_series(1, %s) AS i",
            (rows,),
        )
        conn.execute("ANALYZE orders")


def count(conninfo: str, table: str) -> int:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def drop(conninfo: str, table: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def plain_pyspark(
    url: str, conninfo: str, rows: int, splits: int, runs: int, work: Path, tuned: bool = False
) -> tuple[float, float]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]")
    for key, value in spark_properties({}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    properties = {"user": "postgres", "driver": "org.postgresql.Driver"}
    write_url = url
    if tuned:  # the options the runtime's JDBC source and sink set (operators/spark/jdbc.py)
        properties.update({"fetchsize": "10000", "batchsize": "10000"})
        write_url = f"{url}?reWriteBatchedInserts=true"
    try:
        spark.read.jdbc(url, "(SELECT * FROM orders WHERE id <= 1000) AS w", properties=properties).count()
        reads, writes = [], []
        for run in range(runs):
            out = str(work / f"plain-{run}")
            started = time.monotonic()
            df = spark.read.jdbc(
                url, "orders", column="id", lowerBound=1, upperBound=rows, numPartitions=splits, properties=properties
            )
            df.write.mode("overwrite").parquet(out)
            reads.append(time.monotonic() - started)
            drop(conninfo, "plain_copy")
            started = time.monotonic()
            spark.read.parquet(out).write.jdbc(write_url, "plain_copy", mode="append", properties=properties)
            writes.append(time.monotonic() - started)
            assert count(conninfo, "plain_copy") == rows
        return min(reads), min(writes)
    finally:
        spark.stop()


def runtime(url: str, conninfo: str, rows: int, splits: int, runs: int, work: Path) -> tuple[float, float]:
    os.environ["FLINK_SECRET_BENCH_PG"] = "unused-by-a-trusting-server"
    config = Configuration({"io.tmp.dirs": str(work / "cluster")})
    reads, writes = [], []
    with (
        MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster,
        JobClient(cluster.rest_url) as client,
    ):

        def run_job(pipeline: Pipeline) -> float:
            started = time.monotonic()
            job_id = client.submit(pipeline.job_graph())
            status = client.wait(job_id, timeout=3600)
            assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
            return time.monotonic() - started

        warm = Pipeline("warm-up", parallelism=2)
        warm.read_jdbc(
            url, query="SELECT * FROM orders WHERE id <= 1000", user="postgres", password=SECRET
        ).write_parquet(str(work / "warm"), mode="overwrite")
        run_job(warm)
        for run in range(runs):
            out = str(work / f"runtime-{run}")
            read = Pipeline("jdbc read", parallelism=2)
            read.read_jdbc(
                url,
                table="orders",
                user="postgres",
                password=SECRET,
                partition_column="id",
                lower=1,
                upper=rows,
                splits=splits,
            ).write_parquet(out, mode="overwrite")
            reads.append(run_job(read))
            drop(conninfo, "runtime_copy")
            write = Pipeline("jdbc write", parallelism=2)
            write.read_parquet(out).write_jdbc(url, "runtime_copy", mode="append", user="postgres", password=SECRET)
            writes.append(run_job(write))
            assert count(conninfo, "runtime_copy") == rows
    return min(reads), min(writes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--tuned-plain-only",
        action="store_true",
        help="only plain PySpark, with the runtime's JDBC options (fetchsize, batchsize, reWriteBatchedInserts)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flink-runtime-bench-jdbc-"))
    try:
        with postgres_server() as server:
            name = server.new_database("bench").rsplit("/", 1)[-1]
            conninfo = f"host=127.0.0.1 port={server.port} user=postgres dbname={name}"
            url = f"jdbc:postgresql://127.0.0.1:{server.port}/{name}"
            started = time.monotonic()
            fill(conninfo, args.rows)
            print(f"filled orders with {args.rows:,} rows in {time.monotonic() - started:.1f} s")
            plain = plain_pyspark(url, conninfo, args.rows, args.splits, args.runs, work, args.tuned_plain_only)
            print(f"plain PySpark: read {plain[0]:.1f} s, write {plain[1]:.1f} s", flush=True)
            if args.tuned_plain_only:
                read_rate, write_rate = args.rows / plain[0], args.rows / plain[1]
                print(f"tuned plain PySpark: read {read_rate:,.0f} rows/s, write {write_rate:,.0f} rows/s")
                return
            ours = runtime(url, conninfo, args.rows, args.splits, args.runs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| figure | plain PySpark | flink-runtime | ratio |\n|---|---|---|---|")
    for label, plain_s, ours_s in [
        ("read (JDBC -> Parquet)", plain[0], ours[0]),
        ("write (Parquet -> JDBC)", plain[1], ours[1]),
    ]:
        print(
            f"| {label} | {args.rows / plain_s:,.0f} rows/s ({plain_s:.1f} s) | "
            f"{args.rows / ours_s:,.0f} rows/s ({ours_s:.1f} s) | {plain_s / ours_s:.2f} |"
        )


if __name__ == "__main__":
    main()
