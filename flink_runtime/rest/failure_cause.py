"""Flink's `failure-cause` JSON: the exception's class and stack trace, as Flink's
SerializedThrowable answers them in a failed job's execution result and a failed
asynchronous operation's status."""

from __future__ import annotations

from typing import Any


def failure_cause(class_name: str, stack_trace: str) -> dict[str, Any]:
    return {"class": class_name, "stack-trace": stack_trace}
