"""Options of every cluster process: directories, logs, heartbeats, registration, RPC,
metrics, blobs, and the MiniCluster (Flink's CoreOptions, HeartbeatManagerOptions,
ClusterOptions, RpcOptions, MetricOptions, BlobServerOptions)."""

from __future__ import annotations

from flink_runtime.configuration.option import (
    DURATION,
    MEMORY_SIZE,
    STRING,
    ConfigOption,
    directory_or_temp,
    integer,
)


class CoreOptions:
    TITLE = "Core"

    TMP_DIRS = ConfigOption(
        "io.tmp.dirs",
        directory_or_temp("flink-runtime-data"),
        "",
        "Directory for result partitions, a local path or a Hadoop URI (default: "
        "<system temp dir>/flink-runtime-data).",
    )
    DEFAULT_PARALLELISM = ConfigOption(
        "parallelism.default",
        integer(minimum=1),
        1,
        "Parallelism of vertices that do not set one.",
        job_overridable=True,
    )
    FLINK_LOG_DIR = ConfigOption(
        "env.log.dir",
        STRING,
        "",
        "Directory of the cluster processes' log files (default: <system temp dir>/flink-runtime/log).",
    )
    FLINK_LOG_MAX = ConfigOption(
        "env.log.max", integer(minimum=0), 10, "How many rotated log files a process keeps (.log.1 ... .log.N)."
    )
    FLINK_LOG_MAX_FILE_SIZE = ConfigOption(
        "env.log.max-file-size",
        MEMORY_SIZE,
        "100 mb",
        "A process's log rotates when it reaches this size; its stdout copy (.out) stops growing there.",
    )


class ClusterOptions:
    TITLE = "Heartbeats, registration and RPC"

    HEARTBEAT_INTERVAL = ConfigOption("heartbeat.interval", DURATION, "10 s", "Time between heartbeat requests.")
    HEARTBEAT_TIMEOUT = ConfigOption(
        "heartbeat.timeout", DURATION, "50 s", "A peer that does not answer heartbeats for this long is lost."
    )
    INITIAL_REGISTRATION_TIMEOUT = ConfigOption(
        "cluster.registration.initial-timeout", DURATION, "100 ms", "First registration back-off."
    )
    MAX_REGISTRATION_TIMEOUT = ConfigOption(
        "cluster.registration.max-timeout", DURATION, "30 s", "Largest registration back-off."
    )
    ERROR_REGISTRATION_DELAY = ConfigOption(
        "cluster.registration.error-delay",
        DURATION,
        "10 s",
        "Pause after a registration attempt that failed with an error (not a timeout).",
    )
    REFUSED_REGISTRATION_DELAY = ConfigOption(
        "cluster.registration.refused-registration-delay", DURATION, "10 s", "Pause after a refused registration."
    )
    ASK_TIMEOUT = ConfigOption(
        "pekko.ask.timeout",
        DURATION,
        "10 s",
        "Timeout of an RPC ask (Flink's key, kept although the transport is ZeroMQ).",
    )
    FRAMESIZE = ConfigOption(
        "pekko.framesize",
        MEMORY_SIZE,
        "10485760b",
        "Largest RPC message (Flink's key, kept although the transport is ZeroMQ).",
    )
    SYSTEM_RESOURCE_METRICS_PROBING_INTERVAL = ConfigOption(
        "metrics.system-resource-probing-interval",
        DURATION,
        "5 s",
        "How often a TaskManager samples its CPU and memory and its Spark JVM's (sent with heartbeats).",
    )
    JOB_ENDED_RETENTION = ConfigOption(
        "metrics.job.ended-retention",
        DURATION,
        "60 s",
        "How long an ended job's metrics stay on the Prometheus endpoint (/metrics) after it ended "
        "(Flink drops them when the job ends; the delay lets a scraper read the final values).",
    )


class BlobServerOptions:
    TITLE = "Job libraries (blobs)"

    STORAGE_DIRECTORY = ConfigOption(
        "blob.storage.directory", STRING, "", "Where uploaded job libraries are kept (default: system temp dir)."
    )
    MAX_SIZE = ConfigOption(
        "blob.storage.max-size",
        MEMORY_SIZE,
        "4 gb",
        "Total size of the uploaded job libraries the JobManager keeps; an upload past it is refused (413).",
    )
    EXPIRATION_TIME = ConfigOption(
        "blob.expiration-time",
        DURATION,
        "1 h",
        "A library no job refers to is deleted once it was last uploaded this long ago.",
    )


class MiniClusterOptions:
    TITLE = "MiniCluster"

    NUM_TASK_MANAGERS = ConfigOption(
        "minicluster.number-of-taskmanagers", integer(minimum=1), 1, "TaskManagers a MiniCluster starts."
    )
    IDLE_TIMEOUT = ConfigOption(
        "minicluster.idle-timeout",
        DURATION,
        "0 s",
        "A MiniCluster stops itself after this long with no job running and no REST request (0: never; "
        "the Airflow embedded cluster sets 1 h).",
    )
