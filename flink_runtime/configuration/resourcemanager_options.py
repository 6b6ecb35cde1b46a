"""Options of the active resource manager: TaskManagers the JobManager starts and stops
itself (Flink's ResourceManagerOptions and the SlotManager's bounds, same keys)."""

from __future__ import annotations

from flink_runtime.config_values import parse_size_bytes
from flink_runtime.configuration.option import (
    DURATION,
    FLOAT,
    LIST,
    OPTIONAL_INTEGER,
    STRING,
    ConfigOption,
    Parser,
    lower_choice,
)

OPTIONAL_MEMORY_SIZE: Parser[int | None] = Parser(
    "MemorySize",
    "a size such as '4g' (or nothing: unbounded)",
    lambda value, key: None if value is None or str(value).strip() == "" else parse_size_bytes(value, key),
)
OPTIONAL_FLOAT: Parser[float | None] = Parser(
    "Double",
    "a number (or nothing: unbounded)",
    lambda value, key: None if value is None or str(value).strip() == "" else float(value),
)


class ResourceManagerOptions:
    TITLE = "Resource manager (active: TaskManagers on demand)"

    DRIVER = ConfigOption(
        "resourcemanager.driver",
        lower_choice("standalone", "process", "docker", what="resource manager driver"),
        "standalone",
        "Who starts TaskManagers. standalone: you do (flink-runtime taskmanager, a MiniCluster); "
        "process: the JobManager starts TaskManager processes on its own host when slot requests "
        "cannot be met, and stops them when idle; docker: the same with containers of "
        "resourcemanager.docker.image through the local Docker Engine (Flink's native Kubernetes "
        "and YARN deployments are the other active drivers).",
    )
    TASKMANAGER_TIMEOUT = ConfigOption(
        "resourcemanager.taskmanager-timeout",
        DURATION,
        "30 s",
        "A TaskManager the resource manager started is stopped after it has had no allocated slot for this long.",
    )
    TASKMANAGER_REGISTRATION_TIMEOUT = ConfigOption(
        "resourcemanager.taskmanager-registration.timeout",
        DURATION,
        "5 min",
        "A started TaskManager that has not registered within this time is stopped and counts as a failed start. "
        "A job whose Spark plans wait for the first TaskManager started for it waits at most this long (and half "
        "of jobmanager.planner.timeout) before the planner resolves them itself.",
    )
    MAX_TASKMANAGERS = ConfigOption(
        "resourcemanager.max-taskmanagers",
        OPTIONAL_INTEGER,
        None,
        "At most this many TaskManagers started by the resource manager at once (unset: no bound). "
        "A job that needs more slots than the bounds allow fails at once, with the numbers.",
    )
    MAX_SLOTS = ConfigOption(
        "slotmanager.number-of-slots.max",
        OPTIONAL_INTEGER,
        None,
        "At most this many slots in the cluster, registered TaskManagers and started ones together (unset: no bound).",
    )
    MAX_TOTAL_CPU = ConfigOption(
        "slotmanager.max-total-resource.cpu",
        OPTIONAL_FLOAT,
        None,
        "At most this many CPU cores over the TaskManagers the resource manager starts (unset: no bound; "
        "a slot whose request names no cores counts 1).",
    )
    MAX_TOTAL_MEMORY = ConfigOption(
        "slotmanager.max-total-resource.memory",
        OPTIONAL_MEMORY_SIZE,
        None,
        "At most this much task heap over the TaskManagers the resource manager starts (unset: no "
        "bound; a slot whose request names no heap counts 0).",
    )
    START_WORKER_MAX_FAILURE_RATE = ConfigOption(
        "resourcemanager.start-worker.max-failure-rate",
        FLOAT,
        10.0,
        "Failed TaskManager starts (exits before or after registering, registration timeouts) per "
        "minute beyond which no TaskManager is started for resourcemanager.start-worker.retry-interval.",
    )
    START_WORKER_RETRY_INTERVAL = ConfigOption(
        "resourcemanager.start-worker.retry-interval",
        DURATION,
        "3 s",
        "Pause of TaskManager starts once resourcemanager.start-worker.max-failure-rate is exceeded.",
    )
    DOCKER_IMAGE = ConfigOption(
        "resourcemanager.docker.image",
        STRING,
        "flink-runtime:0.1.0",
        "Image of the TaskManager containers of the docker driver (the project's, docker/Dockerfile).",
    )
    DOCKER_NETWORK = ConfigOption(
        "resourcemanager.docker.network",
        STRING,
        "host",
        "Network of the TaskManager containers (host: they reach the JobManager at jobmanager.rpc.address "
        "as this host does; or a Docker network the JobManager is on).",
    )
    DOCKER_VOLUMES = ConfigOption(
        "resourcemanager.docker.volumes",
        LIST,
        "",
        "Host folders mounted into the TaskManager containers, as host-path:container-path "
        "(io.tmp.dirs and sink paths must be the same folders the JobManager and the other "
        "TaskManagers see).",
    )
