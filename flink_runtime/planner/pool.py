"""The planner process: a warm worker that runs a job's code for the JobManager.

`PlannerPool.run(function, *args, timeout=...)` calls a function of planner/tasks.py
in a spawned process (one, kept warm with its own SparkSession on `local[1]`, so a
submission costs milliseconds once the first one started it; with
`jobmanager.planner.warm-up: false` both start on first use instead). What the job's
code does there cannot reach the JobManager:

- it exits (`sys.exit`, `os._exit`) or crashes (a segfault): the pool breaks, the call
  raises PlanningError with the exit code, and the next call starts a new process;
- it does not return within the time limit (`jobmanager.planner.timeout`, counted
  from when the call starts: the process and its SparkSession are started ahead, at
  JobManager start and after each replacement): the
  process is killed (its Spark JVM exits with it: PySpark's gateway dies when its
  parent's pipe closes) and the call raises PlanningError;
- it prints: the process's stdout goes nowhere, not into the JobManager's log.

A MiniCluster plans in its own process (InProcessPlanner): its JobManager shares the
process with TaskManagers that run the job's code anyway, as Flink's MiniCluster runs
everything in one JVM.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from flink_runtime.planner import tasks

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

    # Starting the process and its SparkSession: not counted in a call's time limit.
    WARM_UP_TIMEOUT = 300.0

    def __init__(self, config: dict[str, Any], start_spark_ahead: bool = True) -> None:
        """start_spark_ahead: warm_up starts the process's SparkSession too (else the
        first call that needs Spark starts it, within that call's time limit)."""
        self._config = config
        self._start_spark_ahead = start_spark_ahead
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._warm: Future[None] | None = None
        self._workers: dict[int, list[Any]] = {}  # id(executor) -> its worker processes

    def warm_up(self) -> None:
        """Start the process and its SparkSession now, so the first submission is fast."""
        self._current()

    def run(self, function: Callable[..., T], *args: Any, timeout: float) -> T:
        executor = self._current()
        try:
            assert self._warm is not None
            self._warm.result(timeout=self.WARM_UP_TIMEOUT)
        except BaseException as exc:  # noqa: BLE001 - a broken or stuck start: try a new one next time
            self._discard(executor)
            raise PlanningError(f"the planner process did not start: {exc!r}") from None
        future = executor.submit(function, *args)
        try:
            return future.result(timeout=timeout)
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

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            _kill(executor, self._workers.pop(id(executor), []))

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=tasks.initialize,
                    initargs=(self._config,),
                )
                self._warm = self._executor.submit(tasks.warm_up, self._start_spark_ahead)
                # submit() started the worker. Kept here: when the worker dies, the
                # executor forgets its processes, and with them the exit code to report.
                self._workers[id(self._executor)] = list((self._executor._processes or {}).values())  # noqa: SLF001
            return self._executor

    def _discard(self, executor: ProcessPoolExecutor) -> list[int | None]:
        """Kill `executor`'s process and forget it (if it is still the current one)."""
        with self._lock:
            if self._executor is executor:
                self._executor = None
        codes = _kill(executor, self._workers.pop(id(executor), []))
        if self._start_spark_ahead:
            self.warm_up()  # the next submission should not wait for a new process
        return codes


def _kill(executor: ProcessPoolExecutor, known: list[Any]) -> list[int | None]:
    # The executor has no public way to stop a worker that is stuck in a call.
    processes = known or list((executor._processes or {}).values())  # noqa: SLF001
    for process in processes:
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
