"""One SparkSession start and a first aggregation, timed: what every test JVM pays.

    .venv/bin/python benchmarks/bench_spark_startup.py ["EXTRA JVM OPTIONS"]

Prints the session start and the first query's time. Paired with farm-bench, it
measures the class-data-sharing archive the test suite uses (tests/spark_cds.py):

    A=$(.venv/bin/python -m tests.spark_cds)   # the archive, made once
    farm-bench -n 6 --timeout 600 --vs ".venv/bin/python benchmarks/bench_spark_startup.py" -- \
        .venv/bin/python benchmarks/bench_spark_startup.py "-XX:SharedArchiveFile=$A -Xlog:cds=off"
"""

from __future__ import annotations

import sys
import time

started = time.monotonic()
from pyspark.sql import SparkSession  # noqa: E402  (its import is part of what is timed)

options = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 " + (sys.argv[1] if len(sys.argv) > 1 else "")
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.extraJavaOptions", options)
    .getOrCreate()
)
session = time.monotonic()
spark.createDataFrame([(1, "a"), (2, "b")], "x INT, y STRING").groupBy("y").count().collect()
query = time.monotonic()
spark.stop()
print(f"session {session - started:.2f} s, first query {query - session:.2f} s", file=sys.stderr)
