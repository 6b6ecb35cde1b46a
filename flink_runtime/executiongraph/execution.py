"""Subtasks and their execution attempts.

An ExecutionVertex is one parallel subtask of a vertex and lives as long as the
graph. An Execution is one attempt at running it: a restart never revives an
attempt, it creates the next one, so late messages about an old attempt can be
told apart from news about the current one by the attempt id alone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph.intermediate import (
    ConsumedPartitionGroup,
    IntermediateResultPartition,
)
from flink_runtime.executiongraph.states import ExecutionState, IllegalStateTransition
from flink_runtime.io.metrics import NO_IO, IOMetrics

if TYPE_CHECKING:
    from flink_runtime.executiongraph.executiongraph import ExecutionJobVertex

_CREATED = ExecutionState.CREATED


class Execution:
    """One attempt at running a subtask."""

    __slots__ = (
        "attempt_id",
        "attempt_number",
        "vertex",
        "state",
        "state_timestamps",
        "assigned_resource",
        "task_manager_id",
        "failure_cause",
        "io_metrics",
    )

    def __init__(self, vertex: ExecutionVertex, attempt_number: int):
        # The graph id in front keeps ids unique across graphs rebuilt for the same job.
        self.attempt_id = f"{vertex.job_vertex.attempt_id_prefix}{vertex.subtask_index}-{attempt_number}"
        self.attempt_number = attempt_number
        self.vertex = vertex
        self.state = _CREATED
        self.state_timestamps: dict[ExecutionState, float] = {_CREATED: time.time()}
        # Whatever the scheduler hands out (a slot); the graph never looks inside.
        self.assigned_resource: Any = None
        self.task_manager_id: str | None = None
        self.failure_cause: str | None = None
        # What the attempt read and wrote, as its TaskManager reported with its final state.
        self.io_metrics: IOMetrics | None = None

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    def transition_state(self, new: ExecutionState, failure_cause: str | None = None) -> bool:
        """Move to `new` if the state machine allows it; False (and no change) otherwise.

        Refusing instead of raising is deliberate: TaskManager updates can arrive late
        or twice (a RUNNING after the JobManager already cancelled the attempt), and
        the JobManager drops such stale news. A terminal or repeated state is never
        an allowed target, so those are refused too.
        """
        if not self.state.can_transition_to(new):
            return False
        self.state = new
        self.state_timestamps[new] = time.time()
        if failure_cause is not None:
            self.failure_cause = failure_cause
        return True

    def __repr__(self) -> str:
        return f"Execution({self.attempt_id!r}, {self.state.value})"


class ExecutionVertex:
    """One parallel subtask of an ExecutionJobVertex."""

    __slots__ = (
        "job_vertex",
        "subtask_index",
        "current_execution",
        "produced_partitions",
        "consumed_partition_groups",
        "earlier_rounds_io_metrics",
    )

    def __init__(self, job_vertex: ExecutionJobVertex, subtask_index: int):
        self.job_vertex = job_vertex
        self.subtask_index = subtask_index
        # One per produced result, in the order of job_vertex.produced_results.
        self.produced_partitions: list[IntermediateResultPartition] = [
            IntermediateResultPartition(result, subtask_index, self) for result in job_vertex.produced_results
        ]
        # One per input, in the order of job_vertex.inputs; appended by wiring.
        self.consumed_partition_groups: list[ConsumedPartitionGroup] = []
        self.current_execution = Execution(self, 0)
        # A continuous job's subtask runs once per round; what its finished rounds read
        # and wrote is kept here (see end_round), the current round's on its Execution.
        self.earlier_rounds_io_metrics = NO_IO

    @property
    def id(self) -> str:
        """Flink's ExecutionVertexID text form: `<job vertex id>_<subtask index>`."""
        return f"{self.job_vertex.id}_{self.subtask_index}"

    @property
    def task_name_with_subtask(self) -> str:
        """`Name (3/4)`: 1-based, as Flink shows subtasks in logs and the web UI."""
        ejv = self.job_vertex
        return f"{ejv.name} ({self.subtask_index + 1}/{ejv.parallelism})"

    @property
    def execution_state(self) -> ExecutionState:
        return self.current_execution.state

    def end_round(self) -> None:
        """A continuous job's round is over: keep what this subtask's attempt of it read
        and wrote before the next round's attempt replaces it. (A restart within a round
        does not call this: as in Flink, a replaced attempt's metrics are dropped, and
        the attempt that redoes its work reports them again.)"""
        reported = self.current_execution.io_metrics
        if reported is not None:
            self.earlier_rounds_io_metrics = self.earlier_rounds_io_metrics + reported

    def reset_for_new_execution(self) -> Execution:
        """Start the next attempt; the current one must have ended.

        The produced partitions are reset as well: the new attempt rewrites them, so
        consumers must not treat the old data as available.
        """
        previous = self.current_execution
        if not previous.state.is_terminal:
            raise IllegalStateTransition(
                f"cannot reset {self.task_name_with_subtask} for a new execution: "
                f"attempt {previous.attempt_number} is still {previous.state.value}"
            )
        execution = Execution(self, previous.attempt_number + 1)
        self.current_execution = execution
        self.job_vertex.graph.register_execution(execution, replaces=previous)
        for partition in self.produced_partitions:
            partition.reset()
        return execution

    def __repr__(self) -> str:
        return f"ExecutionVertex({self.task_name_with_subtask!r}, {self.current_execution.state.value})"
