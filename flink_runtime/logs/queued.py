"""The root logger's handlers, fed by a thread of their own (a TaskManager process's).

A TaskManager's task threads each log a "switched from X to Y" line per transition;
with many short tasks those lines came from a dozen threads at once, each taking the
file handler's lock and then the stderr handler's in turn. `queued_root_handlers` puts
one `QueuedHandlers` on the root logger in their place: a logging thread only stamps the
record (its task tag, its message) and queues it; one writer thread hands the records,
in the order they were queued, to the handlers that were there: what was queued since
its last turn together, formatted by each handler's formatter and written in one piece
per handler (logs/batch_write.py). Lines, formats and files stay exactly what they were.

`flush()` waits until what was queued before it is written, and `logging.shutdown()`
(which `fail_hard` calls before the process exits) flushes it first, so a process that
ends leaves no line behind in the queue.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator

from flink_runtime.logs.batch_write import write_batch
from flink_runtime.logs.context import TaskTagFilter

# How long flush() waits for the writer: a stuck disk must not hang a process that ends.
FLUSH_TIMEOUT = 5.0
# At most this many records written in one batch (bounds the memory of one write).
MAX_BATCH = 1000
# After writing, the writer lets the lines of this long gather before it looks again: a
# busy TaskManager's task threads then queue theirs without waking it for each line (a
# wake-up and a hand-over of the GIL per line cost more than writing it). A line is
# written at most this much later; flush() still returns once it is written.
LINGER = 0.005


class QueuedHandlers(logging.Handler):
    """Hands every record to `handlers` from one writer thread, in queue order."""

    def __init__(self, handlers: list[logging.Handler]) -> None:
        super().__init__()
        self.handlers = handlers
        # The task tag is the logging thread's (a context variable): read it there.
        self.addFilter(TaskTagFilter())
        self._formatter = logging.Formatter()
        self._queue: queue.SimpleQueue[logging.LogRecord | threading.Event | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name="log-writer", daemon=True)
        self._writer.start()

    def handle(self, record: logging.LogRecord) -> bool:  # type: ignore[override]
        # No lock: queueing is thread-safe, and taking none is the point.
        if not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        # Fixed now, in the logging thread: its arguments may change once it returns.
        record.msg = record.getMessage()
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        self._queue.put(record)

    def flush(self) -> None:
        """Returns once what was logged before is written (or after FLUSH_TIMEOUT)."""
        if not self._writer.is_alive() or threading.current_thread() is self._writer:
            return
        written = threading.Event()
        self._queue.put(written)
        written.wait(FLUSH_TIMEOUT)

    def close(self) -> None:
        if self._writer.is_alive():
            self.flush()
            self._queue.put(None)
            self._writer.join(FLUSH_TIMEOUT)
        super().close()

    def _write(self) -> None:
        while True:
            # What was queued meanwhile is written together: a write and a flush per handler
            # for the lot instead of per line (logs/batch_write.py).
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while len(batch) < MAX_BATCH:
                    batch.append(self._queue.get_nowait())
            records: list[logging.LogRecord] = []
            for item in batch:
                if isinstance(item, logging.LogRecord):
                    records.append(item)
                    continue
                self._write_records(records)  # what came before the flush or the end
                records = []
                if item is None:
                    return
                for handler in self.handlers:
                    handler.flush()
                item.set()
            self._write_records(records)
            time.sleep(LINGER)

    def _write_records(self, records: list[logging.LogRecord]) -> None:
        if records:
            for handler in self.handlers:
                write_batch(handler, records)


@contextlib.contextmanager
def queued_root_handlers() -> Iterator[QueuedHandlers]:
    """While inside, the root logger's handlers are fed by a writer thread; put back after."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    queued = QueuedHandlers(handlers)
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(queued)
    try:
        yield queued
    finally:
        root.removeHandler(queued)
        queued.close()
        for handler in handlers:
            root.addHandler(handler)
