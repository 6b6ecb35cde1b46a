"""Every option the runtime reads, by group (one table each in docs/configuration.md)."""

from __future__ import annotations

from typing import Any

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
from flink_runtime.configuration.jobmanager_options import (
    BatchExecutionOptions,
    HighAvailabilityOptions,
    JobManagerOptions,
    JobStoreOptions,
)
from flink_runtime.configuration.option import ConfigOption
from flink_runtime.configuration.resourcemanager_options import ResourceManagerOptions
from flink_runtime.configuration.rest_options import RestOptions, SecurityOptions, WebOptions
from flink_runtime.configuration.taskmanager_options import TaskManagerOptions

# In the order of docs/configuration.md.
GROUPS: tuple[type, ...] = (
    CoreOptions,
    JobManagerOptions,
    BatchExecutionOptions,
    JobStoreOptions,
    HighAvailabilityOptions,
    TaskManagerOptions,
    ResourceManagerOptions,
    ClusterOptions,
    RestOptions,
    WebOptions,
    SecurityOptions,
    BlobServerOptions,
    CheckpointingOptions,
    SavepointConfigOptions,
    StateBackendOptions,
    RestartStrategyOptions,
    MiniClusterOptions,
)


def options_of(group: type) -> list[ConfigOption[Any]]:
    """A group's options, in the order they are declared."""
    return [value for value in vars(group).values() if isinstance(value, ConfigOption)]


def _index() -> dict[str, ConfigOption[Any]]:
    options: dict[str, ConfigOption[Any]] = {}
    for group in GROUPS:
        for option in options_of(group):
            if option.key in options:
                raise RuntimeError(f"configuration key {option.key} is declared twice")
            options[option.key] = option
    return options


# key -> option
OPTIONS: dict[str, ConfigOption[Any]] = _index()
