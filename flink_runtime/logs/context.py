"""Which task a log line comes from: the tag `[job=... vertex=... subtask=N attempt=N]`.

A task's thread binds its identity once, at the start of its run (Task._run), in a
context variable. A thread starts with an empty context and the task thread ends with
the task, so the binding never leaks to another task or to the TaskManager's event
loop. Every record logged from that thread passes the file handler's `TaskTagFilter`,
which adds the fields; the format prints them between the logger name and the message:

    2026-11-23 10:31:04,977 INFO  flink_runtime.taskmanager.task [job=4f1c... vertex=sum subtask=0 attempt=0] ...

Lines logged outside a task (the TaskManager itself, the JobManager) carry no tag.
Threads a task starts itself (user code's own pools, py4j callbacks) carry none either.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

# Flink's layout (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %c %x - %m%n`), with the task tag.
LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s %(task_tag)s%(message)s"


class TaskIdentity(Protocol):
    """What a TaskDeploymentDescriptor says about the task (all the tag needs)."""

    job_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int


@dataclass(frozen=True)
class TaskLogContext:
    job_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int

    @property
    def tag(self) -> str:
        # Job ids are 32 hex digits and vertex ids [A-Za-z0-9_.-] (jobgraph.Identifier):
        # neither holds a space or a bracket, so the tag parses back unambiguously.
        return (
            f"[job={self.job_id} vertex={self.vertex_id} subtask={self.subtask_index} attempt={self.attempt_number}] "
        )


_current_task: ContextVar[TaskLogContext | None] = ContextVar("flink_runtime_task", default=None)


def bind_task(task: TaskIdentity) -> None:
    """Tag every line the calling thread logs from now on with this task."""
    _current_task.set(TaskLogContext(task.job_id, task.vertex_id, task.subtask_index, task.attempt_number))


def current_task() -> TaskLogContext | None:
    return _current_task.get()


class TaskTagFilter(logging.Filter):
    """Adds `task_tag` (and job_id, vertex_id, subtask_index, attempt_number) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, "task_tag"):
            return True  # stamped already, in the thread that logged it (logs/queued.py)
        task = _current_task.get()
        record.task_tag = task.tag if task is not None else ""
        record.job_id = task.job_id if task is not None else None
        record.vertex_id = task.vertex_id if task is not None else None
        record.subtask_index = task.subtask_index if task is not None else None
        record.attempt_number = task.attempt_number if task is not None else None
        return True


class LineFormatter(logging.Formatter):
    """logging.Formatter whose `asctime` reuses the date and time of the second before.

    The stock formatTime converts and strftime's every record's time; a TaskManager with
    many short tasks writes thousands of lines a second, mostly within the same second.
    The text is the same: "%Y-%m-%d %H:%M:%S,mmm" in local time (or datefmt's, uncached)."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        # (second, its text), replaced as one object: a thread racing another reads a pair.
        self._cached: tuple[int, str] = (-1, "")
        # The %-format and whether it shows the time, looked at once instead of per line.
        self._percent_format = self._style._fmt if type(self._style) is logging.PercentStyle else None
        self._uses_time = self.usesTime()

    def format(self, record: logging.LogRecord) -> str:
        """logging.Formatter.format's text; a line without exception or stack (nearly all)
        skips its per-line look-ups (the format's time check, the style's calls)."""
        fmt = self._percent_format
        if fmt is None or record.exc_info or record.exc_text or record.stack_info or self._style._defaults:
            return super().format(record)
        record.message = record.getMessage()
        if self._uses_time:
            record.asctime = self.formatTime(record, self.datefmt)
        try:
            return fmt % record.__dict__
        except KeyError as exc:  # as PercentStyle.format says it
            raise ValueError(f"Formatting field not found in record: {exc}") from None

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        if datefmt is not None or self.converter is not time.localtime:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached_second, text = self._cached
        if second != cached_second:
            text = time.strftime(self.default_time_format, time.localtime(second))
            self._cached = (second, text)
        return self.default_msec_format % (text, record.msecs)
