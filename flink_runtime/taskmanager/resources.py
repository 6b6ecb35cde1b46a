"""What a TaskManager tells the JobManager about itself when it registers: the
resources GET /taskmanagers shows (Flink's TaskManagerInfo), and the total its slots
are carved from (Flink's TaskExecutorResourceSpec)."""

from __future__ import annotations

import psutil

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.taskmanager.spark_session import session_settings


def _spark_heap_bytes(config: Configuration, slots: int) -> int:
    # The heap the session will get: spark.driver.memory, else the local default sized
    # from the slots (spark_session.default_heap_mb), else Spark's 1g.
    settings, _ = session_settings(config, slots)
    try:
        return cfg.parse_size_bytes(settings.get("spark.driver.memory", "1g"), "spark.driver.memory")
    except ValueError:  # Spark refuses it itself when the session starts, with its own message
        return 0


def task_manager_total_resource(config: Configuration, slots: int) -> dict[str, float]:
    """The total its slots share (``RegisterTaskManager.total_resource``): Flink's keys,
    with Flink's default for cores (the slot count) and, for the task heap, the heap of
    the Spark JVM the tasks do their work in."""
    heap = config.get(cfg.TASKMANAGER_TASK_HEAP) or _spark_heap_bytes(config, slots)
    return {
        "cpu_cores": config.get(cfg.TASKMANAGER_CPU_CORES) or float(slots),
        "task_heap_memory_mb": heap / 2**20,
        "managed_memory_mb": config.get(cfg.TASKMANAGER_MANAGED_MEMORY) / 2**20,
    }


def task_manager_resources(config: Configuration, slots: int) -> dict[str, float]:
    """Cores as slots, the machine's memory, this process's memory and its Spark JVM's
    heap (the SparkSession's spark.driver.memory; unset: sized from the slots in local mode)."""
    spark_heap = _spark_heap_bytes(config, slots)
    return {
        "cpu_cores": float(slots),
        "memory_mb": psutil.virtual_memory().total / 2**20,
        "process_mb": psutil.Process().memory_info().rss / 2**20,
        "spark_heap_mb": spark_heap / 2**20,
    }
