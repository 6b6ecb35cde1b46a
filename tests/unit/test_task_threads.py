"""The task-thread pool: threads are reused, and a task leaves nothing behind on its thread."""

from __future__ import annotations

import ctypes
import threading
import time
from contextvars import ContextVar

from flink_runtime.invokable import TaskCancelledError
from flink_runtime.taskmanager.task_threads import TaskThread, TaskThreadPool

_tag: ContextVar[str | None] = ContextVar("test_tag", default=None)


def run(pool: TaskThreadPool, function, name: str = "t") -> TaskThread:  # noqa: ANN001
    handle = TaskThread(name)
    pool.start(handle, function)
    handle.join(5)
    assert not handle.is_alive()
    return handle


def test_an_idle_thread_runs_the_next_task_under_its_name_and_with_a_fresh_context() -> None:
    pool = TaskThreadPool("pool-a")
    seen: list[tuple[int, str, str | None]] = []

    def task(tag: str) -> None:
        seen.append((threading.get_ident(), threading.current_thread().name, _tag.get()))
        _tag.set(tag)

    first = run(pool, lambda: task("first"), "Sum (1/2) #0")
    time.sleep(0.05)  # the thread is back in the pool
    second = run(pool, lambda: task("second"), "Sum (2/2) #0")
    assert first.ident == second.ident == seen[0][0] == seen[1][0]
    assert [name for _, name, _ in seen] == ["Sum (1/2) #0", "Sum (2/2) #0"]
    assert [tag for _, _, tag in seen] == [None, None]  # the first task's context variable stayed behind


def test_a_busy_thread_makes_the_pool_start_another() -> None:
    pool = TaskThreadPool("pool-b")
    release = threading.Event()
    blocked = TaskThread("blocked")
    pool.start(blocked, lambda: release.wait(5))
    other = run(pool, lambda: None, "other")
    assert blocked.is_alive() and other.ident != blocked.ident
    release.set()
    blocked.join(5)
    assert not blocked.is_alive()


def test_an_interrupt_striking_after_the_tasks_own_handlers_leaves_the_thread_clean_for_the_next() -> None:
    pool = TaskThreadPool("pool-c")
    holder: dict[str, int] = {}

    def first() -> None:
        holder["ident"] = threading.get_ident()
        # As Task.interrupt does, as the task's last act: it strikes past the task's own
        # handlers (as one sent just before the task left user code can), into the pool's loop.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(holder["ident"]), ctypes.py_object(TaskCancelledError)
        )

    run(pool, first, "first")
    time.sleep(0.05)
    outcome: list[str] = []

    def second() -> None:
        try:
            for _ in range(100_000):  # many interpreter checks: a pending interrupt would strike here
                pass
            outcome.append("clean")
        except TaskCancelledError:
            outcome.append("interrupted")

    handle = run(pool, second, "second")
    assert handle.ident == holder["ident"]
    assert outcome == ["clean"]
