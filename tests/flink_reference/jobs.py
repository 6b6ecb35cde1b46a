"""The PyFlink programs record.py submits with ``flink run -py jobs.py <kind>``.

Why SQL on datagen: the wheel ships no example jars, and a Table API program with no
Python function runs entirely in Java on the TaskManager (no Python worker), so the
jobs start quickly on a small TaskManager. Kinds:

- ``streaming``: unbounded datagen (20 rows/s) -> GROUP BY k (keyed state) -> blackhole;
  runs until stopped or cancelled, checkpointing at the cluster's interval.
- ``batch``: 1,000 generated rows -> GROUP BY k -> blackhole, in batch mode; finishes.
- ``failing``: a cast of a non-number to INT fails on the first row; restarts twice
  (fixed-delay, 1 s) so the exception history has several entries, then FAILED.

Runs in the client process the CLI starts (``-pyclientexec``), not in the cluster.
"""

from __future__ import annotations

import sys

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(kind: str) -> None:
    batch = kind == "batch"
    settings = EnvironmentSettings.in_batch_mode() if batch else EnvironmentSettings.in_streaming_mode()
    env = TableEnvironment.create(settings)
    config = env.get_config()
    config.set("pipeline.name", f"reference-{kind}")
    config.set("parallelism.default", "1")
    if kind == "failing":
        config.set("restart-strategy.type", "fixed-delay")
        config.set("restart-strategy.fixed-delay.attempts", "2")
        config.set("restart-strategy.fixed-delay.delay", "1 s")
    bounded = "'number-of-rows' = '1000'," if batch else "'rows-per-second' = '20',"
    env.execute_sql(
        f"""CREATE TABLE src (k INT, v DOUBLE) WITH (
              'connector' = 'datagen', {bounded}
              'fields.k.min' = '0', 'fields.k.max' = '9')"""
    )
    env.execute_sql("CREATE TABLE sink (k INT, n BIGINT, total DOUBLE) WITH ('connector' = 'blackhole')")
    if kind == "failing":
        value = "CAST(CONCAT('not a number ', CAST(k AS STRING)) AS INT)"
        query = f"INSERT INTO sink SELECT k, CAST({value} AS BIGINT), v FROM src"
    else:
        query = "INSERT INTO sink SELECT k, COUNT(*), SUM(v) FROM src GROUP BY k"
    result = env.execute_sql(query)
    client = result.get_job_client()
    print(f"submitted job {client.get_job_id() if client else '?'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
