"""The nodes of the ExecutionGraph: vertices, their attempts, and the data they produce.

They refer to each other both ways, as in Flink (a subtask knows its vertex, a vertex
its subtasks, a partition its producer and its consumers), so they live in one module:

- ExecutionJobVertex: one JobVertex at runtime, with its parallel subtasks;
- ExecutionVertex: one parallel subtask; it lives as long as the graph;
- Execution: one attempt at running a subtask. A restart never revives an attempt, it
  creates the next one, so late messages about an old attempt can be told apart from
  news about the current one by the attempt id alone;
- IntermediateResult: the runtime side of one IntermediateDataSet, with one
  IntermediateResultPartition per producer subtask. Which consumer subtasks read which
  partitions is recorded with two kinds of group, as in Flink's EdgeManager
  (ConsumedPartitionGroup: the partitions one consumer subtask reads for one input;
  ConsumerVertexGroup: the consumer subtasks one partition feeds). Both are contiguous
  index ranges, never lists of objects, and one group is shared by everything that has
  the same view (all consumers of an all-to-all edge share a single
  ConsumedPartitionGroup), so a 10k x 10k exchange costs O(10k), not O(10^8). wiring.py
  computes them.

The graph that holds them (executiongraph.py) is seen here only as the small
ExecutionRegistry it is to them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any, Protocol

from flink_runtime.executiongraph.states import ExecutionState, IllegalStateTransition
from flink_runtime.io.metrics import NO_IO, IOMetrics
from flink_runtime.jobgraph.jobgraph import (
    MAX_PARALLELISM_UPPER_BOUND,
    IntermediateDataSet,
    JobEdge,
    JobVertex,
    ResultPartitionType,
)

_CREATED = ExecutionState.CREATED

# Flink's jobmanager.execution.attempts-history-size default: prior attempts kept per subtask.
DEFAULT_ATTEMPTS_HISTORY_SIZE = 16

# Flink's lower bound for a derived max parallelism (KeyGroupRangeAssignment).
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128


def default_max_parallelism(parallelism: int) -> int:
    """Flink's computeDefaultMaxParallelism: 1.5 x parallelism rounded up to a power of two."""
    wanted = parallelism + parallelism // 2
    power_of_two = 1 << (wanted - 1).bit_length()
    return min(max(power_of_two, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), MAX_PARALLELISM_UPPER_BOUND)


class ExecutionRegistry(Protocol):
    """The ExecutionGraph, as its vertices use it."""

    graph_id: str
    attempts_history_size: int

    def register_execution(self, execution: Execution, replaces: Execution | None = None) -> None: ...


