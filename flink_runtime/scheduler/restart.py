"""Restart strategies, by Flink's configuration keys.

A strategy decides, after a task failure, whether the job restarts and after how
long. Time is passed in (`now`, seconds) so the rules are testable without waiting.
`restart-strategy.type` picks none, fixed-delay, exponential-delay or failure-rate; each
one's keys, defaults and checks are declared in RestartStrategyOptions (the "Restart
strategies" table of docs/configuration.md).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Protocol

from flink_runtime.configuration import Configuration, JobManagerOptions, RestartStrategyOptions


class RestartStrategy(Protocol):
    def on_failure(self, now: float) -> float | None:
        """Record a failure; the delay in seconds before restarting, or None to give up."""
        ...

    def describe(self) -> str: ...


class NoRestart:
    def on_failure(self, now: float) -> float | None:
        return None

    def describe(self) -> str:
        return "restart-strategy.type is none"


class FixedDelayRestart:
    def __init__(self, attempts: int, delay: float) -> None:
        self.attempts = attempts
        self.delay = delay
        self.restarts = 0

    def on_failure(self, now: float) -> float | None:
        if self.restarts >= self.attempts:
            return None
        self.restarts += 1
        return self.delay

    def describe(self) -> str:
        return f"fixed-delay restart strategy: {self.restarts} of {self.attempts} attempts used"


class ExponentialDelayRestart:
    def __init__(
        self,
        initial_backoff: float,
        max_backoff: float,
        multiplier: float,
        reset_threshold: float,
        jitter: float,
        attempts: int | None,
        rng: random.Random | None = None,
    ) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.multiplier = multiplier
        self.reset_threshold = reset_threshold
        self.jitter = jitter
        self.attempts = attempts
        self._rng = rng or random.Random()
        self._backoff = initial_backoff
        self._last_failure: float | None = None
        self._attempts_since_reset = 0

    def on_failure(self, now: float) -> float | None:
        # A job that ran well for reset_threshold starts over from the initial backoff.
        if self._last_failure is not None and now - self._last_failure >= self.reset_threshold:
            self._backoff = self.initial_backoff
            self._attempts_since_reset = 0
        elif self._last_failure is not None:
            self._backoff = min(self._backoff * self.multiplier, self.max_backoff)
        self._last_failure = now
        if self.attempts is not None and self._attempts_since_reset >= self.attempts:
            return None
        self._attempts_since_reset += 1
        spread = self._backoff * self.jitter
        return max(0.0, self._backoff + self._rng.uniform(-spread, spread))

    def describe(self) -> str:
        return f"exponential-delay restart strategy: {self._attempts_since_reset} attempts since last reset"


class FailureRateRestart:
    def __init__(self, max_failures: int, interval: float, delay: float) -> None:
        self.max_failures = max_failures
        self.interval = interval
        self.delay = delay
        self._failures: deque[float] = deque()

    def on_failure(self, now: float) -> float | None:
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self.interval:
            self._failures.popleft()
        if len(self._failures) > self.max_failures:
            return None
        return self.delay

    def describe(self) -> str:
        return f"failure-rate restart strategy: more than {self.max_failures} failures within {self.interval:g} s"


def restart_strategy(config: Configuration) -> RestartStrategy:
    """The strategy a job's configuration asks for; ConfigurationError names a bad key."""
    options = RestartStrategyOptions
    match config.get(options.TYPE):  # "none" (or an alias of it) falls through
        case "fixed-delay":
            return FixedDelayRestart(
                config.get(options.FIXED_DELAY_ATTEMPTS), config.get_seconds(options.FIXED_DELAY_DELAY)
            )
        case "exponential-delay":
            return ExponentialDelayRestart(
                initial_backoff=config.get_seconds(options.EXPONENTIAL_DELAY_INITIAL_BACKOFF),
                max_backoff=config.get_seconds(options.EXPONENTIAL_DELAY_MAX_BACKOFF),
                multiplier=config.get(options.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER),
                reset_threshold=config.get_seconds(options.EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD),
                jitter=config.get(options.EXPONENTIAL_DELAY_JITTER_FACTOR),
                attempts=config.get(options.EXPONENTIAL_DELAY_ATTEMPTS),
            )
        case "failure-rate":
            return FailureRateRestart(
                config.get(options.FAILURE_RATE_MAX_FAILURES_PER_INTERVAL),
                config.get_seconds(options.FAILURE_RATE_INTERVAL),
                config.get_seconds(options.FAILURE_RATE_DELAY),
            )
    return NoRestart()


def failover_strategy(config: Configuration) -> str:
    """`region` (default, as Flink: restart only the failed subtask's region) or `full`."""
    return config.get(JobManagerOptions.EXECUTION_FAILOVER_STRATEGY)
