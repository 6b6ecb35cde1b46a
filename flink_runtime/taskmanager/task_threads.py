"""The threads tasks run in: a pool of reusable OS threads, one task at a time each.

Starting an OS thread per task cost most of a TaskManager's time when tasks are short
(the start handshake waits for the GIL under load: 39% of a TaskManager's samples in
`Thread.start` with 10,000 no-op tasks). A thread that finished its task waits for the
next one instead; a new thread starts only when no thread is idle, so a task never
waits for another (one whose thread was abandoned after task.cancellation.timeout
keeps its thread, and the next task gets another).

What a task leaves behind on its thread is cleared before the thread runs the next:
- an interrupt (Task.interrupt raises TaskCancelledError in the thread by its ident)
  that was sent while the task ran but had not struck yet when it ended;
- context variables (the log tag of logs/context.py): each task runs in a fresh context;
- the thread's name, which is the task's while it runs (thread dumps show it).
"""

from __future__ import annotations

import contextvars
import ctypes
import queue
import threading
from collections.abc import Callable
from itertools import count

_IDLE_NAME = "task-thread-{}-idle"


class TaskThread:
    """A task's handle on the thread that runs it: what `threading.Thread` offered
    callers (ident, is_alive, join), for this one task."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ident: int | None = None
        # Held from the task's start until its run returned: a bare lock, made per task
        # deployed, costs a fraction of an Event (a Condition around a lock).
        self._running = threading.Lock()
        self._started = False
        self._finished = False  # not `not locked()`: a join() holds the lock for a moment

    def is_alive(self) -> bool:
        """True from the task's start until its run returned."""
        return self._started and not self._finished

    def join(self, timeout: float | None = None) -> None:
        """Wait until the task's run returned (at once if it never started)."""
        if self._running.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            self._running.release()


class TaskThreadPool:
    """Runs each submitted function on an idle pooled thread, or a new one if none is idle."""

    def __init__(self, name: str = "task-thread") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle = 0
        self._work: queue.SimpleQueue[tuple[TaskThread, Callable[[], None]]] = queue.SimpleQueue()
        self._numbers = count()

    def start(self, handle: TaskThread, function: Callable[[], None]) -> None:
        """Run `function` for `handle`'s task; `handle` is alive from now until it returns."""
        handle._running.acquire()
        handle._started = True
        with self._lock:
            if self._idle > 0:
                # An idle thread takes it: one waiting in get() is counted idle until it
                # took an item, so no item is left without a thread to run it.
                self._idle -= 1
                self._work.put((handle, function))
                return
        number = next(self._numbers)
        threading.Thread(target=self._loop, args=(handle, function), name=f"{self._name}-{number}", daemon=True).start()

    def _loop(self, handle: TaskThread, function: Callable[[], None]) -> None:
        ident = threading.get_ident()
        me = threading.current_thread()
        idle_name = me.name
        while True:
            handle.ident = ident
            me.name = handle.name
            try:  # noqa: SIM105 - not contextlib.suppress: a stray interrupt could strike in its __exit__
                # A fresh context per task: no context variable (the log tag) carries over.
                contextvars.Context().run(function)
            except BaseException:  # noqa: BLE001, S110 - a task reports its own outcome: a stray interrupt
                pass
            _clear_pending_interrupt(ident)
            me.name = idle_name
            handle._finished = True
            handle._running.release()
            with self._lock:
                self._idle += 1
            # Not held while idle: the finished task is freed once the TaskManager drops it.
            del handle, function
            handle, function = self._work.get()


def raise_in_thread(ident: int, kind: type[BaseException] | None) -> None:
    """Have the thread `ident` raise `kind` at its next Python instruction (a loop of the
    job's code stops; a call stuck in C does not); None: drop one sent that has not struck."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None if kind is None else ctypes.py_object(kind))


def _clear_pending_interrupt(ident: int) -> None:
    """Drop an interrupt sent to this thread that has not struck yet. Task.interrupt sends
    none once the task left user code (its interruptible flag, under its lock), so after
    this the next task on the thread starts clean. Should the interrupt strike while this
    runs, it is caught here: then nothing is pending any more."""
    for _ in range(3):
        try:
            raise_in_thread(ident, None)
            return
        except BaseException:  # noqa: BLE001, S112 - the stray interrupt itself
            continue


# The one pool of a process: TaskManagers sharing a process (a MiniCluster) share it.
TASK_THREADS = TaskThreadPool()
