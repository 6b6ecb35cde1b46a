"""Produced data in the ExecutionGraph, and the groups that wire it to consumers.

An IntermediateResult is the runtime side of one IntermediateDataSet: one
IntermediateResultPartition per producer subtask. Which consumer subtasks read
which partitions is recorded with two kinds of group, as in Flink's EdgeManager:

- ConsumedPartitionGroup: the partitions one consumer subtask reads for one input;
- ConsumerVertexGroup: the consumer subtasks one partition feeds.

Both are contiguous index ranges, never lists of objects, and one group is shared
by everything that has the same view (all consumers of an all-to-all edge share a
single ConsumedPartitionGroup), so a 10k x 10k exchange costs O(10k), not O(10^8).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from flink_runtime.jobgraph.jobgraph import JobEdge, ResultPartitionType

if TYPE_CHECKING:
    from flink_runtime.executiongraph.execution import ExecutionVertex
    from flink_runtime.executiongraph.executiongraph import ExecutionJobVertex


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

    __slots__ = ("result", "partition_number", "producer", "is_finished", "consumer_vertex_group")

    def __init__(self, result: IntermediateResult, partition_number: int, producer: ExecutionVertex):
        self.result = result
        self.partition_number = partition_number
        self.producer = producer
        self.is_finished = False
        self.consumer_vertex_group: ConsumerVertexGroup | None = None

    @property
    def partition_id(self) -> str:
        # Derived rather than stored: 10k partitions need no 10k strings until someone asks.
        return f"{self.result.id}#{self.partition_number}"

    @property
    def number_of_subpartitions(self) -> int:
        """How many consumer subtasks read this partition (one subpartition each)."""
        group = self.consumer_vertex_group
        return 1 if group is None else len(group)

    def mark_finished(self) -> bool:
        """Record that the producer completed this partition; True if it was not already."""
        if self.is_finished:
            return False
        self.is_finished = True
        self.result._finished += 1
        return True

    def reset(self) -> None:
        """Forget the data: the producer is about to run again."""
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
