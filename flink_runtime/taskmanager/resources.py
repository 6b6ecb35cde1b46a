"""What a TaskManager tells the JobManager about itself when it registers: the
resources GET /taskmanagers shows (Flink's TaskManagerInfo)."""

from __future__ import annotations

import psutil

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration


def task_manager_resources(config: Configuration, slots: int) -> dict[str, float]:
    """Cores as slots, the machine's memory, this process's memory and its Spark JVM's
    heap (the SparkSession's spark.driver.memory; Spark's default 1g when unset)."""
    try:
        spark_heap = cfg.parse_size_bytes(config.to_dict().get("spark.driver.memory", "1g"), "spark.driver.memory")
    except ValueError:  # Spark refuses it itself when the session starts, with its own message
        spark_heap = 0
    return {
        "cpu_cores": float(slots),
        "memory_mb": psutil.virtual_memory().total / 2**20,
        "process_mb": psutil.Process().memory_info().rss / 2**20,
        "spark_heap_mb": spark_heap / 2**20,
    }
