"""Registering with retries, as Flink's RetryingRegistration.

A TaskManager registers by asking the JobManager RegisterTaskManager until it is
accepted (AcknowledgeRegistration, or AlreadyRegistered from a JobManager that knows
it already). Each attempt waits for its answer at most a timeout, and what follows
depends on how it ended:

- no answer in time: try again at once, the timeout doubled (from
  `cluster.registration.initial-timeout` up to `cluster.registration.max-timeout`): a
  JobManager that is starting is found within a fraction of a second, one that is down
  for long is not flooded with requests;
- refused (RefuseRegistration: a wrong cluster secret, another protocol version): wait
  `cluster.registration.refused-registration-delay`, then start over from the initial
  timeout; the reason is logged each time, for whoever fixes the configuration;
- any other error (an error answer, a message that cannot be sent, even a bug while
  building the request): log it, wait `cluster.registration.error-delay`, then start
  over from the initial timeout. An error comes back at once, so without the delay the
  loop would spin.

Only success or cancellation ends the loop. The decision is `next_attempt`, pure; the
RetryingRegistration runs it with the ask and sleep it is given.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.rpc.messages import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    Message,
    RefuseRegistration,
    RegisterTaskManager,
)
from flink_runtime.rpc.service import AskTimeoutError, RpcException

log = logging.getLogger(__name__)

RegistrationSuccess = AcknowledgeRegistration | AlreadyRegistered
Ask = Callable[[str, Message, float], Awaitable[Message]]


class RegistrationOutcome(enum.Enum):
    """How an unsuccessful attempt ended."""

    TIMEOUT = "timeout"
    REFUSED = "refused"
    ERROR = "error"


@dataclass(frozen=True)
class RetryingRegistrationConfiguration:
    """Seconds, from the `cluster.registration.*` keys."""

    initial_timeout: float
    max_timeout: float
    error_delay: float
    refused_delay: float

    @classmethod
    def from_configuration(cls, config: Configuration) -> RetryingRegistrationConfiguration:
        return cls(
            initial_timeout=config.get_seconds(cfg.REGISTRATION_INITIAL_TIMEOUT),
            max_timeout=config.get_seconds(cfg.REGISTRATION_MAX_TIMEOUT),
            error_delay=config.get_seconds(cfg.REGISTRATION_ERROR_DELAY),
            refused_delay=config.get_seconds(cfg.REGISTRATION_REFUSED_DELAY),
        )


@dataclass(frozen=True)
class NextAttempt:
    delay: float  # seconds to wait before it
    timeout: float  # seconds it waits for its answer


def next_attempt(
    config: RetryingRegistrationConfiguration, timeout: float, outcome: RegistrationOutcome
) -> NextAttempt:
    """The attempt after one that waited `timeout` and ended with `outcome`."""
    if outcome is RegistrationOutcome.TIMEOUT:
        return NextAttempt(delay=0.0, timeout=min(timeout * 2, config.max_timeout))
    if outcome is RegistrationOutcome.REFUSED:
        return NextAttempt(delay=config.refused_delay, timeout=config.initial_timeout)
    return NextAttempt(delay=config.error_delay, timeout=config.initial_timeout)


class RetryingRegistration:
    """One registration of a TaskManager at `target_address`, retried until accepted.

    `await run()` returns the accepting answer; `cancel()` (or cancelling the task that
    runs it) stops it between or during attempts. `request` builds each attempt's
    RegisterTaskManager anew, so what it reports (memory, the address) is current.
    """

    def __init__(
        self,
        target_address: str,
        ask: Ask,
        request: Callable[[], RegisterTaskManager],
        config: RetryingRegistrationConfiguration,
        *,
        name: str = "TaskManager",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.target_address = target_address
        self.config = config
        self.name = name
        self.attempts = 0
        self._ask = ask
        self._request = request
        self._sleep = sleep
        self._canceled = False
        self._task: asyncio.Task[object] | None = None

    @property
    def canceled(self) -> bool:
        return self._canceled

    def cancel(self) -> None:
        self._canceled = True
        if self._task is not None and not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()

    async def run(self) -> RegistrationSuccess:
        self._task = asyncio.current_task()
        timeout = self.config.initial_timeout
        while True:
            if self._canceled:
                raise asyncio.CancelledError(f"registration of {self.name} at {self.target_address} cancelled")
            self.attempts += 1
            outcome = await self._attempt(timeout)
            if not isinstance(outcome, RegistrationOutcome):
                return outcome
            step = next_attempt(self.config, timeout, outcome)
            timeout = step.timeout
            if step.delay > 0:
                await self._sleep(step.delay)

    async def _attempt(self, timeout: float) -> RegistrationSuccess | RegistrationOutcome:
        where = f"registration attempt {self.attempts} of {self.name} at {self.target_address}"
        try:
            answer = await self._ask(self.target_address, self._request(), timeout)
        except AskTimeoutError:
            log.debug("%s: no answer within %.3g s", where, timeout)
            return RegistrationOutcome.TIMEOUT
        except RpcException as exc:
            log.warning("%s failed: %s; next in %.3g s", where, exc, self.config.error_delay)
            return RegistrationOutcome.ERROR
        except Exception as exc:  # a bug must not end the registration for good
            log.error("%s raised; next in %.3g s", where, self.config.error_delay, exc_info=exc)
            return RegistrationOutcome.ERROR
        if isinstance(answer, AcknowledgeRegistration | AlreadyRegistered):
            return answer
        if isinstance(answer, RefuseRegistration):
            log.error("JobManager refused %s: %s; next in %.3g s", where, answer.reason, self.config.refused_delay)
            return RegistrationOutcome.REFUSED
        log.error("%s: unexpected answer %s; next in %.3g s", where, type(answer).__name__, self.config.error_delay)
        return RegistrationOutcome.ERROR
