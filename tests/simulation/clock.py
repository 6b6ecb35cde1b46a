"""Virtual time: an asyncio event loop whose clock jumps to the next timer.

The loop's selector never blocks: asked to wait `timeout` seconds, it advances the
virtual clock by that much and reports nothing ready. So a heartbeat timeout of 50 s
costs no wall time, and every run of a seed sees the same interleaving. Work the code
hands to threads (`asyncio.to_thread`, `run_in_executor`) runs inline on the loop's
thread (InlineExecutor), and `time.time`, `time.monotonic`, `uuid.uuid4` and
`secrets.token_hex` are patched for the run (`deterministic`), so no decision or id
depends on the wall clock or the OS's randomness.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import selectors
import time
import uuid
from asyncio import events
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import copy_context
from heapq import heapify, heappop, heappush
from typing import Any

from flink_runtime.taskmanager import taskexecutor

# Virtual wall-clock time starts here (2026-01-01T00:00:00Z), so timestamps look real.
EPOCH = 1767225600.0


class _VirtualSelector(selectors.BaseSelector):
    """Registers file objects (the loop's self-pipe) but never waits on them."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, _fd(fileobj), events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self.register(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise SimulationStuck("nothing scheduled and nothing ready: the simulated cluster has stopped")
        if timeout > 0:
            self._clock.now += timeout
        return []

    def close(self) -> None:
        self._map.clear()

    def get_map(self) -> Any:
        return self._map


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


class SimulationStuck(RuntimeError):
    """The loop has nothing to run and no timer: every actor waits on something that never comes."""


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0


class _Handle(events.Handle):
    """events.Handle without the per-handle debug check (this loop is never in debug mode)."""

    __slots__ = ()

    def __init__(self, callback: Callable[..., Any], args: tuple[Any, ...], loop: Any, context: Any) -> None:
        _set_up(self, callback, args, loop, context)


def _set_up(
    handle: events.Handle, callback: Callable[..., Any], args: tuple[Any, ...], loop: Any, context: Any
) -> None:
    """What events.Handle.__init__ sets, minus its debug-mode check."""
    handle._context = copy_context() if context is None else context  # type: ignore[attr-defined]
    handle._loop = loop  # type: ignore[attr-defined]
    handle._callback = callback  # type: ignore[attr-defined]
    handle._args = args  # type: ignore[attr-defined]
    handle._cancelled = False  # type: ignore[attr-defined]
    handle._repr = None  # type: ignore[attr-defined]
    handle._source_traceback = None  # type: ignore[attr-defined]


class _TimerHandle(events.TimerHandle):
    __slots__ = ()

    def __init__(
        self, when: float, callback: Callable[..., Any], args: tuple[Any, ...], loop: Any, context: Any
    ) -> None:
        _set_up(self, callback, args, loop, context)
        self._when = when
        self._scheduled = True


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a VirtualClock (loop.time() is virtual; waiting is free).

    Lean where the simulator spends its time (thousands of callbacks and timers per
    schedule): call_soon/call_at skip the closed/debug checks (the loop never runs in
    debug mode and every caller is on its thread), and the timer heap holds
    `(when, handle)` pairs so that its comparisons are of floats in C rather than
    TimerHandle.__lt__ in Python. Ties on `when` fall through to the handles' own
    comparison, so timers pop in exactly the order asyncio's heap of handles gives them:
    a seed's schedule is the same as on a stock loop.
    """

    def __init__(self) -> None:
        self.clock = VirtualClock()
        # How long (virtual seconds) a piece of work handed to a worker thread takes; the
        # world makes some take time (a continuous job's publish), so that what arrives
        # meanwhile (a stop) finds it under way. Zero: done within the same instant.
        self.work_duration: Callable[[Callable[..., Any]], float] = lambda func: 0.0
        super().__init__(_VirtualSelector(self.clock))
        self._clock_resolution = 1e-9
        self.set_default_executor(InlineExecutor())

    def _make_self_pipe(self) -> None:
        # The self-pipe wakes a selector blocked in another thread: this one never blocks
        # (and _write_to_self is a no-op), so no socket pair per loop.
        self._ssock = self._csock = None

    def _close_self_pipe(self) -> None:
        pass

    def time(self) -> float:
        return self.clock.now

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> events.Handle:
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    call_soon_threadsafe = call_soon  # every caller is on the loop's thread (InlineExecutor)

    def call_later(
        self, delay: float, callback: Callable[..., Any], *args: Any, context: Any = None
    ) -> events.TimerHandle:
        return self.call_at(self.clock.now + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> events.TimerHandle:
        timer = _TimerHandle(when, callback, args, self, context)
        heappush(self._scheduled, (when, timer))  # type: ignore[attr-defined]
        return timer

    def _run_once(self) -> None:
        """One iteration, as BaseEventLoop._run_once without the I/O poll (there is none):
        jump the clock to the next timer when nothing is ready, then run what is due."""
        scheduled = self._scheduled  # type: ignore[attr-defined]
        ready = self._ready  # type: ignore[attr-defined]
        if len(scheduled) > 100 and self._timer_cancelled_count * 2 > len(scheduled):  # type: ignore[attr-defined]
            live = []
            for entry in scheduled:
                if entry[1]._cancelled:
                    entry[1]._scheduled = False
                else:
                    live.append(entry)
            heapify(live)
            self._scheduled = scheduled = live
            self._timer_cancelled_count = 0
        while scheduled and scheduled[0][1]._cancelled:
            self._timer_cancelled_count -= 1
            heappop(scheduled)[1]._scheduled = False
        clock = self.clock
        if not ready and not self._stopping:  # type: ignore[attr-defined]
            if not scheduled:
                raise SimulationStuck("nothing scheduled and nothing ready: the simulated cluster has stopped")
            when = scheduled[0][0]
            if when > clock.now:
                clock.now = when
        end = clock.now + self._clock_resolution
        while scheduled and scheduled[0][0] < end:
            handle = heappop(scheduled)[1]
            handle._scheduled = False
            ready.append(handle)
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if not handle._cancelled:
                handle._run()

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """What the InlineExecutor runs, without a concurrent Future wrapped in an asyncio
        one: `func` runs at once and its outcome lands in the returned future one callback
        later, as wrap_future's call_soon_threadsafe would land it (same order of steps)."""
        if executor is not None and not isinstance(executor, InlineExecutor):
            return super().run_in_executor(executor, func, *args)
        future = self.create_future()
        duration = self.work_duration(func)
        try:
            result = func(*args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the awaiting coroutine gets it
            outcome: tuple[Any, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        if duration > 0:
            self.call_later(duration, _settle, future, *outcome)
        else:
            self.call_soon(_settle, future, *outcome)
        return future

    def _write_to_self(self) -> None:
        # call_soon_threadsafe wakes a selector blocked in another thread; this one never
        # blocks and every caller is on the loop's own thread: no byte through the self-pipe.
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class InlineExecutor(ThreadPoolExecutor):
    """Runs submitted work at once on the calling thread (the loop's): deterministic."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - the caller's future carries it
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


@contextmanager
def deterministic(loop: VirtualTimeLoop, seed: int) -> Iterator[random.Random]:
    """Patch the process's clocks and uuid4 to the loop's virtual time and a seeded
    generator for the duration of one run; yields that generator's twin for ids."""
    ids = random.Random(seed ^ 0x5EED)
    saved = (time.time, time.monotonic, uuid.uuid4, secrets.token_hex, taskexecutor.task_manager_resources)
    time.time = lambda: EPOCH + loop.clock.now  # type: ignore[assignment]
    time.monotonic = lambda: loop.clock.now  # type: ignore[assignment]
    uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)  # type: ignore[assignment]
    # ExecutionGraph ids, savepoint folder names.
    secrets.token_hex = lambda nbytes=32: ids.getrandbits(8 * nbytes).to_bytes(nbytes, "big").hex()  # type: ignore[assignment]
    # What a registering TaskManager reports of its machine (psutil: varies, and slow).
    taskexecutor.task_manager_resources = _fixed_resources  # type: ignore[attr-defined]
    try:
        yield ids
    finally:
        (time.time, time.monotonic, uuid.uuid4, secrets.token_hex, taskexecutor.task_manager_resources) = saved  # type: ignore[assignment]


def _fixed_resources(config: Any, slots: int) -> dict[str, float]:
    return {"cpu_cores": float(slots), "memory_mb": 4096.0, "process_mb": 100.0, "spark_heap_mb": 1024.0}
