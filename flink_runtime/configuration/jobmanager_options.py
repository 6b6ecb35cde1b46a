"""Options of the JobManager, its job store and high availability (Flink's
JobManagerOptions, JobStoreOptions / ResourceManagerOptions, HighAvailabilityOptions)."""

from __future__ import annotations

from flink_runtime.configuration.option import (
    BOOLEAN,
    DURATION,
    INTEGER,
    MEMORY_SIZE,
    OPTIONAL_STRING,
    STRING,
    ConfigOption,
    choice,
    integer,
    lower_choice,
)


class JobManagerOptions:
    TITLE = "JobManager"

    RPC_ADDRESS = ConfigOption(
        "jobmanager.rpc.address",
        STRING,
        "127.0.0.1",
        "Host the JobManager's RPC binds to and TaskManagers connect to.",
    )
    RPC_PORT = ConfigOption("jobmanager.rpc.port", INTEGER, 6123, "JobManager RPC port.")
    SLOT_REQUEST_TIMEOUT = ConfigOption(
        "slot.request.timeout",
        DURATION,
        "300 s",
        "A job fails when a slot it asked for does not arrive in this time.",
    )
    SLOT_IDLE_TIMEOUT = ConfigOption(
        "slot.idle.timeout",
        DURATION,
        "50 s",
        "How long a job keeps a slot it holds but no subtask uses (a continuous job between its "
        "rounds, a batch job between its stages) before giving it back to its TaskManager; the "
        "job's next subtasks are deployed into it without a new slot request. A slot another "
        "job's request waits for is given back at once; all of a job's slots go when it ends. "
        "0 gives every slot back as soon as its subtasks end.",
    )
    FINE_GRAINED_RESOURCE_MANAGEMENT = ConfigOption(
        "cluster.fine-grained-resource-management.enabled",
        BOOLEAN,
        True,
        "true: a slot request with a resource profile gets a slot of exactly that profile carved from a "
        "TaskManager's free resources (dynamic slots; Flink's default since 1.18). false: every "
        "TaskManager has taskmanager.numberOfTaskSlots fixed slots of total / slots, and a request takes "
        "one that holds its profile (Flink's coarse-grained mode). Requests without resources take a slot "
        "of total / slots either way.",
    )
    RECOVERY_MAX_ATTEMPTS = ConfigOption(
        "jobmanager.recovery.max-attempts",
        integer(minimum=1),
        3,
        "A job whose recovery was started this many times without reaching RUNNING (the JobManager "
        "died recovering it) is marked FAILED instead of recovered again, so the JobManager comes up.",
    )
    EXECUTION_ATTEMPTS_HISTORY_SIZE = ConfigOption(
        "jobmanager.execution.attempts-history-size",
        integer(minimum=0),
        16,
        "How many ended attempts (prior Executions) each subtask keeps, the oldest dropped first: "
        "REST /jobs/:id/vertices/:vid/subtasks/:n/attempts/:attempt, the subtasks' prior-attempts "
        "and the job store's archive show them.",
        job_overridable=True,
    )
    EXECUTION_FAILOVER_STRATEGY = ConfigOption(
        "jobmanager.execution.failover-strategy",
        lower_choice("region", "full", what="failover strategy"),
        "region",
        "What a task failure restarts: region (only the failed subtask, and the producers of "
        "partitions it could not read) or full (every subtask of the job).",
        job_overridable=True,
    )
    PLANNER_TIMEOUT = ConfigOption(
        "jobmanager.planner.timeout",
        DURATION,
        "120 s",
        "How long preparing a job (importing its code, resolving its plan) or publishing its output "
        "may take in the planner process before it is stopped and the job refused or failed. A Spark "
        "plan resolved on a TaskManager gets half of what is left of it there.",
    )
    PLANNER_WARM_UP = ConfigOption(
        "jobmanager.planner.warm-up",
        BOOLEAN,
        False,
        "Start the planner's SparkSession (a JVM of about 200-350 MB) when the JobManager starts, so the "
        "first job whose plan needs Spark does not wait for it. The planner process itself (Python, no "
        "JVM) always starts with the JobManager: jobs whose plans need no Spark (built-in invokables "
        "such as noop) never start a JVM. false: Spark plans are resolved on a registered TaskManager's "
        "JVM, and the first plan no TaskManager answers starts the planner's; true: the planner resolves "
        "them with its own (the job's code at submit stays out of the TaskManagers). A call waits "
        "on a warm-up at most jobmanager.planner.timeout, then runs in a new planner.",
    )
    PLANNER_IDLE_TIMEOUT = ConfigOption(
        "jobmanager.planner.idle-timeout",
        DURATION,
        "5 min",
        "How long the planner process may sit idle after a call before it is replaced by a fresh one "
        "without a JVM: a plan that needed Spark leaves the planner's SparkSession (a JVM of about "
        "270 MB) running, and a JobManager between bursts of submissions should not keep it. The next "
        "plan that needs Spark starts it again, within its own jobmanager.planner.timeout. 0: keep the "
        "planner for the JobManager's life. Ignored with jobmanager.planner.warm-up: true (its JVM is "
        "meant to stay).",
    )
    PLANNER_MEMORY = ConfigOption(
        "jobmanager.planner.memory",
        MEMORY_SIZE,
        "2 gb",
        "Memory the planner process's Python side may use (its data segment, RLIMIT_DATA; about 200 MB "
        "with its SparkSession started). Job code that allocates more while its plan is prepared gets "
        "MemoryError and the submission is refused (400) naming this key. 0: no limit. The planner's "
        "JVM is bounded by spark.driver.memory instead.",
    )
    PLANNER_PLAN_CACHE_SIZE = ConfigOption(
        "jobmanager.planner.plan-cache.size",
        integer(minimum=0),
        100,
        "How many vertices' resolved Spark plans the process preparing jobs keeps (least recently used "
        "out first), so a pipeline submitted again with the same operators on inputs of the same schema "
        "skips Spark's analyzer (Flink's sql-gateway.session.plan-cache.size). Vertices with an sql or "
        "transform operator, and jobs with libraries, are checked every time. 0: no cache.",
    )
    PLANNER_PLAN_CACHE_TTL = ConfigOption(
        "jobmanager.planner.plan-cache.ttl",
        DURATION,
        "1 h",
        "How long a resolved plan stays in the plan cache (jobmanager.planner.plan-cache.size). Within "
        "it, a change its key cannot see (a catalog function another job's sql operator dropped) "
        "fails the task that calls the function instead of the submission. 0: no cache.",
    )


