"""A cluster process's log files, named and rotated as Flink's.

A JobManager, TaskManager or MiniCluster process writes into `env.log.dir`:

    flink-runtime-<role>-<id>-<host>.log      its log (rotated: .log.1 ... .log.<env.log.max>)
    flink-runtime-<role>-<id>-<host>.out      its stdout since it started

role is jobmanager, taskexecutor or minicluster (Flink's names); id is a TaskManager's
resource id, a JobManager's (or MiniCluster's) REST port, or the process id when that
port is picked at random. Both are unique among the processes alive on a host, so
processes sharing the directory never write one file, and a restarted process with the
same settings continues (and rotates) its predecessor's files instead of leaving new
ones behind. The `.log` rotates at `env.log.max-file-size` (logging.handlers); the
`.out` starts afresh with each start and stops growing at that size.

The handler hangs on the root logger, next to whatever else logs there (the command
line's stderr handler stays as it is). One set of files per process: a second
MiniCluster started in the same process shares the first one's (`acquire` counts),
and the handler comes off the root logger when the last one releases it.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import re
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.logs.context import LOG_FORMAT, LineFormatter, TaskTagFilter

ROLES = ("jobmanager", "taskexecutor", "minicluster")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_log_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "flink-runtime", "log")


def file_prefix(role: str, process_id: str, host: str | None = None) -> str:
    """`flink-runtime-<role>-<id>-<host>`, with anything but [A-Za-z0-9._-] replaced by `_`."""
    if role not in ROLES:
        raise ValueError(f"unknown process role {role!r}; expected one of {', '.join(ROLES)}")
    host = host or socket.gethostname() or "localhost"
    return f"flink-runtime-{role}-{_UNSAFE.sub('_', process_id)}-{_UNSAFE.sub('_', host)}"


def process_id_for(config: Configuration) -> str:
    """The id in a JobManager's or MiniCluster's file names: its REST port, else its pid."""
    port = config.get(cfg.REST_PORT)
    return str(port) if port else f"pid{os.getpid()}"


@dataclass
class ProcessLogs:
    """The files one process writes, and the handler and stdout tee that write them."""

    directory: Path
    prefix: str
    max_bytes: int
    max_files: int
    handler: logging.handlers.RotatingFileHandler
    stdout: _StdoutTee | None = None
    users: int = field(default=1, repr=False)

    @property
    def log_name(self) -> str:
        return f"{self.prefix}.log"

    @property
    def out_name(self) -> str:
        return f"{self.prefix}.out"

    def log_names_oldest_first(self) -> list[str]:
        """The rotated logs (highest number first, as RotatingFileHandler ages them), then the current one."""
        rotated = [f"{self.log_name}.{n}" for n in range(self.max_files, 0, -1)]
        return [name for name in rotated if (self.directory / name).is_file()] + [self.log_name]

    def names(self) -> list[str]:
        """Every file of this process that exists now: current log, rotated logs, stdout."""
        names = [*reversed(self.log_names_oldest_first()), self.out_name]
        return [name for name in names if (self.directory / name).is_file()]

    def close(self) -> None:
        logging.getLogger().removeHandler(self.handler)
        self.handler.close()
        if self.stdout is not None:
            if sys.stdout is self.stdout:
                sys.stdout = self.stdout.original
            self.stdout.close_file()


_lock = threading.Lock()
_active: ProcessLogs | None = None


def active() -> ProcessLogs | None:
    """The log files this process writes, or None when it writes none."""
    return _active


def acquire(config: Configuration, role: str, process_id: str, capture_stdout: bool = False) -> ProcessLogs:
    """Start writing this process's log files (or share the ones already written).

    capture_stdout: also copy sys.stdout into the `.out` file (a process of its own; an
    embedding program's stdout is left alone). Raises ConfigurationError for a bad
    env.log.* value or a directory that cannot be created.
    """
    global _active
    with _lock:
        if _active is not None:
            _active.users += 1
            return _active
        _active = _open(config, role, process_id, capture_stdout)
        return _active


def release(logs: ProcessLogs) -> None:
    """One user fewer; the last one takes the handler off the root logger and closes the files."""
    global _active
    with _lock:
        logs.users -= 1
        if logs.users > 0:
            return
        if _active is logs:
            _active = None
    logs.close()


def _open(config: Configuration, role: str, process_id: str, capture_stdout: bool) -> ProcessLogs:
    directory = Path(config.get(cfg.LOG_DIR) or default_log_dir())
    max_files = config.get(cfg.LOG_MAX)
    max_bytes = config.get(cfg.LOG_MAX_FILE_SIZE)
    if max_files < 1:
        # backupCount 0 would make RotatingFileHandler grow one file for ever.
        raise ConfigurationError(f"{cfg.LOG_MAX.key}: expected at least 1 rotated file, got {max_files}")
    if max_bytes < 1:
        raise ConfigurationError(f"{cfg.LOG_MAX_FILE_SIZE.key}: expected a positive size, got {max_bytes}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(f"{cfg.LOG_DIR.key}: cannot create {directory}: {exc.strerror or exc}") from None
    prefix = file_prefix(role, process_id)
    handler = logging.handlers.RotatingFileHandler(
        directory / f"{prefix}.log", maxBytes=max_bytes, backupCount=max_files, encoding="utf-8"
    )
    handler.setFormatter(LineFormatter(LOG_FORMAT))
    handler.addFilter(TaskTagFilter())
    logging.getLogger().addHandler(handler)
    logs = ProcessLogs(directory, prefix, max_bytes, max_files, handler)
    if capture_stdout and sys.stdout is not None:  # None: a process started without a stdout
        # Line-buffered: what was printed is in the file when someone asks for it.
        out = open(directory / f"{prefix}.out", "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        logs.stdout = _StdoutTee(sys.stdout, out, max_bytes)
        sys.stdout = logs.stdout
    return logs


class _StdoutTee(io.TextIOBase):
    """sys.stdout that still prints (the ready line scripts wait for) and also writes the `.out`.

    The copy stops at `limit` bytes, with a note saying so: stdout is not rotated.
    """

    def __init__(self, original: TextIO, file: TextIO, limit: int) -> None:
        self.original = original
        self._file: TextIO | None = file
        self._limit = limit
        self._written = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        self.original.write(text)
        with self._lock:
            if self._file is not None and self._written < self._limit:
                self._file.write(text)
                self._written += len(text.encode("utf-8", "replace"))
                if self._written >= self._limit:
                    self._file.write(f"\n[stdout copy stopped at {self._limit} bytes (env.log.max-file-size)]\n")
                    self._file.flush()
        return len(text)

    def flush(self) -> None:
        self.original.flush()
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close_file(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def isatty(self) -> bool:
        return self.original.isatty()

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.original.encoding

    def writable(self) -> bool:
        return True
