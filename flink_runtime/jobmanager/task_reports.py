"""What TaskManagers report about a job's tasks, and how the JobMaster answers:

- a task's state changed (UpdateTaskExecutionState: FINISHED with its final state
  handle and I/O metrics, FAILED with its error, ...);
- a source subtask asks for its next input split (and says which one it completed);
- a producer committed a result partition (ScheduleOrUpdateConsumers), so consumers
  whose inputs are all complete can be deployed;
- reconciliation (jobmanager/resource_manager.py): which attempts the JobManager
  believes run on a TaskManager, and failing one the TaskManager no longer has.

`TaskReports` is part of the JobMaster (a mixin: it shares the job's state and runs
in the JobManager's mailbox like the rest of it). Every execution state change goes
through the JobMaster's `_set_execution_state`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.jobmanager.gateway import supervised
from flink_runtime.scheduler.strategy import consumers_ready, inputs_finished

if TYPE_CHECKING:
    from flink_runtime.executiongraph import Execution
    from flink_runtime.io.metrics import IOMetrics
    from flink_runtime.io.splits import InputSplit
    from flink_runtime.jobmanager.jobmaster import JobMaster

log = logging.getLogger(__name__)

_E = ExecutionState


class UnknownExecution(LookupError):
    """A task asked about an attempt that is not (or no longer) a live attempt of this job."""


class TaskReports:
    """The JobMaster's handlers of what TaskManagers report about its tasks."""

    def update_task_execution_state(
        self: JobMaster,
        execution_id: str,
        state: ExecutionState,
        error: str | None,
        state_handle: dict[str, Any] | None = None,
        io_metrics: IOMetrics | None = None,
        missing_partitions: Iterable[str] = (),
    ) -> bool:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None:
            return False
        if state is _E.FAILED and missing_partitions and not execution.is_terminal:
            # Read when the failover restarts this subtask (_rerun_producers_of_lost_inputs).
            self._lost_inputs[execution_id] = list(missing_partitions)
        if state is _E.FINISHED and state_handle is not None:
            self.tracker.final_states[(execution.vertex.job_vertex.id, execution.vertex.subtask_index)] = state_handle
        if io_metrics is not None and state.is_terminal and execution.state.can_transition_to(state):
            # Before the transition: the last one ends the job, whose final snapshot shows them.
            execution.io_metrics = io_metrics
        return self._set_execution_state(execution, state, error)

    def request_next_input_split(
        self: JobMaster, execution_id: str, host: str | None, completed_split: int | None = None
    ) -> InputSplit | None:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None or execution.is_terminal:
            # Told "no split left", such a task would commit what it has as if complete.
            state = "unknown" if execution is None else execution.state.value
            raise UnknownExecution(f"execution {execution_id} of job {self.job_id} is {state}: it must stop")
        if self.status is not JobStatus.RUNNING or execution.state is _E.CANCELING:
            return None  # being cancelled: the task stops, and its partitions are never used
        vertex = execution.vertex
        stopping = self._stop_request is not None
        return self.splits.next_split(
            vertex.job_vertex.id, execution_id, vertex.subtask_index, host, completed_split, stopping
        )

    def schedule_or_update_consumers(
        self: JobMaster, partition_id: str, location: str, execution_id: str, data_address: str = ""
    ) -> str | None:
        """A producer committed a partition; deploy consumers whose inputs are now complete."""
        partition = self.graph.partition(partition_id) if self.graph is not None else None
        if partition is None:
            return f"unknown partition {partition_id}"
        producer = partition.producer.current_execution
        if producer.attempt_id != execution_id or not producer.state.is_deployed:
            return (
                f"partition {partition_id} reported by execution {execution_id}, which is not the running "
                f"attempt of its producer ({producer.attempt_id}, {producer.state.value})"
            )
        self._partition_locations[partition_id] = location
        self._partition_addresses[partition_id] = data_address
        if partition.mark_finished() and self.status is JobStatus.RUNNING:
            self._schedule_all(consumers_ready(partition))
        return None

    def _rerun_producers_of_lost_inputs(self: JobMaster, failed: Execution) -> bool:
        """The failed attempt could not fetch finished partitions from the TaskManagers that
        produced them (gone, or without them): as Flink's region failover answers a
        PartitionNotFoundException, their producers run again and the consumer waits for
        them. True when the consumer (already reset) must wait; False when it can run now."""
        lost = self._lost_inputs.pop(failed.attempt_id, [])
        for partition_id in lost:
            partition = self.graph.partition(partition_id) if self.graph is not None else None
            if partition is None:
                continue
            producer = partition.producer
            if producer.current_execution.state is not _E.FINISHED:
                continue  # already running again (another consumer reported it first)
            log.info(
                "Partition %s cannot be fetched from the TaskManager that produced it; running %s again.",
                partition_id,
                producer.task_name_with_subtask,
            )
            for produced in producer.produced_partitions:
                self._partition_locations.pop(produced.partition_id, None)
                self._partition_addresses.pop(produced.partition_id, None)
            # Its completed splits went down with the partition: they are read again.
            self.splits.forget_completed(producer.job_vertex.id, producer.subtask_index)
            producer.reset_for_new_execution()
            self._finished_executions -= 1
            self._active_executions += 1
            self._schedule(producer)
        return bool(lost) and not inputs_finished(failed.vertex)

    # -- reconciliation with what TaskManagers report (jobmanager/resource_manager.py) ------------

    def executions_on(self: JobMaster, task_manager_id: str) -> dict[str, ExecutionState]:
        """This job's current attempts on a TaskManager that have not ended, by attempt id."""
        if self.graph is None or self._active_executions <= 0:  # nothing left running: skip the walk
            return {}
        executions = (vertex.current_execution for vertex in self.graph.all_execution_vertices())
        return {e.attempt_id: e.state for e in executions if e.task_manager_id == task_manager_id and not e.is_terminal}

    @supervised
    def fail_execution(self: JobMaster, execution_id: str, reason: str) -> None:
        """Fail a current attempt the JobManager found lost (its TaskManager is gone, or no
        longer runs it); the restart strategy decides what follows."""
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is not None and not execution.is_terminal:
            self._fail_execution(execution, reason)
