"""Reading a process's log files for others: listing, byte slices, a task's lines.

Everything here runs on a worker thread (asyncio.to_thread), never on an event loop,
and every read is bounded.

Only the files the process writes can be read, by their bare names as `list_files`
gives them. A name is refused before it touches the file system when it could point
elsewhere (a separator, `..`, an absolute path, a NUL, a leading dot); then it must be
one of the listed names; then the file is opened without following a symlink
(O_NOFOLLOW) and must be a regular file inside the directory.
"""

from __future__ import annotations

import collections
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from flink_runtime.logs.files import ProcessLogs
from flink_runtime.logs.ranges import MAX_ANSWER_BYTES, ByteRange, Slice, resolve

# The start of a record: the formatter's timestamp (later lines of the record, such as a
# traceback, have none and belong to the record before them).
_TIMESTAMP = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_TAG = re.compile(rb"^\S+ \S+ \S+ +\S+ \[job=(\S+) vertex=(\S+) subtask=(\d+) attempt=(\d+)\] ")
_BLOCK = 64 << 10
MAX_NAME_LENGTH = 255


class LogFileError(Exception):
    """A file that cannot be served: `kind` is "invalid-name" (400) or "not-found" (404)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    mtime: int  # epoch milliseconds, as Flink's LogInfo


@dataclass(frozen=True)
class Chunk:
    slice: Slice
    data: bytes


def list_files(logs: ProcessLogs | None) -> list[FileInfo]:
    """The process's files, current log first, then the rotated ones, then stdout."""
    if logs is None:
        return []
    infos = []
    for name in logs.names():
        try:
            status = os.lstat(logs.directory / name)
        except OSError:
            continue  # rotated away since it was listed
        if stat.S_ISREG(status.st_mode):
            infos.append(FileInfo(name, status.st_size, int(status.st_mtime * 1000)))
    return infos


def check_name(name: str) -> None:
    """Refuse a name that could reach beyond the log directory (LogFileError invalid-name)."""
    if (
        not name
        or len(name) > MAX_NAME_LENGTH
        or "\x00" in name
        or "/" in name
        or "\\" in name
        or name.startswith(".")
        or os.path.isabs(name)
    ):
        raise LogFileError("invalid-name", f"{name!r} is not a log file name: use a name from the list of log files.")


def read_chunk(
    logs: ProcessLogs | None, name: str, byte_range: ByteRange | None, bound: int = MAX_ANSWER_BYTES
) -> Chunk:
    """A slice of one of the process's files (RangeNotSatisfiable, LogFileError)."""
    check_name(name)
    if logs is None or name not in logs.names():
        raise LogFileError("not-found", f"No log file {name!r}: it is not one of this process's log files.")
    fd = _open_inside(logs.directory, name)
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        part = resolve(byte_range, size, bound)
        file.seek(part.offset)
        return Chunk(part, file.read(part.length))


def _open_inside(directory: Path, name: str) -> int:
    path = directory / name
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        raise LogFileError("not-found", f"No log file {name!r} (gone, or a link, which is never followed).") from None
    inside = os.path.realpath(path).startswith(os.path.realpath(directory) + os.sep)
    if not stat.S_ISREG(os.fstat(fd).st_mode) or not inside:
        os.close(fd)
        raise LogFileError("not-found", f"No log file {name!r}: not a regular file in the log directory.")
    return fd


# -- a task's lines ----------------------------------------------------------------------------


def task_records(
    logs: ProcessLogs | None,
    job_id: str,
    vertex_id: str | None = None,
    subtask_index: int | None = None,
    since: str = "",
    max_bytes: int = MAX_ANSWER_BYTES,
) -> tuple[list[str], bool]:
    """The job's tagged records (a line, with the traceback lines after it), oldest first.

    Only records of that vertex and subtask when given, only those stamped at or after
    `since` (the formatter's timestamp, "YYYY-MM-DD HH:MM:SS,mmm") when given. At most
    `max_bytes` of them, the newest: the files are read backwards and reading stops there.
    Returns (records, truncated).
    """
    if logs is None:
        return [], False
    needle = f"[job={job_id} ".encode()
    found: collections.deque[str] = collections.deque()
    size = 0
    for name in reversed(logs.log_names_oldest_first()):
        try:
            fd = _open_inside(logs.directory, name)
        except LogFileError:
            continue  # rotated away meanwhile
        with os.fdopen(fd, "rb") as file:
            for head, record in _records_backwards(file):
                stamp = _TIMESTAMP.match(head)
                if since and stamp is not None and stamp.group(1).decode() < since:
                    return list(found), False
                if needle not in head or not _matches(head, job_id, vertex_id, subtask_index):
                    continue
                size += len(record)
                if size > max_bytes:
                    return list(found), True
                found.appendleft(record.decode("utf-8", "replace").rstrip("\n"))
    return list(found), False


def _matches(head: bytes, job_id: str, vertex_id: str | None, subtask_index: int | None) -> bool:
    tag = _TAG.match(head)
    if tag is None or tag.group(1).decode() != job_id:
        return False
    if vertex_id is not None and tag.group(2).decode() != vertex_id:
        return False
    return subtask_index is None or int(tag.group(3)) == subtask_index


def _records_backwards(file: BinaryIO) -> Iterator[tuple[bytes, bytes]]:
    """(first line, whole record) of each record, newest first."""
    continuation: list[bytes] = []
    for line in _lines_backwards(file):
        if _TIMESTAMP.match(line):
            yield line, line + b"".join(reversed(continuation))
            continuation = []
        else:
            continuation.append(line)
    # Lines before the file's first record: the tail of a record rotated into the older file.


def _lines_backwards(file: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file from its last to its first (each with its newline)."""
    position = file.seek(0, os.SEEK_END)
    tail = b""
    while position > 0:
        step = min(_BLOCK, position)
        position -= step
        file.seek(position)
        block = file.read(step) + tail
        lines = block.split(b"\n")
        tail = lines[0]
        for line in reversed(lines[1:]):
            if line:
                yield line + b"\n"
    if tail:
        yield tail + b"\n"
