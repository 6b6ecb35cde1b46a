"""The planner process: a warm worker that runs a job's code for the JobManager.

`PlannerPool.run(function, *args, timeout=...)` calls a function of planner/tasks.py
in a spawned process: one, started with the JobManager (and after each replacement), so
a submission waits for neither its spawn nor its imports. Its SparkSession (`local[1]`,
a lean JVM: tasks.PLANNER_SPARK) starts only when a plan needs Spark: jobs of built-in
invokables (noop, sleep, ...) never start a JVM. With `jobmanager.planner.warm-up: true`
the session starts ahead too, so the first Spark plan does not wait for it (one JVM
more for the JobManager's life). Without warm-up, a planner idle for
`jobmanager.planner.idle-timeout` after a call is replaced by a fresh one without a JVM,
so a JobManager between bursts of submissions holds ~135 MB, not ~400 MB with the
planner's SparkSession. What the job's code does there cannot reach the JobManager:

- it exits (`sys.exit`, `os._exit`) or crashes (a segfault): the pool breaks, the call
  raises PlanningError with the exit code, and the next call starts a new process;
- it does not return within the time limit (`jobmanager.planner.timeout`, counted
  from when the call starts: the process and its SparkSession are started ahead, at
  JobManager start and after each replacement): the process is killed with its process
  group (its Spark JVM, anything the job's code started) and the call raises PlanningError;
- it allocates more than `jobmanager.planner.memory`: the allocation raises MemoryError
  in the planner (guard.py), the call fails naming the limit, the planner serves on;
- it prints: the process's stdout goes nowhere, not into the JobManager's log.

A call never waits on a warm-up longer than its own time limit: a warm-up that failed, or
has not finished by then (a Spark start that hangs), is abandoned (its process group is
killed) and the call runs in a new process that starts Spark only if the call needs it,
within the call's own limit. So a recovered job or a submission is never held behind a
stuck warm-up.

The planner dies with the JobManager, even one killed with SIGKILL (guard.py): it is
started from a thread of the pool's own, because the parent-death signal it arms fires
when the thread that started it ends.

A MiniCluster plans in its own process (InProcessPlanner): its JobManager shares the
process with TaskManagers that run the job's code anyway, as Flink's MiniCluster runs
everything in one JVM.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.planner import guard, tasks

log = logging.getLogger(__name__)

T = TypeVar("T")


class PlanningError(RuntimeError):
    """The job's code could not be run to the end in the planner process."""


class Planner(Protocol):
    def warm_up(self) -> None: ...
    def run(self, function: Callable[..., T], *args: Any, timeout: float) -> T: ...
    def close(self) -> None: ...


class InProcessPlanner:
    """Runs the function in the calling thread (a MiniCluster's JobManager), with the
    SparkSession the process's TaskManagers share."""

    def __init__(self, spark: Callable[[], Any]) -> None:
        self._spark = spark

    def warm_up(self) -> None:
        pass

    def run(self, function: Callable[..., T], *args: Any, timeout: float) -> T:
        return function(*args, spark=self._spark)

    def close(self) -> None:
        pass


