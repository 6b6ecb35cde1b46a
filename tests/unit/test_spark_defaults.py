"""The driver JVM settings a session gets when the configuration leaves them open
(spark/session.py): the collector by the number of task threads, the user's own kept."""

from __future__ import annotations

from flink_runtime.spark.session import local_cores, spark_properties

KEY = "spark.driver.extraJavaOptions"


def test_task_threads_sharing_the_heap_get_the_parallel_collector() -> None:
    assert spark_properties({"spark.master": "local[2]"})[KEY] == "-XX:+UseParallelGC"
    assert spark_properties({"spark.master": "local[*]"})[KEY] == "-XX:+UseParallelGC"
    assert spark_properties({"spark.master": "spark://host:7077"})[KEY] == "-XX:+UseParallelGC"


def test_one_core_gets_the_serial_collector() -> None:
    assert spark_properties({"spark.master": "local[1]"})[KEY] == "-XX:+UseSerialGC"
    assert spark_properties({"spark.master": "local"})[KEY] == "-XX:+UseSerialGC"


def test_the_users_options_are_kept_whole() -> None:
    assert spark_properties({"spark.master": "local[4]", KEY: "-XX:+UseG1GC -Xss4m"})[KEY] == "-XX:+UseG1GC -Xss4m"


def test_local_cores_reads_every_local_master() -> None:
    assert [local_cores(m) for m in ("local", "local[3]", "local[2,4]", "yarn", "local[x]")] == [1, 3, 2, None, None]
