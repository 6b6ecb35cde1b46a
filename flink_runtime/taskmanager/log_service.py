"""How a TaskManager hands out its log files: the JobManager asks, for the REST API.

Flink's TaskExecutor serves its log list and files to the REST handlers the same way
(requestLogList, requestFileUploadByName). The files are those this process writes
(flink_runtime/logs: `env.log.dir`); TaskManagers of one MiniCluster share their
process's files. Every read runs on a worker thread (the mailbox never waits on the
disk), is bounded, and reaches only files of the process's own list (logs/reading.py).

`LogService` is part of the TaskExecutor (a mixin: its handlers run in its mailbox and
answer once the read is done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from flink_runtime.logs import service
from flink_runtime.rpc.endpoint import handles
from flink_runtime.rpc.messages import (
    LogFileChunk,
    LogFileRefused,
    LogFiles,
    RequestLogFile,
    RequestLogFiles,
    RequestTaskLog,
    TaskLogLines,
)


class LogService:
    """The TaskExecutor's answers to RequestLogFiles, RequestLogFile and RequestTaskLog."""

    @handles(RequestLogFiles)
    def _on_request_log_files(self, message: RequestLogFiles) -> Awaitable[LogFiles]:
        return asyncio.to_thread(service.log_files)

    @handles(RequestLogFile)
    def _on_request_log_file(self, message: RequestLogFile) -> Awaitable[LogFileChunk | LogFileRefused]:
        return asyncio.to_thread(service.log_file, message)

    @handles(RequestTaskLog)
    def _on_request_task_log(self, message: RequestTaskLog) -> Awaitable[TaskLogLines]:
        return asyncio.to_thread(service.task_log, message)
