"""The checks a job's own `config` passes at submit, key by key.

A JobGraph's config overrides the cluster's for that job (restart strategy,
checkpointing, state backend, parallelism): the options declared `job_overridable`.
Each is read with its option's parser here, so a bad value is a 400 naming the key,
not a job that fails later (or one that writes a checkpoint every 10 ms). Options of
the whole cluster (ports, addresses, security, TaskManager and JobManager settings)
are refused: a job cannot change them, and silently ignoring them would mislead. So
is an undeclared key in a namespace whose every option is the cluster's
(`taskmanager.memory.process.size`). Other unknown keys pass: a job may carry its own
settings, as Flink's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from flink_runtime.configuration import OPTIONS, CheckpointingOptions, Configuration, ConfigurationError


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
        option = OPTIONS.get(key)
        if (option is None and _in_cluster_namespace(key)) or (option is not None and not option.job_overridable):
            problems.append(
                f"{where}: {key} is a cluster setting, not a job's; set it in the cluster's configuration "
                "(config.yaml, FLINK_PROPERTIES or -D) instead."
            )
            continue
        if option is None:
            continue
        try:
            parsed = option.parse(value)
            if option is CheckpointingOptions.INTERVAL:
                _check_interval(parsed, value, cluster)
        except ConfigurationError as exc:
            problems.append(f"{where}: {exc}.")
    return problems


def _check_interval(interval_ms: float | None, value: Any, cluster: Configuration) -> None:
    minimum_ms = cluster.get(CheckpointingOptions.MIN_INTERVAL)
    if interval_ms is not None and interval_ms < minimum_ms:
        raise ConfigurationError(
            f"a checkpoint every {str(value).strip()} is more often than the cluster allows "
            f"({CheckpointingOptions.MIN_INTERVAL.key}: {minimum_ms / 1000:g} s); choose a longer interval"
        )


def _in_cluster_namespace(key: str) -> bool:
    """Whether the declared options that share the longest dotted prefix with `key` are
    all the cluster's (then an undeclared key there is one too, e.g. taskmanager.memory.*)."""
    parts = key.split(".")
    for length in range(len(parts) - 1, 0, -1):
        overridable = _namespaces().get(".".join(parts[:length]))
        if overridable is not None:
            return not overridable
    return False


@cache
def _namespaces() -> dict[str, bool]:
    """Dotted prefix of declared keys -> whether any option under it is job_overridable."""
    namespaces: dict[str, bool] = {}
    for key, option in OPTIONS.items():
        parts = key.split(".")
        for length in range(1, len(parts)):
            prefix = ".".join(parts[:length])
            namespaces[prefix] = namespaces.get(prefix, False) or option.job_overridable
    return namespaces


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)