class ExecutionJobVertex:
    """One JobVertex at runtime: its parallel subtasks and the results they produce."""

    __slots__ = (
        "graph",
        "job_vertex",
        "id",
        "name",
        "parallelism",
        "max_parallelism",
        "attempt_id_prefix",
        "produced_results",
        "inputs",
        "input_edges",
        "task_vertices",
        "parallelism_decided",
    )

    def __init__(
        self,
        graph: ExecutionRegistry,
        job_vertex: JobVertex,
        produced_datasets: list[IntermediateDataSet] | tuple[()] = (),
    ):
        self.graph = graph
        self.job_vertex = job_vertex
        self.id = job_vertex.id
        self.name = job_vertex.name
        self.parallelism = job_vertex.parallelism
        self.max_parallelism = job_vertex.max_parallelism or default_max_parallelism(self.parallelism)
        if self.parallelism > self.max_parallelism:
            raise ValueError(
                f"vertex {self.id!r}: parallelism {self.parallelism} is higher than "
                f"its max parallelism {self.max_parallelism}"
            )
        # Shared by all attempt ids of this vertex, so building one is a single f-string.
        self.attempt_id_prefix = f"{graph.graph_id}-{self.id}-"
        self.produced_results = [
            IntermediateResult(dataset.id, self, dataset.result_type) for dataset in produced_datasets
        ]
        # Filled by ExecutionGraph as it wires inputs, in the order of the job graph's edges.
        self.inputs: list[IntermediateResult] = []
        self.input_edges: list[JobEdge] = []
        self.task_vertices = [ExecutionVertex(self, index) for index in range(self.parallelism)]
        for position, result in enumerate(self.produced_results):
            result.partitions = [vertex.produced_partitions[position] for vertex in self.task_vertices]
        # False while the scheduler may still lower the parallelism from the data its
        # inputs hold (a vertex whose parallelism was not configured: Flink's adaptive
        # batch scheduling, scheduler/adaptive_parallelism.py); until then `parallelism`
        # is its upper bound.
        self.parallelism_decided = job_vertex.parallelism_configured

    def __repr__(self) -> str:
        return f"ExecutionJobVertex({self.id!r}, parallelism={self.parallelism})"


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
        "prior_executions",
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
        # The attempts before the current one, oldest first, as Flink's priorExecutions
        # (an EvictingBoundedList): at most the graph's attempts_history_size, the oldest
        # evicted first, so a subtask restarted a thousand times stays small.
        self.prior_executions: deque[Execution] = deque(maxlen=job_vertex.graph.attempts_history_size)
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

    def prior_execution_attempt(self, attempt_number: int) -> Execution | None:
        """Flink's getPriorExecutionAttempt: the ended attempt with this number; None if
        it is the current one, was never made, or was evicted from the bounded history."""
        for execution in self.prior_executions:
            if execution.attempt_number == attempt_number:
                return execution
        return None

    def end_round(self) -> None:
        """A continuous job's round is over: keep what this subtask's attempt of it read
        and wrote before the next round's attempt replaces it. (A restart within a round
        does not call this: as in Flink, a replaced attempt's metrics are dropped, and
        the attempt that redoes its work reports them again.)"""
        reported = self.current_execution.io_metrics
        if reported is not None:
            self.earlier_rounds_io_metrics = self.earlier_rounds_io_metrics + reported

    def release_partitions_of(self, attempt_id: str) -> list[IntermediateResultPartition]:
        """Attempt `attempt_id` ended without finishing (failed, cancelled): the partitions
        it reported are no longer available (its data may be partial, or gone with its
        TaskManager, and a new attempt rewrites them). Returns those it had reported."""
        if self.current_execution.attempt_id != attempt_id:
            return []  # superseded already: its partitions were reset with the new attempt
        released = [p for p in self.produced_partitions if p.is_finished and p.produced_by == attempt_id]
        for partition in released:
            partition.reset()
        return released

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
        if self.prior_executions.maxlen:
            self.prior_executions.append(previous)
        self.current_execution = execution
        self.job_vertex.graph.register_execution(execution, replaces=previous)
        for partition in self.produced_partitions:
            partition.reset()
        return execution

    def __repr__(self) -> str:
        return f"ExecutionVertex({self.task_name_with_subtask!r}, {self.current_execution.state.value})"


class IntermediateResult:
    """The data one ExecutionJobVertex produces for one of its data sets."""

    __slots__ = ("id", "producer", "result_type", "partitions", "consumer", "edge", "_finished")

    def __init__(self, dataset_id: str, producer: ExecutionJobVertex, result_type: ResultPartitionType):
        self.id = dataset_id
        self.producer = producer
        self.result_type = result_type
        # Filled by the producer once its subtasks exist; index = producer subtask.
        self.partitions: list[IntermediateResultPartition] = []
        # Set by wiring; a validated graph has at most one consuming edge per data set.
        self.consumer: ExecutionJobVertex | None = None
        self.edge: JobEdge | None = None
        # Maintained by the partitions so "is the whole result there?" is O(1) even
        # when a 10k-way consumer asks it once per finished producer.
        self._finished = 0

    @property
    def number_of_finished_partitions(self) -> int:
        return self._finished

    @property
    def all_partitions_finished(self) -> bool:
        return self._finished == len(self.partitions)

    def __repr__(self) -> str:
        return f"IntermediateResult({self.id!r}, {self._finished}/{len(self.partitions)} finished)"


