"""What TaskManagers report about a job's partitions, kept for the job: Flink's
JobMasterPartitionTracker, much reduced.

- a producer committed a result partition (ScheduleOrUpdateConsumers): where its
  chunks are and which TaskManager serves them, for the consumers' deployment
  descriptors and the checkpoints that record them;
- a failed attempt could not fetch finished partitions (their TaskManager is gone,
  or without them): the failover reruns their producers.

A partition belongs to the producer attempt that reported it (Flink's
ResultPartitionID): a report from an attempt that is not the running one changes
nothing, and when that attempt fails its partitions stop counting as available and the
consumers scheduled or deployed from them fail with it (their new attempts wait for
the producer's next one).

`PartitionRegistry` owns that state. `TaskReports` answers what TaskManagers report
(UpdateTaskExecutionState, input split requests, ScheduleOrUpdateConsumers,
reconciliation) from the graph, the registry and the source splits; it changes an
execution's state only through the `set_state` it is given (the JobMaster's, which
accounts for every change) and deploys through `schedule`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.io.partitions import partition_dir
from flink_runtime.jobmanager.errors import TaskReportRefused
from flink_runtime.scheduler.strategy import consumers_ready

if TYPE_CHECKING:
    from flink_runtime.executiongraph import (
        Execution,
        ExecutionGraph,
        ExecutionJobVertex,
        ExecutionVertex,
        IntermediateResultPartition,
    )
    from flink_runtime.io.metrics import IOMetrics
    from flink_runtime.io.splits import InputSplit
    from flink_runtime.scheduler.source_splits import SourceSplits

_E = ExecutionState


def unrequested_cancel_reason(execution: Execution, error: str | None) -> str:
    """Why an attempt failed that its TaskManager reported CANCELED unasked."""
    why = f": {error}" if error else " (no reason given)"
    return (
        f"TaskManager {execution.task_manager_id or '<unknown>'} cancelled "
        f"{execution.vertex.task_name_with_subtask} on its own, without the JobManager asking{why}"
    )


class UnknownExecution(LookupError):
    """A task asked about an attempt that is not (or no longer) a live attempt of this job."""


class PartitionRegistry:
    """Finished partitions' locations and addresses, and the inputs failed attempts lost."""

    def __init__(
        self,
        data_dir: str,
        data_namespace: Callable[[], str],
        graph: Callable[[], ExecutionGraph | None],
        task_manager_address: Callable[[str], str | None],
    ) -> None:
        """data_namespace(): the job's current data namespace (a continuous job's changes
        per round); graph(): the job's ExecutionGraph, once built."""
        self._data_dir = data_dir
        self._data_namespace = data_namespace
        self._graph = graph
        self._task_manager_address = task_manager_address
        # Partition id -> directory of its chunks, as its producer reported it.
        self.locations: dict[str, str] = {}
        # Partition id -> RPC address of the TaskManager that produced it (and serves it).
        self.addresses: dict[str, str] = {}
        # Partition id -> the producer attempt that reported it.
        self.producers: dict[str, str] = {}
        # Failed attempt id -> the finished partitions it could not fetch.
        self._lost_inputs: dict[str, list[str]] = {}

    def finished(self, partition_id: str, location: str, address: str, attempt_id: str = "") -> None:
        self.locations[partition_id] = location
        self.addresses[partition_id] = address
        self.producers[partition_id] = attempt_id

    def forget(self, partition_ids: Iterable[str]) -> None:
        """These partitions are produced again (their producer reruns)."""
        for partition_id in partition_ids:
            self.locations.pop(partition_id, None)
            self.addresses.pop(partition_id, None)
            self.producers.pop(partition_id, None)

    def forget_attempt(self, attempt_id: str) -> list[str]:
        """This producer attempt failed: what it reported is not available any more.
        Returns those partitions' ids."""
        ids = [partition_id for partition_id, producer in self.producers.items() if producer == attempt_id]
        self.forget(ids)
        return ids

    def clear(self) -> None:
        """Every subtask gets a new attempt: every partition is reported anew."""
        self.locations.clear()
        self.addresses.clear()
        self.producers.clear()
        self._lost_inputs.clear()

    def inputs_lost(self, attempt_id: str, partition_ids: Iterable[str]) -> None:
        self._lost_inputs[attempt_id] = list(partition_ids)

    def take_lost_producers(self, attempt_id: str) -> list[ExecutionVertex]:
        """The producers of the inputs this failed attempt could not fetch: the failover
        runs them again with it."""
        graph = self._graph()
        partitions = [graph.partition(p) for p in self._lost_inputs.pop(attempt_id, [])] if graph is not None else []
        return [partition.producer for partition in partitions if partition is not None]

    def location(self, partition_id: str) -> str:
        """Where a partition's chunks are; a running producer's is derived from the
        shared data directory (it reports its location only when it finishes)."""
        if partition_id in self.locations:
            return self.locations[partition_id]
        result_id, _, number = partition_id.rpartition("#")
        return partition_dir(self._data_dir, self._data_namespace(), result_id, int(number))

    def address(self, partition_id: str) -> str:
        """The TaskManager holding a partition: the one its producer reported it from, or
        the one running its producer now (its completed splits' chunks are there)."""
        if partition_id in self.addresses:
            return self.addresses[partition_id]
        graph = self._graph()
        partition = graph.partition(partition_id) if graph is not None else None
        execution = partition.producer.current_execution if partition is not None else None
        if execution is None or not execution.state.is_deployed or not execution.task_manager_id:
            return ""
        return self._task_manager_address(execution.task_manager_id) or ""


