"""What counting records costs a Spark task: a Parquet write with and without the
Observation that gives the runtime its numRecordsOut (operators/spark/task.py `_counted`).

    .venv/bin/python benchmarks/bench_io_metrics.py [--rows 20000000] [--runs 5]

One SparkSession (local[2], the runtime's defaults); the same DataFrame
(`spark.range(rows)` with a key and a string column, grouped into one row per key:
the shape of a sink write after a keyed aggregation, and a plain projection) is
written to Parquet `--runs` times each way, alternating (and swapping which goes first)
so drift and garbage collection hit both alike. The
counted side also reads the count, as the task does after the write. Prints the median
and minimum of each and the overhead of counting (median counted / median plain - 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flink_runtime.operators.spark.task import _counted  # noqa: E402
from flink_runtime.spark.session import acquire_session, release_session  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def timed_write(df: DataFrame, path: str, count: bool) -> tuple[float, int | None]:
    """Seconds to write `df` as Parquet, counting its rows as a task does if `count`."""
    started = time.perf_counter()
    if not count:
        df.write.mode("overwrite").parquet(path)
        return time.perf_counter() - started, None
    observed, rows = _counted(df)
    observed.write.mode("overwrite").parquet(path)
    return time.perf_counter() - started, rows()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    spark = acquire_session({"spark.master": "local[2]"}, default_cores=2)
    try:
        rows = spark.range(args.rows).selectExpr("id", "id % 1000 AS key", "cast(id * 7 AS string) AS text")
        shapes = {
            "projection": rows,
            "aggregation": rows.groupBy("key").count(),
        }
        print(f"{args.rows:,} rows, {args.runs} runs each way, local[2]")
        with tempfile.TemporaryDirectory(prefix="bench-io-metrics-") as work:
            for shape, df in shapes.items():
                df.write.mode("overwrite").parquet(f"{work}/warm")  # JIT and caches, counted by neither
                plain: list[float] = []
                counted: list[float] = []
                counts: set[int] = set()

                for run in range(args.runs):
                    # Each goes first every other run: the second of a pair pays the first's garbage.
                    for count in (False, True) if run % 2 == 0 else (True, False):
                        seconds, rows_counted = timed_write(df, f"{work}/out-{count}", count)
                        (counted if count else plain).append(seconds)
                        if rows_counted is not None:
                            counts.add(rows_counted)
                overhead = statistics.median(counted) / statistics.median(plain) - 1
                print(
                    f"{shape:12} plain median {statistics.median(plain):6.2f} s (min {min(plain):.2f})"
                    f"  counted median {statistics.median(counted):6.2f} s (min {min(counted):.2f})"
                    f"  overhead {overhead:+.1%}  rows counted {sorted(counts)}"
                )
    finally:
        release_session()


if __name__ == "__main__":
    main()
