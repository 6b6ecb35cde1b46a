"""Typed options (ConfigOption[T]): each parser, its errors, defaults, and which options
a job's own config may override."""

from __future__ import annotations

from typing import Any

import pytest

from flink_runtime.configuration import (
    GROUPS,
    OPTIONS,
    CheckpointingOptions,
    ClusterOptions,
    Configuration,
    ConfigurationError,
    CoreOptions,
    JobManagerOptions,
    JobStoreOptions,
    RestartStrategyOptions,
    RestOptions,
    SavepointConfigOptions,
    SecurityOptions,
    StateBackendOptions,
    TaskManagerOptions,
    options_of,
)
from flink_runtime.configuration.option import ConfigOption
from flink_runtime.jobgraph.job_config import job_config_problems
from flink_runtime.scheduler.restart import ExponentialDelayRestart, FixedDelayRestart, NoRestart, restart_strategy


def get(option: ConfigOption[Any], value: Any) -> Any:
    return Configuration({option.key: value}).get(option)


# -- each kind of value ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        (RestOptions.PORT, "8082", 8082),
        (RestOptions.PORT, 8083, 8083),
        (RestartStrategyOptions.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER, "1.5", 1.5),
        (SecurityOptions.SSL_REST_ENABLED, "TRUE", True),
        (SecurityOptions.SSL_REST_ENABLED, False, False),
        (ClusterOptions.HEARTBEAT_INTERVAL, "2 min", 120_000.0),
        (ClusterOptions.FRAMESIZE, "64m", 64 << 20),
        (TaskManagerOptions.PARTITION_SERVING, "network", "NETWORK"),
        (RestartStrategyOptions.TYPE, "Fixed-Delay", "fixed-delay"),
        (RestartStrategyOptions.TYPE, "failurerate", "failure-rate"),  # Flink's other spelling
        (JobManagerOptions.EXECUTION_FAILOVER_STRATEGY, "FULL", "full"),
        (StateBackendOptions.STATE_BACKEND, "RocksDB", "rocksdb"),
        (RestOptions.ALLOWED_HOSTS, "a.example, b.example:8081", ["a.example", "b.example:8081"]),
        (RestOptions.ALLOWED_HOSTS, ["x", " y "], ["x", "y"]),
        (CheckpointingOptions.INTERVAL, "10 s", 10_000.0),
        (CheckpointingOptions.INTERVAL, "0", None),  # off
        (CheckpointingOptions.INTERVAL, 0, None),
        (RestartStrategyOptions.EXPONENTIAL_DELAY_ATTEMPTS, "4", 4),
        (SecurityOptions.CLUSTER_SECRET, 123, "123"),
    ],
)
def test_get_reads_each_kind_typed(option: ConfigOption[Any], value: Any, expected: Any) -> None:
    assert get(option, value) == expected


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        (RestOptions.PORT, "eighty", "a whole number"),
        (RestOptions.PORT, 1.5, "a whole number"),
        (RestOptions.PORT, True, "a whole number"),
        (RestartStrategyOptions.EXPONENTIAL_DELAY_JITTER_FACTOR, "lots", "a number"),
        (SecurityOptions.SSL_REST_ENABLED, "maybe", "true or false"),
        (ClusterOptions.HEARTBEAT_TIMEOUT, "soon", "a duration such as '10 s'"),
        (ClusterOptions.FRAMESIZE, "huge", "'64m', '10 mb' or '1g'"),
        (TaskManagerOptions.PARTITION_SERVING, "carrier-pigeon", "one of AUTO, NETWORK, SHARED"),
        (RestartStrategyOptions.TYPE, "sometimes", "none, fixed-delay, exponential-delay or failure-rate"),
        (StateBackendOptions.STATE_BACKEND, "memory", "hashmap or rocksdb"),
        (CheckpointingOptions.NUM_RETAINED, 0, "at least 1"),
        (CheckpointingOptions.TIMEOUT, "0 s", "positive duration"),
        (CheckpointingOptions.INTERVAL, "often", "a duration"),
    ],
)
def test_a_bad_value_names_the_key_the_value_and_what_is_accepted(
    option: ConfigOption[Any], value: Any, expected: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        get(option, value)
    message = str(raised.value)
    assert message.startswith(option.key), message
    assert repr(value) in message and expected in message, message


def test_defaults_come_from_the_option_and_are_typed() -> None:
    config = Configuration()
    assert config.get(CheckpointingOptions.TIMEOUT) == 600_000.0
    assert config.get(CheckpointingOptions.NUM_RETAINED) == 1
    assert config.get(CheckpointingOptions.INTERVAL) is None
    assert config.get(RestartStrategyOptions.TYPE) == "none"
    assert config.get(JobManagerOptions.EXECUTION_FAILOVER_STRATEGY) == "region"
    assert config.get(StateBackendOptions.STATE_BACKEND) is None
    assert config.get(SavepointConfigOptions.SAVEPOINT_PATH) is None
    assert config.get(JobStoreOptions.URL) is None
    assert Configuration({JobStoreOptions.URL.key: ""}).get(JobStoreOptions.URL) == ""  # "" is "no store"
    assert config.get(CoreOptions.TMP_DIRS).endswith("flink-runtime-data")


def test_every_option_is_declared_once_with_a_description_and_a_default_that_parses() -> None:
    declared = [option for group in GROUPS for option in options_of(group)]
    assert len(declared) == len(OPTIONS) == len({option.key for option in declared})
    for option in declared:
        assert option.description.strip().endswith("."), f"{option.key}: describe it in a sentence"
        option.parse(option.default)  # no ConfigurationError for a shipped default
    for group in GROUPS:
        assert group.TITLE and options_of(group), group  # type: ignore[attr-defined]


def test_as_written_quotes_the_setting_for_messages() -> None:
    assert Configuration().as_written(JobManagerOptions.PLANNER_MEMORY) == "2 gb"
    assert Configuration({"jobmanager.planner.memory": "512m"}).as_written(JobManagerOptions.PLANNER_MEMORY) == "512m"


# -- restart strategies read through the options ----------------------------------------------


def test_restart_strategy_defaults_are_the_options() -> None:
    assert isinstance(restart_strategy(Configuration()), NoRestart)
    fixed = restart_strategy(Configuration({"restart-strategy.type": "fixed-delay"}))
    assert isinstance(fixed, FixedDelayRestart) and (fixed.attempts, fixed.delay) == (1, 1.0)
    exponential = restart_strategy(Configuration({"restart-strategy.type": "exponential-delay"}))
    assert isinstance(exponential, ExponentialDelayRestart)
    assert (exponential.initial_backoff, exponential.max_backoff, exponential.attempts) == (1.0, 300.0, None)


# -- what a job may override --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "restart-strategy.type",
        "execution.checkpointing.interval",
        "state.backend.type",
        "jobmanager.execution.failover-strategy",
        "state.backend.rocksdb.block.cache-size",  # undeclared, in a namespace a job may set
        "my.own.setting",  # a job's own key
    ],
)
def test_a_job_may_override_job_settings_and_carry_its_own(key: str) -> None:
    value = {"restart-strategy.type": "fixed-delay", "state.backend.type": "rocksdb"}.get(key, "region")
    if key == "execution.checkpointing.interval":
        value = "10 s"
    assert job_config_problems({key: value}, Configuration()) == []