class ReportedJob(Protocol):
    """The job, as answering its tasks' reports reads it."""

    job_id: str

    @property
    def graph(self) -> ExecutionGraph | None: ...
    @property
    def status(self) -> JobStatus: ...
    @property
    def stopping(self) -> bool: ...


class TaskReports:
    """The answers to what TaskManagers report about a job's tasks."""

    def __init__(
        self,
        job: ReportedJob,
        partitions: PartitionRegistry,
        final_states: dict[tuple[str, int], dict[str, Any]],
        splits: SourceSplits,
        set_state: Callable[[Execution, ExecutionState, str | None], bool],
        schedule: Callable[[Iterable[ExecutionVertex]], None],
        fail_consumer: Callable[[Execution, str], None] | None = None,
        decide_parallelism: Callable[[ExecutionJobVertex], object] = lambda ejv: None,
    ) -> None:
        """fail_consumer(execution, reason): fail a consumer attempt whose input is gone
        (and cancel its task, if deployed); by default only its state is set.
        decide_parallelism(ejv): every partition the vertex reads is finished, its
        subtasks not yet scheduled (scheduler/adaptive_parallelism.py)."""
        self._job = job
        self._partitions = partitions
        self._final_states = final_states  # the tracker's: (vertex id, subtask) -> state handle
        self._splits = splits
        self._set_state = set_state
        self._schedule = schedule
        self._decide_parallelism = decide_parallelism
        self._fail_consumer = fail_consumer or (lambda execution, reason: self._set_state(execution, _E.FAILED, reason))

    def _execution(self, execution_id: str) -> Execution | None:
        graph = self._job.graph
        return graph.execution(execution_id) if graph is not None else None

    def update_task_execution_state(
        self,
        execution_id: str,
        state: ExecutionState,
        error: str | None,
        state_handle: dict[str, Any] | None = None,
        io_metrics: IOMetrics | None = None,
        missing_partitions: Iterable[str] = (),
    ) -> bool:
        execution = self._execution(execution_id)
        if execution is None:
            return False
        if state is _E.CANCELED and execution.state is not _E.CANCELING and not execution.is_terminal:
            # Not asked for by this JobMaster (as Flink's Execution, which only completes a
            # cancellation it started): the TaskManager cancelled it on its own (it lost this
            # JobManager's heartbeats, an update was refused...). Taken as CANCELED nothing
            # would rerun it and the job would stay RUNNING for ever: a failure, for the failover.
            state, error = _E.FAILED, unrequested_cancel_reason(execution, error)
        if state is _E.FAILED and missing_partitions and not execution.is_terminal:
            # The failover reruns their producers with this subtask (its region).
            self._partitions.inputs_lost(execution_id, missing_partitions)
        if state is _E.FINISHED and state_handle is not None:
            self._final_states[(execution.vertex.job_vertex.id, execution.vertex.subtask_index)] = state_handle
        if io_metrics is not None and state.is_terminal and execution.state.can_transition_to(state):
            # Before the transition: the last one ends the job, whose final snapshot shows them.
            execution.io_metrics = io_metrics
        return self._set_state(execution, state, error)

    def request_next_input_split(
        self, execution_id: str, host: str | None, completed_split: int | None = None
    ) -> InputSplit | None:
        execution = self._execution(execution_id)
        if execution is None or execution.is_terminal:
            # Told "no split left", such a task would commit what it has as if complete.
            state = "unknown" if execution is None else execution.state.value
            raise UnknownExecution(f"execution {execution_id} of job {self._job.job_id} is {state}: it must stop")
        if self._job.status is not JobStatus.RUNNING or execution.state is _E.CANCELING:
            return None  # being cancelled: the task stops, and its partitions are never used
        vertex = execution.vertex
        return self._splits.next_split(
            vertex.job_vertex.id, execution_id, vertex.subtask_index, host, completed_split, self._job.stopping
        )

    def schedule_or_update_consumers(
        self, partition_id: str, location: str, execution_id: str, data_address: str = "", size_bytes: int = -1
    ) -> None:
        """A producer committed a partition (of `size_bytes`, -1: not known); deploy consumers
        whose inputs are now complete, their parallelism decided first if it was not
        configured. TaskReportRefused says why the report is refused, if it is."""
        graph = self._job.graph
        partition = graph.partition(partition_id) if graph is not None else None
        if partition is None:
            raise TaskReportRefused(f"unknown partition {partition_id}")
        producer = partition.producer.current_execution
        if producer.attempt_id != execution_id or not producer.state.is_deployed:
            raise TaskReportRefused(
                f"partition {partition_id} reported by execution {execution_id}, which is not the running "
                f"attempt of its producer ({producer.attempt_id}, {producer.state.value})"
            )
        self._partitions.finished(partition_id, location, data_address, execution_id)
        partition.size_bytes = size_bytes
        if partition.mark_finished(execution_id) and self._job.status is JobStatus.RUNNING:
            consumer = partition.result.consumer
            if consumer is not None and partition.result.all_partitions_finished:
                self._decide_parallelism(consumer)
            self._schedule(consumers_ready(partition))

    def producer_stopped(self, execution: Execution) -> None:
        """An attempt ended without finishing (FAILED, CANCELED; it has stopped already):
        the partitions it reported are released, and the consumers scheduled or deployed
        from them fail (Flink's consumers would get a PartitionNotFoundException): their
        data may be partial or gone, and the producer's next attempt rewrites them. The
        failover then restarts each consumer once its inputs are available again."""
        self._partitions.forget_attempt(execution.attempt_id)
        released = execution.vertex.release_partitions_of(execution.attempt_id)
        self._fail_consumers(released, f"{execution.attempt_id}, ended {execution.state.value} after reporting it")

    def producer_rerun(self, producer: ExecutionVertex) -> None:
        """A finished producer runs again (its partitions cannot be fetched any more):
        they are released, and the consumers scheduled or deployed from them meanwhile
        fail (they would read what the new attempt supersedes)."""
        attempt_id = producer.current_execution.attempt_id
        self._partitions.forget(p.partition_id for p in producer.produced_partitions)
        released = [p for p in producer.produced_partitions if p.is_finished]
        for partition in released:
            partition.reset()
        self._fail_consumers(released, f"{attempt_id}, is run again: its output cannot be fetched any more")

    def _fail_consumers(self, released: list[IntermediateResultPartition], why: str) -> None:
        if self._job.status is not JobStatus.RUNNING:
            return  # cancelling, failing or restarting: every attempt is being cancelled anyway
        for partition in released:
            for consumer in partition.consumer_vertex_group or ():
                attempt = consumer.current_execution
                if attempt.state is _E.SCHEDULED or attempt.state.is_deployed:
                    reason = (
                        f"input partition {partition.partition_id} is not available any more: its producer "
                        f"{partition.producer.task_name_with_subtask}, attempt {why}"
                    )
                    self._fail_consumer(attempt, reason)

    def executions_on(self, task_manager_id: str) -> dict[str, ExecutionState]:
        """The job's current attempts on a TaskManager that have not ended, by attempt id."""
        graph = self._job.graph
        if graph is None:
            return {}
        executions = (vertex.current_execution for vertex in graph.all_execution_vertices())
        return {e.attempt_id: e.state for e in executions if e.task_manager_id == task_manager_id and not e.is_terminal}

    def fail_execution(self, execution_id: str, reason: str) -> None:
        """Fail a current attempt the JobManager found lost (its TaskManager is gone, or no
        longer runs it)."""
        execution = self._execution(execution_id)
        if execution is not None and not execution.is_terminal:
            self._set_state(execution, _E.FAILED, reason)
