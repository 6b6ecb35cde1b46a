"""Restart strategies decide from Flink's keys whether and when a failed job restarts."""

from __future__ import annotations

import random

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.scheduler.failover import ExecutionFailureHandler, FailureHandlingResult
from flink_runtime.scheduler.restart import (
    ExponentialDelayRestart,
    FailureRateRestart,
    FixedDelayRestart,
    NoRestart,
    restart_strategy,
)


def test_none_never_restarts() -> None:
    assert NoRestart().on_failure(0.0) is None
    assert isinstance(restart_strategy(Configuration()), NoRestart)


def test_fixed_delay_gives_up_after_its_attempts() -> None:
    strategy = restart_strategy(
        Configuration(
            {
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": "2",
                "restart-strategy.fixed-delay.delay": "250 ms",
            }
        )
    )
    assert isinstance(strategy, FixedDelayRestart)
    assert [strategy.on_failure(t) for t in (0.0, 1.0, 2.0)] == [0.25, 0.25, None]


def test_exponential_delay_doubles_up_to_the_maximum_and_resets_after_a_quiet_period() -> None:
    strategy = ExponentialDelayRestart(
        initial_backoff=1.0, max_backoff=5.0, multiplier=2.0, reset_threshold=60.0, jitter=0.0, attempts=None
    )
    assert [strategy.on_failure(t) for t in (0, 1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert strategy.on_failure(100.0) == 1.0


def test_exponential_delay_jitter_stays_within_its_factor() -> None:
    strategy = ExponentialDelayRestart(1.0, 10.0, 2.0, 3600.0, 0.1, None, rng=random.Random(1))
    delay = strategy.on_failure(0.0)
    assert delay is not None and 0.9 <= delay <= 1.1


def test_exponential_delay_attempts_before_reset() -> None:
    strategy = ExponentialDelayRestart(1.0, 10.0, 2.0, 3600.0, 0.0, attempts=2)
    assert [strategy.on_failure(t) for t in (0, 1, 2)] == [1.0, 2.0, None]


def test_failure_rate_counts_failures_within_the_interval() -> None:
    strategy = restart_strategy(
        Configuration(
            {
                "restart-strategy.type": "failure-rate",
                "restart-strategy.failure-rate.max-failures-per-interval": "2",
                "restart-strategy.failure-rate.failure-rate-interval": "10 s",
                "restart-strategy.failure-rate.delay": "1 s",
            }
        )
    )
    assert isinstance(strategy, FailureRateRestart)
    assert strategy.on_failure(0.0) == 1.0
    assert strategy.on_failure(5.0) == 1.0
    assert strategy.on_failure(20.0) == 1.0  # the first two fell out of the interval
    assert strategy.on_failure(21.0) == 1.0
    assert strategy.on_failure(22.0) is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"restart-strategy.type": "sometimes"}, "unknown strategy 'sometimes'"),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "x"}, "attempts"),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "soon"}, "delay"),
    ],
)
def test_bad_configuration_names_the_key(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        restart_strategy(Configuration(values))


# -- the failure handler: restart strategy x failover strategy ------------------------------------


def test_region_failover_restarts_only_the_failed_subtask() -> None:
    handler: ExecutionFailureHandler[str] = ExecutionFailureHandler(FixedDelayRestart(2, 0.5), "region")
    result = handler.task_failed("map#1", ["source#0", "map#0", "map#1"], now=0.0)
    assert result == FailureHandlingResult(True, 0.5, frozenset({"map#1"}), global_failover=False)


def test_full_failover_restarts_every_subtask() -> None:
    handler: ExecutionFailureHandler[str] = ExecutionFailureHandler.from_config(
        Configuration({"restart-strategy.type": "fixed-delay", "jobmanager.execution.failover-strategy": "full"})
    )
    result = handler.task_failed("map#1", ["source#0", "map#1"], now=0.0)
    assert result.can_restart and result.global_failover
    assert result.vertices_to_restart == {"source#0", "map#1"}


def test_no_restart_left_means_the_job_fails() -> None:
    handler: ExecutionFailureHandler[str] = ExecutionFailureHandler(FixedDelayRestart(1, 0.0), "region")
    assert handler.task_failed("a", ["a"], now=0.0).can_restart
    second = handler.task_failed("a", ["a"], now=1.0)
    assert not second.can_restart and not second.vertices_to_restart
    assert not handler.global_failure(["a"], now=2.0).can_restart


def test_an_unknown_failover_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="region or full"):
        ExecutionFailureHandler(NoRestart(), "partial")
