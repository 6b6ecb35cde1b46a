"""The answers to the log messages, for whichever process is asked.

A TaskManager answers them over RPC (taskmanager/log_service.py); the REST API calls
them directly for the JobManager's own files. Each call reads the disk: run it on a
worker thread (asyncio.to_thread), never on an event loop.
"""

from __future__ import annotations

from flink_runtime.logs.files import active
from flink_runtime.logs.ranges import MAX_ANSWER_BYTES, ByteRange, RangeNotSatisfiable
from flink_runtime.logs.reading import LogFileError, list_files, read_chunk, task_records
from flink_runtime.rpc.messages import (
    LogFileChunk,
    LogFileInfo,
    LogFileRefused,
    LogFiles,
    RequestLogFile,
    RequestTaskLog,
    TaskLogLines,
)


def log_files() -> LogFiles:
    """The files this process writes (none when it writes no log files)."""
    current = active()
    if current is None:
        return LogFiles()
    files = [LogFileInfo(name=info.name, size=info.size, mtime=info.mtime) for info in list_files(current)]
    return LogFiles(files=files, log_name=current.log_name, out_name=current.out_name)


def log_file(request: RequestLogFile) -> LogFileChunk | LogFileRefused:
    """A bounded slice of one of the files, or why not."""
    if min(request.first or 0, request.last or 0) < 0:
        return LogFileRefused(name=request.name, kind="range", reason="byte positions are never negative")
    byte_range = None
    if request.first is not None or request.last is not None:
        byte_range = ByteRange(request.first, request.last)
    bound = max(0, min(request.max_bytes, MAX_ANSWER_BYTES))
    try:
        chunk = read_chunk(active(), request.name, byte_range, bound)
    except LogFileError as exc:
        return LogFileRefused(name=request.name, kind=exc.kind, reason=str(exc))
    except RangeNotSatisfiable as exc:
        return LogFileRefused(name=request.name, kind="range", reason=str(exc), file_size=exc.file_size)
    except OSError as exc:  # unreadable (permissions, a disk error): say so, never fail the asker
        return LogFileRefused(name=request.name, kind="not-found", reason=f"cannot read {request.name}: {exc}")
    part = chunk.slice
    return LogFileChunk(
        name=request.name, offset=part.offset, file_size=part.file_size, partial=part.partial, data=chunk.data
    )


def task_log(request: RequestTaskLog) -> TaskLogLines:
    """The job's task-tagged records in this process's log files."""
    records, truncated = task_records(
        active(),
        request.job_id,
        request.vertex_id,
        request.subtask_index,
        since=request.since,
        max_bytes=max(0, min(request.max_bytes, MAX_ANSWER_BYTES)),
    )
    return TaskLogLines(records=records, truncated=truncated)
