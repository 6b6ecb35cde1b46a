"""A TaskManager's logs and thread dump, as the JobManager's REST API asks for them
(flink_runtime/logs/; the TaskManager's side is taskmanager/log_service.py).
"""

from __future__ import annotations

from flink_runtime.rpc.messages.base import Message


class LogFileInfo(Message):
    name: str
    size: int
    mtime: int  # epoch milliseconds, as Flink's LogInfo


class RequestLogFiles(Message):
    """JM -> TM: which log files do you write (the REST API's /taskmanagers/:id/logs)?"""


class LogFiles(Message):
    files: list[LogFileInfo] = []
    # The current log and the stdout copy among them ("" when the process writes none).
    log_name: str = ""
    out_name: str = ""


class RequestLogFile(Message):
    """JM -> TM: bytes of one of its log files, at most `max_bytes`.

    `first`/`last` are an HTTP byte range, resolved by the TaskManager against the file
    as it reads it (logs/ranges.py): first-last inclusive; first- to the end; last
    alone (first None) the file's last `last` bytes; neither: its tail.
    """

    name: str
    first: int | None = None
    last: int | None = None
    max_bytes: int = 1 << 20


class LogFileChunk(Message):
    name: str
    offset: int
    file_size: int
    partial: bool
    data: bytes = b""


class LogFileRefused(Message):
    name: str
    # "invalid-name", "not-found" or "range" (outside the file of `file_size` bytes).
    kind: str
    reason: str
    file_size: int = 0


class RequestTaskLog(Message):
    """JM -> TM: the job's task-tagged log records, of one vertex and subtask if given."""

    job_id: str
    vertex_id: str | None = None
    subtask_index: int | None = None
    # Only records stamped at or after this ("YYYY-MM-DD HH:MM:SS,mmm", the log's own stamp).
    since: str = ""
    max_bytes: int = 1 << 20


class TaskLogLines(Message):
    records: list[str] = []  # oldest first; a record is a line and its traceback lines
    truncated: bool = False  # older records were left out (max_bytes)


class RequestThreadDump(Message):
    """JM -> TM: the stacks of your Python threads (/taskmanagers/:id/thread-dump)."""


class ThreadDump(Message):
    threads: list[tuple[str, str]] = []  # (name, stack as Java's ThreadInfo prints it)
