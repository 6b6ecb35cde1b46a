"""Registration with retries (registration/retrying.py), and its supervision in the TaskExecutor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.registration import (
    NextAttempt,
    RegistrationOutcome,
    RetryingRegistration,
    RetryingRegistrationConfiguration,
    next_attempt,
)
from flink_runtime.rpc.messages import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    Message,
    RefuseRegistration,
    RegisterTaskManager,
    TaskOperationResult,
)
from flink_runtime.rpc.service import AskTimeoutError, RpcException

CONFIG = RetryingRegistrationConfiguration(initial_timeout=0.1, max_timeout=1.0, error_delay=10.0, refused_delay=5.0)
ACCEPTED = AcknowledgeRegistration(registration_id="r", jobmanager_id="jm")


# -- the decision -------------------------------------------------------------------------------


def test_timeouts_double_up_to_the_maximum_without_a_pause() -> None:
    timeout = CONFIG.initial_timeout
    seen = []
    for _ in range(6):
        step = next_attempt(CONFIG, timeout, RegistrationOutcome.TIMEOUT)
        assert step.delay == 0.0
        timeout = step.timeout
        seen.append(timeout)
    assert seen == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_an_error_waits_the_error_delay_and_starts_over_from_the_initial_timeout() -> None:
    assert next_attempt(CONFIG, 0.8, RegistrationOutcome.ERROR) == NextAttempt(delay=10.0, timeout=0.1)


def test_a_refusal_waits_the_refused_delay_and_starts_over_from_the_initial_timeout() -> None:
    assert next_attempt(CONFIG, 0.8, RegistrationOutcome.REFUSED) == NextAttempt(delay=5.0, timeout=0.1)


def test_the_configuration_comes_from_the_cluster_registration_keys() -> None:
    config = Configuration(
        {
            "cluster.registration.initial-timeout": "200 ms",
            "cluster.registration.max-timeout": "5 s",
            "cluster.registration.error-delay": "3 s",
            "cluster.registration.refused-registration-delay": "4 s",
        }
    )
    assert RetryingRegistrationConfiguration.from_configuration(config) == RetryingRegistrationConfiguration(
        initial_timeout=0.2, max_timeout=5.0, error_delay=3.0, refused_delay=4.0
    )
    # Flink's default error delay.
    assert RetryingRegistrationConfiguration.from_configuration(Configuration()).error_delay == 10.0


# -- the loop, with a scripted JobManager --------------------------------------------------------


class ScriptedJobManager:
    """An `ask` that answers (or raises) what the script says, recording each timeout."""

    def __init__(self, *script: Message | BaseException) -> None:
        self.script = list(script)
        self.timeouts: list[float] = []

    async def ask(self, address: str, message: Message, timeout: float) -> Message:
        assert isinstance(message, RegisterTaskManager)
        self.timeouts.append(timeout)
        answer = self.script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def request() -> RegisterTaskManager:
    return RegisterTaskManager(task_manager_id="tm", address="tcp://127.0.0.1:1", host="127.0.0.1", slots=1)


def registration(
    jobmanager: ScriptedJobManager, sleeps: list[float], request: Callable[[], RegisterTaskManager] = request
) -> RetryingRegistration:
    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    return RetryingRegistration("tcp://jm:6123", jobmanager.ask, request, CONFIG, name="tm", sleep=sleep)


async def test_every_kind_of_failure_is_retried_until_accepted() -> None:
    jobmanager = ScriptedJobManager(
        AskTimeoutError("slow"),
        AskTimeoutError("slower"),
        RpcException("error answer"),
        RefuseRegistration(reason="wrong secret"),
        ValueError("not even an RPC error"),
        TaskOperationResult(execution_id="?", success=True),  # an answer that makes no sense
        AskTimeoutError("again"),
        AlreadyRegistered(registration_id="r", jobmanager_id="jm"),
    )
    sleeps: list[float] = []
    retrying_registration = registration(jobmanager, sleeps)
    answer = await retrying_registration.run()
    assert answer == AlreadyRegistered(registration_id="r", jobmanager_id="jm")
    assert retrying_registration.attempts == 8
    #                      timeout, timeout, error, refused, error, unexpected, timeout, accepted
    assert jobmanager.timeouts == pytest.approx([0.1, 0.2, 0.4, 0.1, 0.1, 0.1, 0.1, 0.2])
    assert sleeps == [10.0, 5.0, 10.0, 10.0]  # after the error, refusal, error, unexpected answer


async def test_a_failure_building_the_request_is_retried_too() -> None:
    calls = 0

    def flaky_request() -> RegisterTaskManager:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("psutil could not read the memory size")
        return request()

    jobmanager = ScriptedJobManager(ACCEPTED)
    sleeps: list[float] = []
    assert await registration(jobmanager, sleeps, flaky_request).run() == ACCEPTED
    assert sleeps == [CONFIG.error_delay]
    assert calls == 2


async def test_cancel_stops_a_registration_waiting_between_attempts() -> None:
    jobmanager = ScriptedJobManager(RefuseRegistration(reason="no"), ACCEPTED)
    retrying_registration = RetryingRegistration(
        "tcp://jm:6123", jobmanager.ask, request, CONFIG, sleep=asyncio.sleep
    )  # the real sleep: 5 s refused delay
    task = asyncio.create_task(retrying_registration.run())
    while not jobmanager.timeouts:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)  # now in the refused delay
    retrying_registration.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1.0)
    assert retrying_registration.canceled
    assert jobmanager.timeouts == [0.1]  # never asked again


async def test_a_registration_cancelled_before_it_runs_never_asks() -> None:
    jobmanager = ScriptedJobManager(ACCEPTED)
    retrying_registration = registration(jobmanager, [])
    retrying_registration.cancel()
    with pytest.raises(asyncio.CancelledError):
        await retrying_registration.run()
    assert jobmanager.timeouts == []
