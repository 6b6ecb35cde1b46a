"""The checks a job's own `config` passes at submit, key by key.

A JobGraph's config overrides the cluster's for that job (restart strategy,
checkpointing, state backend, parallelism). Each known key is checked for its type
and range here, so a bad value is a 400 naming the key, not a job that fails later
(or one that writes a checkpoint every 10 ms). Keys that only make sense for the
whole cluster (ports, addresses, security, TaskManager and JobManager settings) are
refused: a job cannot change them, and silently ignoring them would mislead.
Unknown keys pass: a job may carry its own settings, as Flink's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError, parse_duration_ms

# Prefixes (and keys) of settings that belong to the cluster, not to one job.
CLUSTER_ONLY = (
    "jobmanager.rpc.",
    "jobmanager.planner.",
    "jobmanager.memory.",
    "taskmanager.",
    "rest.",
    "security.",
    "jobstore.",
    "blob.",
    "heartbeat.",
    "cluster.",
    "high-availability.",
    "pekko.",
    "io.tmp.dirs",
    "minicluster.",
    "env.",  # process settings: where logs go (env.log.*)
    "execution.checkpointing.min-interval",
)

STATE_BACKENDS = ("hashmap", "rocksdb")
FAILOVER_STRATEGIES = ("region", "full")


def job_config_problems(config: Mapping[Any, Any], cluster: Configuration) -> list[str]:
    """Every problem of a job's config, one sentence each (empty: fine)."""
    problems = []
    for key, value in config.items():
        where = f"config[{key!r}]"
        if not isinstance(key, str):
            problems.append(f"{where}: config keys are strings, got {type(key).__name__}.")
            continue
        if value is not None and not isinstance(value, str | int | float | bool):
            problems.append(
                f"{where}: expected a string, number or boolean, got {_kind(value)}; job config values are "
                "scalars (a vertex's own config may hold lists and objects)."
            )
            continue
        if key.startswith(CLUSTER_ONLY):
            problems.append(
                f"{where}: {key} is a cluster setting, not a job's; set it in the cluster's configuration "
                "(config.yaml, FLINK_PROPERTIES or -D) instead."
            )
            continue
        problem = _value_problem(key, value, cluster)
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def _value_problem(key: str, value: Any, cluster: Configuration) -> str | None:
    text = "" if value is None else str(value).strip()
    try:
        match key:
            case "parallelism.default":
                if _int(value) < 1:
                    return f"parallelism must be at least 1, got {value!r}."
            case "state.checkpoints.num-retained":
                if _int(value) < 1:
                    return f"at least 1 checkpoint must be retained, got {value!r}."
            case "execution.checkpointing.interval":
                return _interval_problem(text, cluster)
            case "execution.checkpointing.timeout" | "slot.request.timeout" | "task.cancellation.timeout":
                if parse_duration_ms(text, key) <= 0:
                    return f"must be a positive duration (e.g. '10 min'), got {value!r}."
            case "state.backend.type":
                if text.lower() not in STATE_BACKENDS:
                    return f"unknown state backend {value!r}; use {' or '.join(STATE_BACKENDS)}."
            case "jobmanager.execution.failover-strategy":
                if text.lower() not in FAILOVER_STRATEGIES:
                    return f"unknown failover strategy {value!r}; use {' or '.join(FAILOVER_STRATEGIES)}."
            case _ if key in cfg.OPTIONS:
                Configuration({key: value}).get(cfg.OPTIONS[key])
    except (ConfigurationError, ValueError, TypeError) as exc:
        return f"{exc}."
    return None


def _interval_problem(text: str, cluster: Configuration) -> str | None:
    if text in ("", "0"):
        return None  # checkpointing off
    interval_ms = parse_duration_ms(text, "execution.checkpointing.interval")
    minimum_ms = cluster.get(cfg.CHECKPOINTING_MIN_INTERVAL)
    if interval_ms < minimum_ms:
        return (
            f"a checkpoint every {text} is more often than the cluster allows "
            f"(execution.checkpointing.min-interval: {minimum_ms / 1000:g} s); choose a longer interval."
        )
    return None


def _int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a whole number, got {value!r}") from None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)
