"""The job's exception history: what failed, where and when (Flink's REST field names)."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any


@dataclass
class ExceptionEntry:
    """One entry of the job's exception history."""

    exception_name: str
    stacktrace: str
    timestamp: float
    task_name: str | None = None
    location: str | None = None
    task_manager_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "exceptionName": self.exception_name,
            "stacktrace": self.stacktrace,
            "timestamp": int(self.timestamp * 1000),
            "failureLabels": {},
            "taskName": self.task_name,
            "endpoint": self.location,
            "taskManagerId": self.task_manager_id,
            # Failures of other subtasks in the same failover: reported as entries of their own.
            "concurrentExceptions": [],
        }


def task_failure_entry(error: str, task_name: str, location: str | None, task_manager_id: str | None) -> ExceptionEntry:
    """A subtask reported FAILED with this text (its traceback, from the TaskManager)."""
    first_line = error.splitlines()[0] if error else "failure"
    name = first_line.split(":", 1)[0] if ":" in first_line else "TaskFailure"
    return ExceptionEntry(name, error, time.time(), task_name, location, task_manager_id)


def exception_entry(exc: BaseException, task_name: str | None = None, message: str | None = None) -> ExceptionEntry:
    """An exception raised on the JobManager (preparing, publishing, a savepoint)."""
    name = type(exc).__name__
    trace = f"{name}: {message or exc}\n\n" + "".join(traceback.format_exception(exc))
    return ExceptionEntry(name, trace, time.time(), task_name)


def user_code_entry(cause_name: str, message: str, cause_trace: str) -> ExceptionEntry:
    """The job's own code raised in the planner process: its exception comes as text."""
    return ExceptionEntry(cause_name, f"{cause_name}: {message}\n\n{cause_trace}", time.time())
