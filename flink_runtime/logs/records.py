"""Log records of one call site made by copying one made the ordinary way.

A TaskManager's task thread logs a "switched from X to Y" line per transition, three
per task. `LogRecord.__init__` derives the same fields every time (file name and module
from the path, level name, process and its name); with no-op tasks that was about a
seventh of a task thread's own work (a task's Task() and run alone: 39 -> 34 µs).
`RecordTemplate` makes one record the ordinary way, through the logger's `makeRecord`,
and then copies its fields, setting only what differs per line: the arguments, the
times, the thread. The record is the same as makeRecord's
(same class, same fields, same values). With a record factory other than LogRecord set
(`logging.setLogRecordFactory`), every record comes from that factory as before.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any


class RecordTemplate:
    """Makes the records of `logger.log(level, message, *args)` at one call site."""

    def __init__(self, logger: logging.Logger, level: int, message: str, pathname: str, function: str) -> None:
        self._logger = logger
        self._level = level
        self._message = message
        self._pathname = pathname
        self._function = function
        self._fields: dict[str, Any] | None = None
        self._pid = -1

    def make(self, args: tuple[Any, ...]) -> logging.LogRecord:
        """What logger.makeRecord(...) would return for these arguments (called in the
        thread that logs: the record names that thread)."""
        fields = self._fields
        if logging.getLogRecordFactory() is not logging.LogRecord:
            fields = None  # someone's own factory: it makes every record
        elif fields is None or self._pid != os.getpid():  # the first line, or a forked child
            first = self._make(args)
            self._fields = dict(vars(first))
            self._pid = first.process if first.process is not None else os.getpid()
            return first
        if fields is None or (len(args) == 1 and isinstance(args[0], Mapping)):
            return self._make(args)  # (LogRecord takes a lone mapping for the arguments)
        record = logging.LogRecord.__new__(logging.LogRecord)
        values = fields.copy()
        # As LogRecord.__init__ sets them.
        now = time.time()
        values["args"] = args
        values["created"] = now
        values["msecs"] = int((now - int(now)) * 1000) + 0.0
        values["relativeCreated"] = (now - logging._startTime) * 1000  # type: ignore[attr-defined]
        if logging.logThreads:
            values["thread"] = threading.get_ident()
            values["threadName"] = threading.current_thread().name
        record.__dict__.update(values)
        return record

    def _make(self, args: tuple[Any, ...]) -> logging.LogRecord:
        return self._logger.makeRecord(
            self._logger.name, self._level, self._pathname, 0, self._message, args, None, self._function
        )
