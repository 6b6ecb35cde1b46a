"""One execution attempt of a subtask, running in a thread of its own while it runs
(a pooled one: taskmanager/task_threads.py).

The thread loads the invokable, wires its inputs and outputs, runs it, commits its
result partitions and reports every state change through `report`, which the
TaskExecutor forwards to the JobManager as UpdateTaskExecutionState. The task never
touches the TaskExecutor's state: it talks to it only through those callbacks.

Cancellation is cooperative first (the cancelled flag, `invokable.cancel()`), then
forceful: the TaskExecutor calls `interrupt()` every `task.cancellation.interval`,
which raises TaskCancelledError inside the thread at its next Python instruction,
and gives up on the thread after `task.cancellation.timeout`.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from flink_runtime.blob import BlobServer, activate_libraries_lazily
from flink_runtime.deployment import partition_writers, task_environment
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.invokable import (
    AbstractInvokable,
    Environment,
    TaskCancelledError,
    resolve_invokable,
)
from flink_runtime.io.filesystem import is_local
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.partition_files import PartitionUnreachableError, remove_fetched
from flink_runtime.io.partitions import ResultPartitionWriter, abort_chunks, partition_dir
from flink_runtime.logs.context import bind_task
from flink_runtime.logs.records import RecordTemplate
from flink_runtime.taskmanager.task_threads import TASK_THREADS, TaskThread, TaskThreadPool, raise_in_thread

if TYPE_CHECKING:
    from flink_runtime.io.splits import InputSplit
    from flink_runtime.rpc.messages import ResultPartitionDeploymentDescriptor, TaskDeploymentDescriptor
    from flink_runtime.security.secret_store import SecretStore

log = logging.getLogger(__name__)

# The "switched from X to Y" line's records (three per task).
_TRANSITION_RECORDS = RecordTemplate(log, logging.INFO, "%s switched from %s to %s.", __file__, "_transition")

ReportState = Callable[["Task", ExecutionState, str | None], None]
# Fetches the inputs produced on other TaskManagers: the descriptor reading the local
# copies, and their folder (taskmanager/partition_service.py).
FetchInputs = Callable[["TaskDeploymentDescriptor"], tuple["TaskDeploymentDescriptor", Path | None]]


class Task:
    def __init__(
        self,
        descriptor: TaskDeploymentDescriptor,
        data_dir: str,
        report: ReportState,
        request_split: Callable[[], InputSplit | None],
        notify_partition_ready: Callable[[str, str], None],
        spark: Callable[[], Any] = lambda: None,
        blob_server: BlobServer | None = None,
        fetch_inputs: FetchInputs | None = None,
        allowed_directories: list[str] | None = None,
        secrets: SecretStore | None = None,
        threads: TaskThreadPool | None = None,
    ) -> None:
        self.descriptor = descriptor
        self.execution_id = descriptor.execution_id
        self.job_id = descriptor.job_id
        self.data_dir = data_dir
        self._report = report
        self._notify_partition_ready = notify_partition_ready
        self._spark = spark
        self._fetch_inputs = fetch_inputs
        # This TaskManager's own security.allowed-directories (the JobManager's come with the task).
        self._allowed_directories = allowed_directories or []
        self._secrets = secrets
        # Set when the task fails because a finished input partition could not be fetched
        # from its producer's TaskManager: the JobManager runs those producers again.
        self.missing_partitions: list[str] = []
        # Job libraries: downloaded from the JobManager's REST API into a local cache.
        self._blob_server = blob_server
        self._blob_cache_dir = blob_cache_dir_for(data_dir)
        self.cancelled = threading.Event()
        # interrupt() may only strike while user code runs, never while the task
        # reports its final state (that report would be lost).
        self._interrupt_lock = threading.Lock()
        self._interruptible = False
        self.invokable: AbstractInvokable | None = None
        self.state = ExecutionState.DEPLOYING
        # Set before the final state is reported (None if the task never got to run).
        self.io_metrics: IOMetrics | None = None
        self._environment: Environment | None = None
        self._busy_since: float | None = None
        # The environment's next_input_split, and the time spent waiting in it.
        self._splits = _SplitWaits(request_split)
        # A pooled thread runs the task (task_threads.py); `thread` is this task's handle on it.
        self._threads = threads or TASK_THREADS
        self.thread = TaskThread(name=f"{descriptor.task_name} #{descriptor.attempt_number}")

    def start(self) -> None:
        self._threads.start(self.thread, self._run)

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    # -- cancellation (called from the TaskExecutor's loop thread) ---------------------------

    def cancel(self) -> None:
        self.cancelled.set()
        invokable = self.invokable
        if invokable is not None:
            try:
                invokable.cancel()
            except Exception:
                log.exception("%s: invokable.cancel() failed", self.descriptor.task_name)

    def interrupt(self) -> None:
        """Raise TaskCancelledError in the task thread at its next Python instruction."""
        with self._interrupt_lock:
            if self._interruptible and self.thread.ident is not None and self.thread.is_alive():
                raise_in_thread(self.thread.ident, TaskCancelledError)

    def _set_interruptible(self, interruptible: bool) -> None:
        with self._interrupt_lock:
            self._interruptible = interruptible

    # -- the task thread ---------------------------------------------------------------------

    def _transition(self, state: ExecutionState, error: str | None = None) -> None:
        # As Flink's TaskManager logs it: "Sum (1/2)#0 (<attempt id>) switched from DEPLOYING to INITIALIZING."
        if log.isEnabledFor(logging.INFO):
            name = f"{self.descriptor.task_name}#{self.descriptor.attempt_number} ({self.execution_id})"
            # The record made without log.info's Logger.findCaller, a stack walk per line (a
            # tenth of a TaskManager's work with short tasks) for a caller LOG_FORMAT never
            # shows, and copied from the first one made (logs/records.py).
            log.handle(_TRANSITION_RECORDS.make((name, self.state.value, state.value)))
        self.state = state
        self._report(self, state, error)

    def _finish_io_metrics(self, writers: list[ResultPartitionWriter]) -> None:
        """What the invokable counted, plus the records of the JSON-lines inputs and
        outputs and the time it ran (its waits for splits are idle time)."""
        environment = self._environment
        if environment is None or self._busy_since is None:
            return
        elapsed = time.monotonic() - self._busy_since
        try:
            self.io_metrics = environment.io_metrics + IOMetrics(
                records_in=sum(gate.records_read for gate in environment.inputs),
                bytes_in=sum(gate.bytes_read for gate in environment.inputs),
                records_out=sum(writer.records_written for writer in writers),
                bytes_out=sum(writer.bytes_written for writer in writers),
                busy_ms=int(max(0.0, elapsed - self._splits.idle_seconds) * 1000),
                idle_ms=int(self._splits.idle_seconds * 1000),
            )
        except Exception:  # an invokable that put something else there: report none, not fail
            log.warning("%s: io_metrics not reported", self.descriptor.task_name, exc_info=True)

    def _run(self) -> None:
        descriptor = self.descriptor
        bind_task(descriptor)  # every line this thread logs carries the task (logs/context.py)
        writers: list[ResultPartitionWriter] = []
        fetched: Path | None = None
        try:
            self._transition(ExecutionState.INITIALIZING)
            # The job's libraries first: the invokable (or its transform functions) may live there.
            # They reach Spark's executors when the task first asks for the session: a task
            # that never does starts no SparkSession for them.
            spark = activate_libraries_lazily(
                descriptor.libraries,
                cache_dir=self._blob_cache_dir,
                blob_server=self._blob_server,
                spark=self._spark,
            )
            invokable_class = resolve_invokable(descriptor.invokable)
            own_partitions = invokable_class.writes_own_partitions
            writers = [] if own_partitions else partition_writers(descriptor, self.data_dir)
            readable = descriptor
            if self._fetch_inputs is not None:
                readable, fetched = self._fetch_inputs(descriptor)
            environment = task_environment(
                readable,
                outputs=writers,
                next_input_split=self._splits.next_split,
                cancelled=self.cancelled,
                data_dir=self.data_dir,
                spark=spark,
                own_allowed_directories=self._allowed_directories,
                secrets=self._secrets,
            )
            self.invokable = invokable_class(environment)
            self._environment = environment
            environment.check_cancelled()
            self._transition(ExecutionState.RUNNING)
            self._busy_since = time.monotonic()
            self._set_interruptible(True)
            try:
                self.invokable.invoke()
            finally:
                self._set_interruptible(False)
            environment.check_cancelled()
            if own_partitions:
                # The invokable committed its chunks; the partition is the directory of them.
                locations = [self._partition_dir(partition) for partition in descriptor.produced_partitions]
            else:
                locations = [writer.commit() for writer in writers]
            for partition, location in zip(descriptor.produced_partitions, locations, strict=True):
                self._notify_partition_ready(partition.partition_id, location)
            self._finish_io_metrics(writers)
            self._transition(ExecutionState.FINISHED)
        except BaseException as exc:  # noqa: BLE001 - every outcome must be reported
            self._set_interruptible(False)
            for writer in writers:
                writer.abort()
            self._abort_own_partitions()
            self._finish_io_metrics(writers)
            if self.cancelled.is_set() or isinstance(exc, TaskCancelledError):
                self._transition(ExecutionState.CANCELED)
            else:
                if isinstance(exc, PartitionUnreachableError):
                    self.missing_partitions = [exc.partition_id]
                log.warning("%s (%s) failed.", descriptor.task_name, self.execution_id, exc_info=exc)
                self._transition(ExecutionState.FAILED, _describe_failure(descriptor.task_name, exc))
        finally:
            if fetched is not None:
                remove_fetched(fetched)

    def _abort_own_partitions(self) -> None:
        for partition in self.descriptor.produced_partitions:
            try:
                abort_chunks(self._partition_dir(partition), self.execution_id)
            except OSError:
                log.warning("could not clean up %s", self._partition_dir(partition), exc_info=True)

    def _partition_dir(self, partition: ResultPartitionDeploymentDescriptor) -> str:
        namespace = self.descriptor.data_namespace or self.job_id
        return partition_dir(self.data_dir, namespace, partition.result_id, partition.partition_number)


class _SplitWaits:
    """A task's next_input_split: asks the JobManager for the next split, and counts the
    wait as idle time. Apart from the Task, so that the Task and its environment (which
    holds this) make no reference cycle: a finished task is freed as soon as the
    TaskManager drops it, not by the cyclic garbage collector, which otherwise traversed
    its ~30 objects per task deployed (most of a busy TaskManager's collections)."""

    __slots__ = ("_request_split", "idle_seconds")

    def __init__(self, request_split: Callable[[int | None], InputSplit | None]) -> None:
        self._request_split = request_split
        self.idle_seconds = 0.0

    def next_split(self, completed: int | None = None) -> InputSplit | None:
        started = time.monotonic()
        try:
            return self._request_split(completed)
        finally:
            self.idle_seconds += time.monotonic() - started


@functools.lru_cache(maxsize=16)  # per task deployed otherwise: a URL parse each
def blob_cache_dir_for(data_dir: str) -> str:
    """Where a TaskManager keeps downloaded job libraries: <data dir>/blobs, on local disk
    (Python imports only local files, so a remote data dir gets a local temp dir)."""
    if is_local(data_dir):
        local = urlparse(data_dir).path if data_dir.startswith("file:") else data_dir
        return os.path.join(local, "blobs")
    return os.path.join(tempfile.gettempdir(), "flink-runtime-blob-cache")


def _describe_failure(task_name: str, exc: BaseException) -> str:
    trace = "".join(traceback.format_exception(exc))
    return f"{type(exc).__name__}: {exc}\n\n{task_name} failed:\n{trace}"
