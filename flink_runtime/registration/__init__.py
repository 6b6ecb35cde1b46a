"""A TaskManager's registration at the JobManager, retried with back-off until it is
accepted (retrying.py, after Flink's RetryingRegistration)."""

from flink_runtime.registration.retrying import (
    NextAttempt,
    RegistrationOutcome,
    RegistrationSuccess,
    RetryingRegistration,
    RetryingRegistrationConfiguration,
    next_attempt,
)

__all__ = [
    "NextAttempt",
    "RegistrationOutcome",
    "RegistrationSuccess",
    "RetryingRegistration",
    "RetryingRegistrationConfiguration",
    "next_attempt",
]
