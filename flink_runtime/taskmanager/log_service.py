"""How a TaskManager hands out its log files: the JobManager asks, for the REST API.

Flink's TaskExecutor serves its log list and files to the REST handlers the same way
(requestLogList, requestFileUploadByName). The files are those this process writes
(flink_runtime/logs: `env.log.dir`); TaskManagers of one MiniCluster share their
process's files. Every read runs on a worker thread (the mailbox never waits on the
disk), is bounded, and reaches only files of the process's own list (logs/reading.py).

`LogService` is a component of the TaskExecutor: its handlers of RequestLogFiles,
RequestLogFile and RequestTaskLog delegate here and answer once the read is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from flink_runtime.logs import service
from flink_runtime.rpc.messages import (
    LogFileChunk,
    LogFileRefused,
    LogFiles,
    RequestLogFile,
    RequestTaskLog,
    TaskLogLines,
)


class LogReader(Protocol):
    """Reads the process's log files (logs/service.py's functions)."""

    def log_files(self) -> LogFiles: ...

    def log_file(self, request: RequestLogFile) -> LogFileChunk | LogFileRefused: ...

    def task_log(self, request: RequestTaskLog) -> TaskLogLines: ...


class LogService:
    """The process's log files, read off the mailbox. `reader` is logs/service.py (the
    files under env.log.dir); `run_in_thread` is asyncio.to_thread (a test may pass its own)."""

    def __init__(
        self, reader: LogReader = service, run_in_thread: Callable[..., Awaitable[Any]] = asyncio.to_thread
    ) -> None:
        self._reader = reader
        self._run_in_thread = run_in_thread

    def log_files(self) -> Awaitable[LogFiles]:
        return self._run_in_thread(self._reader.log_files)

    def log_file(self, message: RequestLogFile) -> Awaitable[LogFileChunk | LogFileRefused]:
        return self._run_in_thread(self._reader.log_file, message)

    def task_log(self, message: RequestTaskLog) -> Awaitable[TaskLogLines]:
        return self._run_in_thread(self._reader.task_log, message)