class IntermediateResultPartition:
    """The part of an IntermediateResult one producer subtask writes."""

    __slots__ = (
        "result",
        "partition_number",
        "producer",
        "is_finished",
        "produced_by",
        "consumer_vertex_group",
        "number_of_subpartitions",
        "size_bytes",
    )

    def __init__(self, result: IntermediateResult, partition_number: int, producer: ExecutionVertex):
        self.result = result
        self.partition_number = partition_number
        self.producer = producer
        self.is_finished = False
        # The attempt whose data this is (None: restored from a savepoint, or not finished).
        # A partition belongs to one attempt, as in Flink's ResultPartitionID: when that
        # attempt fails or the subtask gets a new one, it stops counting as available.
        self.produced_by: str | None = None
        self.consumer_vertex_group: ConsumerVertexGroup | None = None
        # How many subpartitions its producer splits it into: one per consumer subtask it
        # feeds when wired (wiring.py). Fixed from then on: a consumer whose parallelism
        # is decided lower later reads a range of them (wiring.subpartition_range).
        self.number_of_subpartitions = 1
        # The bytes its producer committed, as reported with it (-1: not known).
        self.size_bytes = -1

    @property
    def partition_id(self) -> str:
        # Derived rather than stored: 10k partitions need no 10k strings until someone asks.
        return f"{self.result.id}#{self.partition_number}"

    def mark_finished(self, attempt_id: str | None = None) -> bool:
        """Record that the producer (attempt `attempt_id`) completed this partition; True
        if it was not already."""
        if self.is_finished:
            return False
        self.is_finished = True
        self.produced_by = attempt_id
        self.result._finished += 1
        return True

    def reset(self) -> None:
        """Forget the data: its attempt failed, or the producer is about to run again."""
        self.produced_by = None
        self.size_bytes = -1
        if self.is_finished:
            self.is_finished = False
            self.result._finished -= 1

    def __repr__(self) -> str:
        return f"IntermediateResultPartition({self.partition_id!r}, finished={self.is_finished})"


class ConsumedPartitionGroup:
    """The partitions of one result that a consumer subtask reads through one input."""

    __slots__ = ("result", "partition_range")

    def __init__(self, result: IntermediateResult, partition_range: range):
        self.result = result
        self.partition_range = partition_range

    def __len__(self) -> int:
        return len(self.partition_range)

    def __iter__(self) -> Iterator[IntermediateResultPartition]:
        partitions = self.result.partitions
        if len(self.partition_range) == len(partitions):
            return iter(partitions)
        return (partitions[i] for i in self.partition_range)

    def all_finished(self) -> bool:
        result = self.result
        # A group covering the whole result (all-to-all) is answered by the counter.
        if len(self.partition_range) == len(result.partitions):
            return result.all_partitions_finished
        partitions = result.partitions
        return all(partitions[i].is_finished for i in self.partition_range)

    def __repr__(self) -> str:
        r = self.partition_range
        return f"ConsumedPartitionGroup({self.result.id!r}, partitions [{r.start}, {r.stop}))"


class ConsumerVertexGroup:
    """The consumer subtasks that one partition feeds."""

    __slots__ = ("vertex", "subtask_range")

    def __init__(self, vertex: ExecutionJobVertex, subtask_range: range):
        self.vertex = vertex
        self.subtask_range = subtask_range

    def __len__(self) -> int:
        return len(self.subtask_range)

    def __iter__(self) -> Iterator[ExecutionVertex]:
        task_vertices = self.vertex.task_vertices
        return (task_vertices[i] for i in self.subtask_range)

    def __repr__(self) -> str:
        r = self.subtask_range
        return f"ConsumerVertexGroup({self.vertex.id!r}, subtasks [{r.start}, {r.stop}))"
