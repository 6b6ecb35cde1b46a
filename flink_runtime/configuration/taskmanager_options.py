"""Options of a TaskManager and its tasks (Flink's TaskManagerOptions,
TaskManagerOptions.TASK_CANCELLATION_*, NettyShuffleEnvironmentOptions)."""

from __future__ import annotations

from flink_runtime.configuration.option import (
    BOOLEAN,
    DURATION,
    FLOAT,
    INTEGER,
    MEMORY_SIZE,
    STRING,
    ConfigOption,
    choice,
)


class TaskManagerOptions:
    TITLE = "TaskManager"

    HOST = ConfigOption("taskmanager.host", STRING, "127.0.0.1", "Host the TaskManager's RPC binds to.")
    RPC_PORT = ConfigOption(
        "taskmanager.rpc.port",
        INTEGER,
        0,
        "TaskManager RPC port (0 picks a free one). In a MiniCluster the i-th TaskManager takes this port + i.",
    )
    RESOURCE_ID = ConfigOption("taskmanager.resource-id", STRING, "", "TaskManager id; generated when empty.")
    NUM_TASK_SLOTS = ConfigOption(
        "taskmanager.numberOfTaskSlots", INTEGER, 0, "Slots a TaskManager offers (0: its CPU count)."
    )
    CPU_CORES = ConfigOption(
        "taskmanager.cpu.cores",
        FLOAT,
        0.0,
        "CPU cores the TaskManager offers its slots in total (fractions allowed). 0: "
        "taskmanager.numberOfTaskSlots, as in Flink. Slot requests of vertices with resources are "
        "carved from it (fine-grained resource management).",
    )
    TASK_HEAP_MEMORY = ConfigOption(
        "taskmanager.memory.task.heap.size",
        MEMORY_SIZE,
        "0",
        "Task heap the TaskManager offers its slots in total: the heap of the Spark JVM its tasks share. "
        "0: spark.driver.memory (Spark's 1g when unset).",
    )
    MANAGED_MEMORY = ConfigOption(
        "taskmanager.memory.managed.size",
        MEMORY_SIZE,
        "0",
        "Managed memory the TaskManager offers its slots in total, for vertices that ask for it "
        "(managed_memory_mb): booked by the slot pool like cores and heap, not enforced inside a task. "
        "0: none (Flink derives a default from taskmanager.memory.managed.fraction).",
    )
    TASK_CANCELLATION_INTERVAL = ConfigOption(
        "task.cancellation.interval",
        DURATION,
        "30 s",
        "Between attempts to interrupt a task that does not react to cancel.",
    )
    TASK_CANCELLATION_TIMEOUT = ConfigOption(
        "task.cancellation.timeout",
        DURATION,
        "180 s",
        "After this a task that ignores cancellation is given up and reported CANCELED.",
    )
    SPARK_RESOURCE_WAIT_TIMEOUT = ConfigOption(
        "taskmanager.spark.resource-wait-timeout",
        DURATION,
        "120 s",
        "A task fails when its Spark application has had no executor for this long (a Spark "
        "cluster with no free cores or memory for it) instead of waiting for ever. 0: wait.",
    )
    SPARK_WARM_UP = ConfigOption(
        "taskmanager.spark.warm-up",
        BOOLEAN,
        True,
        "Start the TaskManager's SparkSession when it starts and run a tiny query on it, so the first "
        "task finds Spark ready (a JVM start is seconds). A MiniCluster reports ready once its session "
        "is warm. On a Spark cluster (spark://) only the session starts. false: the first task "
        "that needs Spark starts it.",
    )
    PARTITION_SERVING = ConfigOption(
        "taskmanager.network.partition-serving",
        choice("AUTO", "NETWORK", "SHARED"),
        "auto",
        "How consumers reach result partitions: 'network' (each TaskManager serves the partitions it "
        "produced from its own io.tmp.dirs; consumers elsewhere fetch them over the RPC port), 'shared' "
        "(every TaskManager sees every partition under io.tmp.dirs: a shared filesystem or a Hadoop URI), "
        "'auto' (network for a local io.tmp.dirs, shared for a Hadoop URI and inside a MiniCluster).",
    )
