"""Configuration with Flink's key names, read through typed options (Flink's ConfigOption<T>).

Each option is declared once, in its component's group (`CheckpointingOptions`,
`RestartStrategyOptions`, `JobManagerOptions`, ... in the `*_options` modules), with its
parser, default, description and whether a job may override it; `Configuration.get`
returns its value typed. docs/configuration.md is generated from the groups
(`make config-docs`, i.e. `python -m flink_runtime.configuration.docs`).

Durations accept Flink's forms: a bare number of milliseconds ("10000"), or a number
and a unit ("10 s", "500ms", "2 min", "1h"), and are read as milliseconds. Sizes accept
"10485760", "10 mb", "64m" and are read as bytes.
"""

from __future__ import annotations

from flink_runtime.config_values import ConfigurationError, parse_duration_ms, parse_size_bytes
from flink_runtime.configuration.checkpointing_options import (
    CheckpointingOptions,
    RestartStrategyOptions,
    SavepointConfigOptions,
    StateBackendOptions,
)
from flink_runtime.configuration.cluster_options import (
    BlobServerOptions,
    ClusterOptions,
    CoreOptions,
    MiniClusterOptions,
)
from flink_runtime.configuration.config import Configuration
from flink_runtime.configuration.jobmanager_options import (
    BatchExecutionOptions,
    HighAvailabilityOptions,
    JobManagerOptions,
    JobStoreOptions,
)
from flink_runtime.configuration.option import ConfigOption, Parser
from flink_runtime.configuration.registry import GROUPS, OPTIONS, options_of
from flink_runtime.configuration.resourcemanager_options import ResourceManagerOptions
from flink_runtime.configuration.rest_options import RestOptions, SecurityOptions, WebOptions
from flink_runtime.configuration.taskmanager_options import TaskManagerOptions

__all__ = [
    "GROUPS",
    "OPTIONS",
    "BatchExecutionOptions",
    "BlobServerOptions",
    "CheckpointingOptions",
    "ClusterOptions",
    "ConfigOption",
    "Configuration",
    "ConfigurationError",
    "CoreOptions",
    "HighAvailabilityOptions",
    "JobManagerOptions",
    "JobStoreOptions",
    "MiniClusterOptions",
    "Parser",
    "ResourceManagerOptions",
    "RestOptions",
    "RestartStrategyOptions",
    "SavepointConfigOptions",
    "SecurityOptions",
    "StateBackendOptions",
    "TaskManagerOptions",
    "WebOptions",
    "options_of",
    "parse_duration_ms",
    "parse_size_bytes",
]