class BatchExecutionOptions:
    TITLE = "Batch execution"

    AUTO_PARALLELISM_ENABLED = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.enabled",
        BOOLEAN,
        True,
        "Decide the parallelism of a vertex whose parallelism was not configured (the Pipeline API's "
        "vertices without set_parallelism) once the vertices it reads from have finished, from the "
        "bytes they wrote for it, and a source's from its input splits (one subtask per split at most): "
        "as Flink's adaptive batch scheduler. Its parallelism becomes its upper bound. Only vertices of "
        "Spark operators over all-to-all exchanges (hash, rebalance, broadcast) are decided; the others "
        "run at their parallelism.",
        job_overridable=True,
    )
    AUTO_PARALLELISM_MIN_PARALLELISM = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.min-parallelism",
        integer(minimum=1),
        1,
        "The lowest parallelism decided for a vertex (never above its own parallelism).",
        job_overridable=True,
    )
    AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK = ConfigOption(
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task",
        MEMORY_SIZE,
        "16 mb",
        "How many bytes of input each subtask of a decided vertex should read: its parallelism is "
        "the bytes its inputs hold divided by this, rounded up, within the bounds. A broadcast input "
        "counts once.",
        job_overridable=True,
    )


class JobStoreOptions:
    TITLE = "Job store"

    URL = ConfigOption(
        "jobstore.url",
        OPTIONAL_STRING,
        None,
        "SQLAlchemy URL of the database that keeps submitted jobs, their checkpoints and finished "
        "jobs across JobManager restarts (sqlite:///path, postgresql+psycopg://user:password@host/db). "
        "Unset: a standalone JobManager uses sqlite:///<system temp dir>/flink-runtime/"
        "jobstore-<high-availability.cluster-id>.db, a MiniCluster none; empty: none (jobs are lost "
        "with the JobManager). Required by high-availability.type: database.",
    )
    EXPIRATION_TIME = ConfigOption(
        "jobstore.expiration-time", DURATION, "3600 s", "How long a finished job stays queryable."
    )
    MAX_CAPACITY = ConfigOption("jobstore.max-capacity", INTEGER, 1000, "How many finished jobs are kept at most.")


class HighAvailabilityOptions:
    TITLE = "High availability"

    TYPE = ConfigOption(
        "high-availability.type",
        choice("NONE", "DATABASE"),
        "NONE",
        "NONE: one JobManager. database: several JobManagers on the jobstore.url database (PostgreSQL), "
        "one leader elected through a lease row; TaskManagers find the leader there.",
    )
    CLUSTER_ID = ConfigOption(
        "high-availability.cluster-id",
        STRING,
        "default",
        "Names the cluster's lease (several clusters may share a database); also names a standalone "
        "JobManager's default SQLite job store.",
    )
    LEASE_DURATION = ConfigOption(
        "high-availability.database.leader-election.lease-duration",
        DURATION,
        "15 s",
        "A standby takes the lease once the leader has not renewed it for this long (database clock); "
        "Flink's high-availability.kubernetes.leader-election.lease-duration.",
    )
    RENEW_DEADLINE = ConfigOption(
        "high-availability.database.leader-election.renew-deadline",
        DURATION,
        "10 s",
        "A leader that could not renew for this long steps down (its jobs SUSPENDED); must be shorter than "
        "the lease duration, so it stops before a standby can take over.",
    )
    RETRY_PERIOD = ConfigOption(
        "high-availability.database.leader-election.retry-period",
        DURATION,
        "5 s",
        "How often the leader renews, standbys try to take the lease and TaskManagers look for the leader.",
    )
