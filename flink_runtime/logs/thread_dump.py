"""A thread dump of this Python process, as Flink's ThreadDumpInfo shows a JVM's.

Flink's `/jobmanager/thread-dump` and `/taskmanagers/:id/thread-dump` answer
`{"threadInfos": [{"threadName", "stringifiedThreadInfo"}]}`, each entry Java's
ThreadInfo.toString(): a header line (`"name" Id=n STATE`) and `\tat` frames. Here the
threads are the Python threads of the process (sys._current_frames: a snapshot taken
without stopping them), innermost frame first as a JVM prints them. What runs inside a
Spark JVM is Spark's to show (its own UI), not part of this process's dump.
"""

from __future__ import annotations

import sys
import threading
import traceback

# Java's ThreadInfo.toString() prints at most 8 frames; Python stacks are shallower and a
# deeper one is what a reader wants here, so more are kept.
MAX_FRAMES = 64


def thread_dump() -> list[tuple[str, str]]:
    """(thread name, stringified stack) of every live thread of this process, by name."""
    threads = {thread.ident: thread for thread in threading.enumerate()}
    dump: list[tuple[str, str]] = []
    for ident, frame in sys._current_frames().items():
        thread = threads.get(ident)
        name = thread.name if thread is not None else f"Thread-{ident}"
        daemon = " daemon" if thread is not None and thread.daemon else ""
        lines = [f'"{name}"{daemon} Id={ident} RUNNABLE\n']
        stack = traceback.extract_stack(frame, limit=MAX_FRAMES)
        for entry in reversed(stack):
            lines.append(f"\tat {entry.name}({entry.filename}:{entry.lineno})\n")
        dump.append((name, "".join(lines) + "\n"))
    return sorted(dump)