# Short names for the options most modules read (`cfg.REST_PORT`): the same objects as
# the groups' attributes, not copies.
JOBMANAGER_RPC_ADDRESS = JobManagerOptions.RPC_ADDRESS
JOBMANAGER_RPC_PORT = JobManagerOptions.RPC_PORT
SLOT_REQUEST_TIMEOUT = JobManagerOptions.SLOT_REQUEST_TIMEOUT
FINE_GRAINED_RESOURCE_MANAGEMENT = JobManagerOptions.FINE_GRAINED_RESOURCE_MANAGEMENT
RECOVERY_MAX_ATTEMPTS = JobManagerOptions.RECOVERY_MAX_ATTEMPTS
PLANNER_TIMEOUT = JobManagerOptions.PLANNER_TIMEOUT
PLANNER_WARM_UP = JobManagerOptions.PLANNER_WARM_UP
PLANNER_MEMORY = JobManagerOptions.PLANNER_MEMORY
PLANNER_IDLE_TIMEOUT = JobManagerOptions.PLANNER_IDLE_TIMEOUT
PLANNER_PLAN_CACHE_SIZE = JobManagerOptions.PLANNER_PLAN_CACHE_SIZE
PLANNER_PLAN_CACHE_TTL = JobManagerOptions.PLANNER_PLAN_CACHE_TTL
AUTO_PARALLELISM_ENABLED = BatchExecutionOptions.AUTO_PARALLELISM_ENABLED
AUTO_PARALLELISM_MIN_PARALLELISM = BatchExecutionOptions.AUTO_PARALLELISM_MIN_PARALLELISM
AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK = BatchExecutionOptions.AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK
JOBSTORE_EXPIRATION_TIME = JobStoreOptions.EXPIRATION_TIME
JOBSTORE_MAX_CAPACITY = JobStoreOptions.MAX_CAPACITY
HA_TYPE = HighAvailabilityOptions.TYPE
HA_CLUSTER_ID = HighAvailabilityOptions.CLUSTER_ID
HA_LEASE_DURATION = HighAvailabilityOptions.LEASE_DURATION
HA_RENEW_DEADLINE = HighAvailabilityOptions.RENEW_DEADLINE
HA_RETRY_PERIOD = HighAvailabilityOptions.RETRY_PERIOD
CLUSTER_SECRET = SecurityOptions.CLUSTER_SECRET
REST_TOKEN = SecurityOptions.REST_TOKEN
REST_TOKEN_FILE = SecurityOptions.REST_TOKEN_FILE
REST_ALLOW_UNAUTHENTICATED = SecurityOptions.REST_ALLOW_UNAUTHENTICATED
ALLOWED_DIRECTORIES = SecurityOptions.ALLOWED_DIRECTORIES
SECRETS_DIR = SecurityOptions.SECRETS_DIR
SSL_REST_ENABLED = SecurityOptions.SSL_REST_ENABLED
SSL_REST_CERTIFICATE = SecurityOptions.SSL_REST_CERTIFICATE
SSL_REST_KEY = SecurityOptions.SSL_REST_KEY
SSL_REST_TRUSTSTORE = SecurityOptions.SSL_REST_TRUSTSTORE
REST_ADDRESS = RestOptions.ADDRESS
REST_BIND_ADDRESS = RestOptions.BIND_ADDRESS
REST_ALLOWED_HOSTS = RestOptions.ALLOWED_HOSTS
REST_PORT = RestOptions.PORT
REST_SUBMIT_WAIT = RestOptions.SUBMIT_WAIT
TASKMANAGER_HOST = TaskManagerOptions.HOST
TASKMANAGER_RPC_PORT = TaskManagerOptions.RPC_PORT
TASKMANAGER_RESOURCE_ID = TaskManagerOptions.RESOURCE_ID
TASKMANAGER_SLOTS = TaskManagerOptions.NUM_TASK_SLOTS
TASKMANAGER_CPU_CORES = TaskManagerOptions.CPU_CORES
TASKMANAGER_TASK_HEAP = TaskManagerOptions.TASK_HEAP_MEMORY
TASKMANAGER_MANAGED_MEMORY = TaskManagerOptions.MANAGED_MEMORY
TASK_CANCELLATION_INTERVAL = TaskManagerOptions.TASK_CANCELLATION_INTERVAL
TASK_CANCELLATION_TIMEOUT = TaskManagerOptions.TASK_CANCELLATION_TIMEOUT
SPARK_RESOURCE_WAIT_TIMEOUT = TaskManagerOptions.SPARK_RESOURCE_WAIT_TIMEOUT
SPARK_WARM_UP = TaskManagerOptions.SPARK_WARM_UP
PARTITION_SERVING = TaskManagerOptions.PARTITION_SERVING
BLOB_STORAGE_DIRECTORY = BlobServerOptions.STORAGE_DIRECTORY
BLOB_STORAGE_MAX_SIZE = BlobServerOptions.MAX_SIZE
BLOB_EXPIRATION_TIME = BlobServerOptions.EXPIRATION_TIME
IO_TMP_DIRS = CoreOptions.TMP_DIRS
PARALLELISM_DEFAULT = CoreOptions.DEFAULT_PARALLELISM
LOG_DIR = CoreOptions.FLINK_LOG_DIR
LOG_MAX = CoreOptions.FLINK_LOG_MAX
LOG_MAX_FILE_SIZE = CoreOptions.FLINK_LOG_MAX_FILE_SIZE
HEARTBEAT_INTERVAL = ClusterOptions.HEARTBEAT_INTERVAL
HEARTBEAT_TIMEOUT = ClusterOptions.HEARTBEAT_TIMEOUT
REGISTRATION_INITIAL_TIMEOUT = ClusterOptions.INITIAL_REGISTRATION_TIMEOUT
REGISTRATION_MAX_TIMEOUT = ClusterOptions.MAX_REGISTRATION_TIMEOUT
REGISTRATION_ERROR_DELAY = ClusterOptions.ERROR_REGISTRATION_DELAY
REGISTRATION_REFUSED_DELAY = ClusterOptions.REFUSED_REGISTRATION_DELAY
ASK_TIMEOUT = ClusterOptions.ASK_TIMEOUT
FRAMESIZE = ClusterOptions.FRAMESIZE
METRICS_PROBING_INTERVAL = ClusterOptions.SYSTEM_RESOURCE_METRICS_PROBING_INTERVAL
METRICS_JOB_ENDED_RETENTION = ClusterOptions.JOB_ENDED_RETENTION
CHECKPOINTING_MIN_INTERVAL = CheckpointingOptions.MIN_INTERVAL
CHECKPOINT_RETENTION = CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION
RESTART_STRATEGY = RestartStrategyOptions.TYPE
SAVEPOINT_PATH = SavepointConfigOptions.SAVEPOINT_PATH
SAVEPOINT_RESTORE_MODE = SavepointConfigOptions.RESTORE_MODE
SAVEPOINT_IGNORE_UNCLAIMED_STATE = SavepointConfigOptions.IGNORE_UNCLAIMED_STATE
MINICLUSTER_TASKMANAGERS = MiniClusterOptions.NUM_TASK_MANAGERS
MINICLUSTER_IDLE_TIMEOUT = MiniClusterOptions.IDLE_TIMEOUT
