"""A class-data-sharing archive of Spark's classes, so the suite's many JVMs start faster.

Why: nearly every integration test starts processes of its own (JobManagers, TaskManagers,
planners), and each one that touches Spark starts a JVM that loads and verifies some
twenty thousand classes from Spark's jars. On this project's 2-core machines that is the
largest single cost of the suite. The JVM can map those classes from an archive instead
(JDK 13+ "dynamic AppCDS": ``-XX:ArchiveClassesAtExit`` writes it once,
``-XX:SharedArchiveFile`` uses it): measured with farm-bench, a SparkSession start plus
a first aggregation took 19.5 s instead of 35.3 s (median of 6 pairs on a loaded
machine; benchmarks/README.md).

The archive is made once per Java and PySpark version, by one short Spark run, and kept
in the same cache as Flink's CLI (tests/flink_tools.py): ``~/.cache/flink-runtime``. A
file lock makes a second pytest process wait instead of dumping alongside. If the
archive does not match a JVM (another JDK, another classpath) that JVM says nothing and
loads its classes as usual, so a stale archive costs speed, never correctness; this is
a test-suite speed-up only, and the runtime itself does not depend on it.

Run as a script (``make test`` does, before pytest) to make the archive ahead of time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.flink_tools import cache_root

# Quiet on purpose: a JVM whose classpath does not match the archive must not print
# warnings into every log the tests read.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# One representative run: the formats and operators the tests use, so their classes
# (CSV, JSON, Parquet readers and writers, aggregation, join, codegen) are archived.
_WORKLOAD = textwrap.dedent(
    """
    import sys, tempfile
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from flink_runtime.spark.local_filesystem import use_nio_local_filesystem
    # The classpath of the suite's sessions (spark/session.py adds the file system's jar
    # first): an archive serves only JVMs whose classpath starts as its dump's did.
    properties = {"spark.master": "local[1]"}
    use_nio_local_filesystem(properties)
    builder = SparkSession.builder.config("spark.ui.enabled", "false")
    for key, value in {**properties, "spark.driver.extraJavaOptions": sys.argv[1]}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    gateway_process = SparkContext._gateway.proc
    folder = tempfile.mkdtemp()
    frame = spark.createDataFrame([(1, "a", 2.0), (2, "b", 3.0)], "id BIGINT, key STRING, x DOUBLE")
    frame.write.mode("overwrite").csv(folder + "/csv", header=True)
    frame.write.mode("overwrite").json(folder + "/json")
    frame.write.mode("overwrite").parquet(folder + "/parquet")
    csv = spark.read.csv(folder + "/csv", header=True, schema="id BIGINT, key STRING, x DOUBLE")
    totals = csv.groupBy("key").agg({"x": "sum", "id": "count"})
    joined = totals.join(spark.read.json(folder + "/json"), on="key", how="inner")
    joined.selectExpr("key", "explode(split(key, ' ')) AS word").collect()
    spark.read.parquet(folder + "/parquet").orderBy("id").collect()
    spark.sql("SELECT 1 AS one").collect()
    spark.stop()
    # The JVM writes the archive when it exits: close its stdin (it exits on EOF) and wait.
    SparkContext._gateway.shutdown()
    gateway_process.stdin.close()
    gateway_process.wait(timeout=300)
    """
)


def archive_path() -> Path:
    """Where the archive for this Java and PySpark lives (it may not exist yet)."""
    import pyspark

    from flink_runtime.spark.local_filesystem import JAR

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    jar = f"{JAR}:{hashlib.sha256(JAR.read_bytes()).hexdigest() if JAR.exists() else ''}"
    key = hashlib.sha256(f"{java}\n{pyspark.__version__}\n{pyspark.__file__}\n{jar}".encode()).hexdigest()[:16]
    return cache_root() / "spark-cds" / f"spark-{pyspark.__version__}-{key}.jsa"


def java_options() -> str:
    """JVM options that use the archive, made first if missing; "" if it cannot be made."""
    try:
        archive = ensure_archive()
    except (OSError, subprocess.SubprocessError) as error:
        print(f"tests/spark_cds.py: no class-data-sharing archive ({error}); JVMs start without it", file=sys.stderr)
        return ""
    return f"-XX:SharedArchiveFile={archive} {QUIET}"


def ensure_archive() -> Path:
    archive = archive_path()
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest process may be making it now
        if archive.exists():
            return archive
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        options = f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial} {QUIET}"
        subprocess.run(
            [sys.executable, "-c", _WORKLOAD, options],
            check=True,
            capture_output=True,
            timeout=600,
            env={**os.environ, "PYSPARK_SUBMIT_ARGS": "pyspark-shell"},
        )
        if not partial.exists():
            raise OSError(f"the JVM exited without writing {partial}")
        partial.rename(archive)  # complete archives only: a killed dump leaves .partial
    return archive


if __name__ == "__main__":
    print(ensure_archive())
