"""Configuration with Flink's key names.

Values come, later ones winning, from: the defaults below, a YAML file
(`$FLINK_CONF_DIR/config.yaml`, or `--config FILE`), the `FLINK_PROPERTIES`
environment variable (YAML text, as Flink's docker images use it), and `-D key=value`
on the command line. Nested YAML (`rest: {port: 8081}`) and flat keys
(`rest.port: 8081`) are both accepted, as in Flink 2's config.yaml.

Durations accept Flink's forms: a bare number of milliseconds ("10000"), or a number
and a unit ("10 s", "500ms", "2 min", "1h"). Sizes accept "10485760", "10 mb", "64m".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flink_runtime.config_values import (
    ConfigurationError,
    parse_bool,
    parse_choice,
    parse_duration_ms,
    parse_list,
    parse_size_bytes,
)

# Read by callers from here, where the options are.
__all__ = ["ConfigOption", "Configuration", "ConfigurationError", "parse_duration_ms", "parse_size_bytes"]


@dataclass(frozen=True)
class ConfigOption:
    key: str
    default: Any
    description: str
    kind: str = "str"  # str | int | float | bool | duration (ms) | size (bytes) | enum (one of choices) | list (of str)
    choices: tuple[str, ...] = ()


def _option(key: str, default: Any, description: str, kind: str = "str", choices: tuple[str, ...] = ()) -> ConfigOption:
    option = ConfigOption(key, default, description, kind, choices)
    OPTIONS[key] = option
    return option


OPTIONS: dict[str, ConfigOption] = {}

# -- JobManager ----------------------------------------------------------------------------
JOBMANAGER_RPC_ADDRESS = _option(
    "jobmanager.rpc.address", "127.0.0.1", "Host the JobManager's RPC binds to and TaskManagers connect to."
)
JOBMANAGER_RPC_PORT = _option("jobmanager.rpc.port", 6123, "JobManager RPC port.", "int")
JOBSTORE_EXPIRATION_TIME = _option(
    "jobstore.expiration-time", "3600 s", "How long a finished job stays queryable.", "duration"
)
JOBSTORE_MAX_CAPACITY = _option("jobstore.max-capacity", 1000, "How many finished jobs are kept at most.", "int")
SLOT_REQUEST_TIMEOUT = _option(
    "slot.request.timeout",
    "300 s",
    "A job fails when a slot it asked for does not arrive in this time.",
    "duration",
)
RECOVERY_MAX_ATTEMPTS = _option(
    "jobmanager.recovery.max-attempts",
    3,
    "A job whose recovery was started this many times without reaching RUNNING (the JobManager "
    "died recovering it) is marked FAILED instead of recovered again, so the JobManager comes up.",
    "int",
)
PLANNER_TIMEOUT = _option(
    "jobmanager.planner.timeout",
    "120 s",
    "How long preparing a job (importing its code, resolving its plan) or publishing its output "
    "may take in the planner process before it is stopped and the job refused or failed.",
    "duration",
)
PLANNER_WARM_UP = _option(
    "jobmanager.planner.warm-up",
    True,
    "Start the planner process and its SparkSession when the JobManager starts, so the first "
    "submission does not wait for them. false: start them on first use (one JVM less on a "
    "JobManager that seldom plans; the first Spark job's planning then includes Spark's start).",
    "bool",
)
PLANNER_MEMORY = _option(
    "jobmanager.planner.memory",
    "2 gb",
    "Memory the planner process's Python side may use (its data segment, RLIMIT_DATA; about 200 MB "
    "with its SparkSession started). Job code that allocates more while its plan is prepared gets "
    "MemoryError and the submission is refused (400) naming this key. 0: no limit. The planner's "
    "JVM is bounded by spark.driver.memory instead.",
    "size",
)
CLUSTER_SECRET = _option(
    "security.cluster.secret",
    "",
    "Shared secret of the cluster's RPC: keys its CURVE authentication and encryption, and a "
    "TaskManager presents it to register. Required when the RPC binds or connects off loopback. "
    "Empty: a MiniCluster makes its own; processes on loopback share their user's "
    "($XDG_RUNTIME_DIR/flink-runtime/rpc-secret, else ~/.local/state/flink-runtime/rpc-secret).",
)
REST_TOKEN = _option(
    "security.rest.token",
    "",
    "Bearer token every REST request must carry (Authorization: Bearer <token>). Empty: none "
    "(allowed only while the REST API binds to loopback).",
)
REST_TOKEN_FILE = _option(
    "security.rest.token-file", "", "A file holding the REST token (first line), instead of security.rest.token."
)
REST_ALLOW_UNAUTHENTICATED = _option(
    "security.rest.allow-unauthenticated",
    False,
    "true: serve the REST API on a non-loopback address without a token (anyone who reaches "
    "the port can run code on the cluster).",
    "bool",
)
ALLOWED_DIRECTORIES = _option(
    "security.allowed-directories",
    "",
    "Directories (a YAML list, or separated by ',') under which jobs may read, write, checkpoint "
    "and savepoint, symbolic links resolved; empty: anywhere the processes may. Paths with '..' are "
    "refused always. A TaskManager enforces the JobManager's list (sent with each task) and its own.",
    "list",
)
SSL_REST_ENABLED = _option("security.ssl.rest.enabled", False, "Serve the REST API over HTTPS.", "bool")
SSL_REST_CERTIFICATE = _option(
    "security.ssl.rest.certificate", "", "PEM file with the REST server's certificate (chain)."
)
SSL_REST_KEY = _option("security.ssl.rest.key", "", "PEM file with the REST server's private key.")
SSL_REST_TRUSTSTORE = _option(
    "security.ssl.rest.truststore",
    "",
    "PEM file of the certificate authorities a client (CLI, TaskManager) trusts for the REST API. Empty: the system's.",
)

# -- REST ----------------------------------------------------------------------------------
REST_ADDRESS = _option("rest.address", "127.0.0.1", "Address clients use to reach the REST API.")
REST_BIND_ADDRESS = _option("rest.bind-address", "127.0.0.1", "Address the REST server binds to.")
REST_ALLOWED_HOSTS = _option(
    "rest.allowed-hosts",
    "",
    "Host names the REST API answers to besides IP addresses, localhost, rest.address and "
    "rest.bind-address (and this machine's names when it binds every interface): a YAML list or "
    "separated by ','; 'name' (any port), 'name:port', '*.example.com', or '*' (no check: a web "
    "page could reach the API through DNS rebinding). Other Host headers are refused (403).",
    "list",
)
REST_PORT = _option("rest.port", 8081, "REST port (0 picks a free one).", "int")
REST_SUBMIT_WAIT = _option(
    "rest.submit.wait-timeout",
    "10 s",
    "How long POST /jobs waits for the sources to run before answering with the accepted job id.",
    "duration",
)

# -- TaskManager ---------------------------------------------------------------------------
TASKMANAGER_HOST = _option("taskmanager.host", "127.0.0.1", "Host the TaskManager's RPC binds to.")
TASKMANAGER_RPC_PORT = _option(
    "taskmanager.rpc.port",
    0,
    "TaskManager RPC port (0 picks a free one). In a MiniCluster the i-th TaskManager takes this port + i.",
    "int",
)
TASKMANAGER_RESOURCE_ID = _option("taskmanager.resource-id", "", "TaskManager id; generated when empty.")
TASKMANAGER_SLOTS = _option("taskmanager.numberOfTaskSlots", 0, "Slots a TaskManager offers (0: its CPU count).", "int")
TASK_CANCELLATION_INTERVAL = _option(
    "task.cancellation.interval",
    "30 s",
    "Between attempts to interrupt a task that does not react to cancel.",
    "duration",
)
TASK_CANCELLATION_TIMEOUT = _option(
    "task.cancellation.timeout",
    "180 s",
    "After this a task that ignores cancellation is given up and reported CANCELED.",
    "duration",
)
SPARK_RESOURCE_WAIT_TIMEOUT = _option(
    "taskmanager.spark.resource-wait-timeout",
    "120 s",
    "A task fails when its Spark application has had no executor for this long (a Spark "
    "cluster with no free cores or memory for it) instead of waiting for ever. 0: wait.",
    "duration",
)
BLOB_STORAGE_DIRECTORY = _option(
    "blob.storage.directory", "", "Where uploaded job libraries are kept (default: system temp dir)."
)
BLOB_STORAGE_MAX_SIZE = _option(
    "blob.storage.max-size",
    "4 gb",
    "Total size of the uploaded job libraries the JobManager keeps; an upload past it is refused (413).",
    "size",
)
BLOB_EXPIRATION_TIME = _option(
    "blob.expiration-time",
    "1 h",
    "A library no job refers to is deleted once it was last uploaded this long ago.",
    "duration",
)
IO_TMP_DIRS = _option("io.tmp.dirs", "", "Directory for result partitions (default: the system temp dir).")
PARTITION_SERVING = _option(
    "taskmanager.network.partition-serving",
    "auto",
    "How consumers reach result partitions: 'network' (each TaskManager serves the partitions it "
    "produced from its own io.tmp.dirs; consumers elsewhere fetch them over the RPC port), 'shared' "
    "(every TaskManager sees every partition under io.tmp.dirs: a shared filesystem or a Hadoop URI), "
    "'auto' (network for a local io.tmp.dirs, shared for a Hadoop URI and inside a MiniCluster).",
    "enum",
    ("AUTO", "NETWORK", "SHARED"),
)

# -- High availability (highavailability/) ------------------------------------------------
HA_TYPE = _option(
    "high-availability.type",
    "NONE",
    "NONE: one JobManager. database: several JobManagers on the jobstore.url database (PostgreSQL), "
    "one leader elected through a lease row; TaskManagers find the leader there.",
    "enum",
    ("NONE", "DATABASE"),
)
HA_CLUSTER_ID = _option(
    "high-availability.cluster-id", "default", "Names the cluster's lease (several clusters may share a database)."
)
HA_LEASE_DURATION = _option(
    "high-availability.database.leader-election.lease-duration",
    "15 s",
    "A standby takes the lease once the leader has not renewed it for this long (database clock).",
    "duration",
)
HA_RENEW_DEADLINE = _option(
    "high-availability.database.leader-election.renew-deadline",
    "10 s",
    "A leader that could not renew for this long steps down (its jobs SUSPENDED); must be shorter than "
    "the lease duration, so it stops before a standby can take over.",
    "duration",
)
HA_RETRY_PERIOD = _option(
    "high-availability.database.leader-election.retry-period",
    "5 s",
    "How often the leader renews, standbys try to take the lease and TaskManagers look for the leader.",
    "duration",
)

# -- Cluster -------------------------------------------------------------------------------
HEARTBEAT_INTERVAL = _option("heartbeat.interval", "10 s", "Time between heartbeat requests.", "duration")
HEARTBEAT_TIMEOUT = _option(
    "heartbeat.timeout", "50 s", "A peer that does not answer heartbeats for this long is lost.", "duration"
)
REGISTRATION_INITIAL_TIMEOUT = _option(
    "cluster.registration.initial-timeout", "100 ms", "First registration back-off.", "duration"
)
REGISTRATION_MAX_TIMEOUT = _option(
    "cluster.registration.max-timeout", "30 s", "Largest registration back-off.", "duration"
)
REGISTRATION_ERROR_DELAY = _option(
    "cluster.registration.error-delay",
    "10 s",
    "Pause after a registration attempt that failed with an error (not a timeout).",
    "duration",
)
REGISTRATION_REFUSED_DELAY = _option(
    "cluster.registration.refused-registration-delay",
    "10 s",
    "Pause after a refused registration.",
    "duration",
)
ASK_TIMEOUT = _option(
    "pekko.ask.timeout",
    "10 s",
    "Timeout of an RPC ask (Flink's key, kept although the transport is ZeroMQ).",
    "duration",
)
FRAMESIZE = _option(
    "pekko.framesize",
    "10485760b",
    "Largest RPC message (Flink's key, kept although the transport is ZeroMQ).",
    "size",
)
METRICS_PROBING_INTERVAL = _option(
    "metrics.system-resource-probing-interval",
    "5 s",
    "How often a TaskManager samples its CPU and memory and its Spark JVM's (sent with heartbeats).",
    "duration",
)

# -- Jobs ----------------------------------------------------------------------------------
CHECKPOINTING_MIN_INTERVAL = _option(
    "execution.checkpointing.min-interval",
    "1 s",
    "The shortest execution.checkpointing.interval a job may ask for (a cluster setting).",
    "duration",
)
PARALLELISM_DEFAULT = _option("parallelism.default", 1, "Parallelism of vertices that do not set one.", "int")
RESTART_STRATEGY = _option("restart-strategy.type", "none", "none | fixed-delay | exponential-delay | failure-rate.")
SAVEPOINT_PATH = _option("execution.savepoint.path", None, "Savepoint or retained checkpoint a job starts from.")
SAVEPOINT_RESTORE_MODE = _option(
    "execution.savepoint-restore-mode",
    "NO_CLAIM",
    "Who owns the snapshot a job starts from (Flink's RestoreMode): NO_CLAIM leaves it to the user; "
    "CLAIM hands it to the job, which deletes it once it is no longer needed: when the job FINISHED, "
    "or ended keeping a checkpoint of its own (made self-contained, so nothing points into the old one).",
    "enum",
    ("CLAIM", "NO_CLAIM"),
)
SAVEPOINT_IGNORE_UNCLAIMED_STATE = _option(
    "execution.savepoint.ignore-unclaimed-state",
    False,
    "Start from a savepoint even if some of its state belongs to no vertex of the job.",
    "bool",
)
CHECKPOINT_RETENTION = _option(
    "execution.checkpointing.externalized-checkpoint-retention",
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to a job's retained checkpoints when it ends (Flink's values): "
    "NO_EXTERNALIZED_CHECKPOINTS deletes them whatever the end; DELETE_ON_CANCELLATION keeps them "
    "when the job FAILED; RETAIN_ON_CANCELLATION keeps them when it FAILED or was CANCELED. "
    "A FINISHED job's checkpoints are always deleted; savepoints never are.",
    "enum",
    ("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
)

# -- Logs (flink_runtime/logs/) --------------------------------------------------------------
LOG_DIR = _option(
    "env.log.dir",
    "",
    "Directory of the cluster processes' log files (default: <system temp dir>/flink-runtime/log).",
)
LOG_MAX = _option("env.log.max", 10, "How many rotated log files a process keeps (.log.1 ... .log.N).", "int")
LOG_MAX_FILE_SIZE = _option(
    "env.log.max-file-size",
    "100 mb",
    "A process's log rotates when it reaches this size; its stdout copy (.out) stops growing there.",
    "size",
)

# -- MiniCluster ---------------------------------------------------------------------------
MINICLUSTER_TASKMANAGERS = _option("minicluster.number-of-taskmanagers", 1, "TaskManagers a MiniCluster starts.", "int")
MINICLUSTER_IDLE_TIMEOUT = _option(
    "minicluster.idle-timeout",
    "0 s",
    "A MiniCluster stops itself after this long with no job running and no REST request (0: never).",
    "duration",
)


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        full_key = f"{prefix}{key}"
        if isinstance(value, Mapping) and full_key not in OPTIONS:
            flat.update(_flatten(value, f"{full_key}."))
        else:
            flat[full_key] = value
    return flat


class Configuration:
    """A flat key -> value map with typed getters that know each option's default."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = _flatten(values or {})

    # -- loading -----------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        dynamic_properties: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> Configuration:
        environ = os.environ if environ is None else environ
        config = cls()
        if config_file is None and environ.get("FLINK_CONF_DIR"):
            candidate = Path(environ["FLINK_CONF_DIR"]) / "config.yaml"
            config_file = candidate if candidate.exists() else None
        if config_file is not None:
            config.update(_read_yaml(Path(config_file).read_text(), f"config file {config_file}"))
        if environ.get("FLINK_PROPERTIES"):
            config.update(_read_yaml(environ["FLINK_PROPERTIES"], "FLINK_PROPERTIES"))
        for prop in dynamic_properties:
            key, sep, value = prop.partition("=")
            if not sep or not key.strip():
                raise ConfigurationError(f"-D {prop!r}: expected key=value, e.g. -D rest.port=8081")
            # Taken as text, not YAML: "-D security.cluster.secret=0123" must not become 83.
            # The typed getters convert.
            config.set(key.strip(), value.strip())
        return config

    def update(self, values: Mapping[str, Any]) -> None:
        self._values.update(_flatten(values))

    def set(self, key: str, value: Any) -> Configuration:
        self._values[key] = value
        return self

    def copy(self, overrides: Mapping[str, Any] | None = None) -> Configuration:
        """A copy, with `overrides` (flat or nested keys) applied."""
        clone = Configuration(self._values)
        clone.update(overrides or {})
        return clone

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __contains__(self, key: str) -> bool:
        return key in self._values

    # -- typed access ----------------------------------------------------------------------

    def raw(self, option: ConfigOption | str) -> Any:
        option = OPTIONS[option] if isinstance(option, str) and option in OPTIONS else option
        if isinstance(option, str):
            return self._values.get(option)
        return self._values.get(option.key, option.default)

    def get(self, option: ConfigOption) -> Any:
        value = self.raw(option)
        key = option.key
        try:
            match option.kind:
                case "int":
                    return int(value)
                case "float":
                    return float(value)
                case "bool":
                    return parse_bool(value)
                case "duration":
                    return parse_duration_ms(value, key)
                case "size":
                    return parse_size_bytes(value, key)
                case "enum":
                    return parse_choice(value, key, option.choices)
                case "list":
                    return parse_list(value)
                case _:
                    return "" if value is None else str(value)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigurationError):
                raise
            raise ConfigurationError(f"{key}: expected {option.kind}, got {value!r}") from None

    def get_seconds(self, option: ConfigOption) -> float:
        """A duration option in seconds (asyncio's unit)."""
        return self.get(option) / 1000.0


def _read_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{where} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigurationError(f"{where} must be a mapping of keys to values, got {type(loaded).__name__}")
    return loaded