@pytest.mark.parametrize(
    "key",
    [
        "rest.port",
        "io.tmp.dirs",
        "execution.checkpointing.min-interval",
        "slot.request.timeout",  # read by the ResourceManager from the cluster's config only
        "task.cancellation.timeout",  # read by the TaskManager from its own config only
        "jobmanager.recovery.max-attempts",
        "taskmanager.memory.process.size",  # undeclared, in a namespace of cluster settings only
        "env.java.opts",
    ],
)
def test_a_job_setting_a_cluster_option_is_refused_by_name(key: str) -> None:
    [problem] = job_config_problems({key: "1"}, Configuration())
    assert problem.startswith(f"config[{key!r}]: {key} is a cluster setting"), problem


def test_the_job_overridable_flag_decides_and_each_value_is_parsed() -> None:
    for option in OPTIONS.values():
        problems = job_config_problems({option.key: option.default}, Configuration())
        assert bool(problems) != option.job_overridable, (option.key, problems)
    [problem] = job_config_problems({"restart-strategy.fixed-delay.attempts": "x"}, Configuration())
    assert problem == (
        "config['restart-strategy.fixed-delay.attempts']: restart-strategy.fixed-delay.attempts: "
        "expected a whole number >= 0, got 'x'."
    )


def test_a_job_interval_below_the_clusters_minimum_is_refused() -> None:
    cluster = Configuration({"execution.checkpointing.min-interval": "1 min"})
    [problem] = job_config_problems({"execution.checkpointing.interval": "10 s"}, cluster)
    assert "more often than the cluster allows" in problem and "60 s" in problem
    assert job_config_problems({"execution.checkpointing.interval": "2 min"}, cluster) == []
    assert job_config_problems({"execution.checkpointing.interval": "0"}, cluster) == []  # off