class PlannerPool:
    """One planner process, started on first use and replaced when it dies or hangs.
    `run` may be called from several threads; calls queue for the one process."""

    def __init__(
        self, config: dict[str, Any], start_spark_ahead: bool = True, idle_timeout: float | None = None
    ) -> None:
        """start_spark_ahead: warm_up starts the process's SparkSession too (else the
        first call that needs Spark starts it, within that call's time limit).
        idle_timeout: seconds after its last call ends that a used process is replaced by
        a fresh one (None: never)."""
        self._config = config
        self._start_spark_ahead = start_spark_ahead
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._calls = 0  # calls running now: a process is never recycled under one
        self._idle_timer: threading.Timer | None = None
        self._executor: ProcessPoolExecutor | None = None
        # The current process's warm-up (starting its SparkSession); None: a cold process.
        self._warm: Future[None] | None = None
        self._workers: dict[int, list[Any]] = {}  # id(executor) -> its worker processes
        # Starts every planner process: it must outlive them (see the module's comment).
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner-start")

    @classmethod
    def of(cls, config: Configuration) -> PlannerPool:
        """The planner of a JobManager process with `config` (jobmanager.planner.*)."""
        config.get(cfg.PLANNER_MEMORY)  # a malformed size stops the start, named (not each planner's)
        warm_up = config.get(cfg.PLANNER_WARM_UP)
        # A warm-up's JVM is meant to stay: no idle replacement then.
        idle_timeout = None if warm_up else config.get_seconds(cfg.PLANNER_IDLE_TIMEOUT) or None
        return cls(config.to_dict(), start_spark_ahead=warm_up, idle_timeout=idle_timeout)

    def warm_up(self) -> None:
        """Start the process and its SparkSession now, so the first submission is fast."""
        self._current(self._start_spark_ahead)

    def run(self, function: Callable[..., T], *args: Any, timeout: float) -> T:
        with self._lock:
            self._calls += 1
            if self._idle_timer is not None:
                self._idle_timer.cancel()
        try:
            return self._run(function, *args, timeout=timeout)
        finally:
            with self._lock:
                self._calls -= 1
                if self._calls == 0 and self._idle_timeout is not None and self._executor is not None:
                    self._idle_timer = threading.Timer(self._idle_timeout, self._recycle, args=(self._executor,))
                    self._idle_timer.daemon = True
                    self._idle_timer.start()

    def _run(self, function: Callable[..., T], *args: Any, timeout: float) -> T:
        executor, warm = self._current(self._start_spark_ahead)
        if warm is not None and not _finished(warm, timeout):
            self._discard(executor, replace=False)
            executor, _ = self._current(start_spark=False)
        try:
            return executor.submit(function, *args).result(timeout=timeout)
        except FutureTimeout:
            self._discard(executor)
            raise PlanningError(
                f"the job's code did not finish within {timeout:g} s in the planner process (a transform or "
                "invokable that never returns?); it was stopped. jobmanager.planner.timeout sets the limit"
            ) from None
        except BrokenProcessPool:
            codes = self._discard(executor)
            raise PlanningError(
                f"the job's code ended the planner process ({_describe_exit(codes)}): a transform, invokable or "
                "library called sys.exit/os._exit or crashed the interpreter while the plan was prepared"
            ) from None
        except MemoryError:  # raised outside the job's own code (tasks.py names it there)
            raise PlanningError(
                guard.memory_limit_reason(Configuration(self._config).as_written(cfg.PLANNER_MEMORY))
            ) from None

    def _recycle(self, executor: ProcessPoolExecutor) -> None:
        """The idle timer fired: replace the used process with a fresh one, unless a call
        began since (it cancels the timer, but may have won the race) or it was replaced."""
        with self._lock:
            if self._calls or self._executor is not executor:
                return
            self._executor = None  # under the lock: a call starting now gets a new process
        log.info(
            "The planner process was idle for %g s (jobmanager.planner.idle-timeout): replaced by a fresh one, "
            "which starts a SparkSession only when a plan needs it.",
            self._idle_timeout,
        )
        _kill(executor, self._workers.pop(id(executor), []))
        self.warm_up()

    def close(self) -> None:
        with self._lock:
            self._idle_timeout = None  # no timer from a call still ending
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            executor, self._executor = self._executor, None
        if executor is not None:
            _kill(executor, self._workers.pop(id(executor), []))
        self._starter.shutdown(wait=False)

    def _current(self, start_spark: bool) -> tuple[ProcessPoolExecutor, Future[None] | None]:
        with self._lock:
            if self._executor is None:
                self._executor, self._warm = self._starter.submit(self._start, start_spark).result()
            return self._executor, self._warm

    def _start(self, start_spark: bool) -> tuple[ProcessPoolExecutor, Future[None] | None]:
        """On the starter thread: a new planner process, its SparkSession starting if asked."""
        executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=tasks.initialize,
            initargs=(self._config, os.getpid()),
        )
        started = time.monotonic()
        warm = executor.submit(tasks.warm_up, start_spark)  # starts the process, on this thread
        # Kept here: when the worker dies, the executor forgets its processes, and with
        # them the exit code to report.
        processes = self._workers[id(executor)] = list((executor._processes or {}).values())  # noqa: SLF001
        if not start_spark:
            return executor, None
        pid = processes[0].pid if processes else None
        log.info("Planner process %s started; starting its SparkSession.", pid)
        warm.add_done_callback(lambda done: _report_warm(done, pid, time.monotonic() - started))
        return executor, warm

    def _discard(self, executor: ProcessPoolExecutor, replace: bool = True) -> list[int | None]:
        """Kill `executor`'s process and forget it (if it is still the current one);
        `replace`: start the next one ahead, warm."""
        with self._lock:
            if self._executor is executor:
                self._executor = None
        codes = _kill(executor, self._workers.pop(id(executor), []))
        if replace:
            self.warm_up()  # the next submission should not wait for a new process
        return codes


def _report_warm(warm: Future[None], pid: int | None, seconds: float) -> None:
    if not warm.cancelled() and warm.exception() is None:
        log.info("Planner process %s is warm: its SparkSession started in %.1f s.", pid, seconds)


def _finished(warm: Future[None], timeout: float) -> bool:
    """Whether the warm-up finished well within `timeout` (the waiting call's own limit)."""
    try:
        warm.result(timeout=timeout)
        return True
    except FutureTimeout:
        log.warning(
            "The planner's warm-up (its SparkSession start) did not finish within %g s, the time a call may "
            "take (jobmanager.planner.timeout): abandoned; the call runs in a new planner process.",
            timeout,
        )
    except BaseException as exc:  # noqa: BLE001 - a broken start: the call tries a new process
        log.warning("The planner's warm-up failed (%r): the call runs in a new planner process.", exc)
    return False


def _kill(executor: ProcessPoolExecutor, known: list[Any]) -> list[int | None]:
    # The executor has no public way to stop a worker that is stuck in a call.
    processes = known or list((executor._processes or {}).values())  # noqa: SLF001
    for process in processes:
        # Its process group first: a Spark JVM stuck in its start would not notice its parent's death.
        if process.pid is not None:
            guard.kill_group(process.pid)
        if process.is_alive():
            process.kill()
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=10)
    return [_exit_code(process) for process in processes]


def _exit_code(process: Any, patience: float = 2.0) -> int | None:
    # The executor's own thread may reap the process at the same moment: the losing
    # waitpid sees no child and reads None until the winner has stored the code.
    deadline = time.monotonic() + patience
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return process.exitcode


def _describe_exit(codes: list[int | None]) -> str:
    code = next((c for c in codes if c not in (None, 0)), codes[0] if codes else None)
    if code is None:
        return "it died"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
