"""Several log records written to a handler at once: one write and one flush per batch.

The TaskManager's log writer thread (logs/queued.py) takes the records queued since its
last turn together. Handed one by one to the handlers a process has (a
RotatingFileHandler for the log file, a StreamHandler for stderr), every line cost a
write and a flush each, and the rotating handler's rollover check two `stat`s, a seek,
a tell and a second formatting of the line: about a fifth of a TaskManager's CPU with
many short tasks (three "switched from" lines each). `write_batch` formats each record once
and writes the batch in one piece, rolling the file over before the line that would
make it reach `maxBytes`, as RotatingFileHandler would (the same lines in the same
files). Handlers of any other type get the records one by one through `handle`.
"""

from __future__ import annotations

import logging
import logging.handlers
import os

_Line = tuple[logging.LogRecord, str]


def write_batch(handler: logging.Handler, records: list[logging.LogRecord]) -> None:
    """What `handler.handle(record)` for each record at or above its level would write."""
    kind = type(handler)
    if kind not in (logging.StreamHandler, logging.FileHandler, logging.handlers.RotatingFileHandler):
        for record in records:
            if record.levelno >= handler.level:
                handler.handle(record)
        return
    assert isinstance(handler, logging.StreamHandler)
    lines: list[_Line] = []
    for record in records:
        if record.levelno < handler.level or not handler.filter(record):
            continue
        try:
            lines.append((record, handler.format(record) + handler.terminator))
        except RecursionError:  # as StreamHandler.emit: see issue 36272
            raise
        except Exception:
            handler.handleError(record)
    if not lines:
        return
    handler.acquire()
    try:
        if isinstance(handler, logging.handlers.RotatingFileHandler):
            _write_rotating(handler, lines)
        elif isinstance(handler, logging.FileHandler):
            # FileHandler.emit: open a delayed file, write nothing once closed in mode "w".
            if handler.stream is None and (handler.mode != "w" or not handler._closed):  # type: ignore[attr-defined]
                handler.stream = handler._open()
            if handler.stream:
                _put(handler, lines)
        else:
            _put(handler, lines)
    finally:
        handler.release()


def _write_rotating(handler: logging.handlers.RotatingFileHandler, lines: list[_Line]) -> None:
    """RotatingFileHandler.emit for each line: a rollover before a line that would make the
    file reach maxBytes (a regular file only, bpo-45401), the position kept here instead
    of asked of the file per line."""
    name = handler.baseFilename
    regular = not (os.path.exists(name) and not os.path.isfile(name))
    if handler.stream is None:  # delay was set
        handler.stream = handler._open()
    position = _end(handler) if regular and handler.maxBytes > 0 else None
    pending: list[_Line] = []
    for line in lines:
        record, text = line
        if position is not None and position + len(text) >= handler.maxBytes:
            _put(handler, pending)
            pending = []
            try:
                handler.doRollover()
                position = _end(handler)
            except Exception:
                handler.handleError(record)
                continue
        pending.append(line)
        if position is not None:
            position += len(text) if text.isascii() else len(text.encode(handler.encoding or "utf-8", "replace"))
    _put(handler, pending)


def _end(handler: logging.handlers.RotatingFileHandler) -> int:
    if handler.stream is None:  # delay was set: doRollover opens no new file
        handler.stream = handler._open()
    handler.stream.seek(0, 2)  # as shouldRollover does
    return handler.stream.tell()


def _put(handler: logging.StreamHandler, lines: list[_Line]) -> None:  # type: ignore[type-arg]
    if not lines:
        return
    try:
        handler.stream.write("".join(text for _, text in lines))
        handler.flush()
    except RecursionError:
        raise
    except Exception:
        handler.handleError(lines[0][0])
