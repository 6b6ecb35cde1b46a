"""Wiring a consumer vertex's subtasks to the partitions of a result it consumes.

The rules are Flink's (EdgeManagerBuildUtil): all-to-all shares one group in each
direction; pointwise splits the smaller side's indices into contiguous, balanced
ranges of the larger side. Producers and consumers must agree on these ranges
(a producer writes one subpartition per consumer in its ConsumerVertexGroup), so
they are computed here and nowhere else.
"""

from __future__ import annotations

from flink_runtime.executiongraph.vertices import (
    ConsumedPartitionGroup,
    ConsumerVertexGroup,
    ExecutionJobVertex,
    IntermediateResult,
    IntermediateResultPartition,
)
from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobEdge


def connect(consumer: ExecutionJobVertex, result: IntermediateResult, edge: JobEdge) -> None:
    """Wire every subtask of `consumer` to the partitions of `result` it reads over `edge`."""
    if result.consumer is not None:
        raise ValueError(f"data set {result.id!r} is already consumed by {result.consumer.id!r}")
    result.consumer = consumer
    result.edge = edge
    if edge.distribution_pattern is DistributionPattern.ALL_TO_ALL:
        _connect_all_to_all(consumer, result)
    else:
        _connect_pointwise(consumer, result)


def _connect_all_to_all(consumer: ExecutionJobVertex, result: IntermediateResult) -> None:
    consumed = ConsumedPartitionGroup(result, range(len(result.partitions)))
    for vertex in consumer.task_vertices:
        vertex.consumed_partition_groups.append(consumed)
    consumers = ConsumerVertexGroup(consumer, range(consumer.parallelism))
    for partition in result.partitions:
        partition.consumer_vertex_group = consumers
        partition.number_of_subpartitions = consumer.parallelism


def _connect_pointwise(consumer: ExecutionJobVertex, result: IntermediateResult) -> None:
    partitions = result.partitions
    targets = consumer.task_vertices
    source_count = len(partitions)
    target_count = len(targets)

    if source_count == target_count:
        for i, (partition, vertex) in enumerate(zip(partitions, targets, strict=True)):
            vertex.consumed_partition_groups.append(ConsumedPartitionGroup(result, range(i, i + 1)))
            partition.consumer_vertex_group = ConsumerVertexGroup(consumer, range(i, i + 1))
            partition.number_of_subpartitions = 1
    elif source_count > target_count:
        # Fan-in: each consumer reads a contiguous run of partitions, alone.
        for t, vertex in enumerate(targets):
            start = t * source_count // target_count
            end = (t + 1) * source_count // target_count
            vertex.consumed_partition_groups.append(ConsumedPartitionGroup(result, range(start, end)))
            consumers = ConsumerVertexGroup(consumer, range(t, t + 1))
            for p in range(start, end):
                partitions[p].consumer_vertex_group = consumers
                partitions[p].number_of_subpartitions = 1
    else:
        # Fan-out: each partition feeds a contiguous run of consumers, which share
        # the one-partition group that names it.
        for p, partition in enumerate(partitions):
            start = (p * target_count + source_count - 1) // source_count
            end = ((p + 1) * target_count + source_count - 1) // source_count
            consumed = ConsumedPartitionGroup(result, range(p, p + 1))
            for t in range(start, end):
                targets[t].consumed_partition_groups.append(consumed)
            partition.consumer_vertex_group = ConsumerVertexGroup(consumer, range(start, end))
            partition.number_of_subpartitions = end - start


def subpartition_range(partition: IntermediateResultPartition, consumer_subtask: int) -> range:
    """The subpartitions of `partition` that consumer subtask `consumer_subtask` reads.

    A producer splits each partition into one subpartition per consumer it fed when the
    graph was wired, numbered from the first subtask of its ConsumerVertexGroup: one
    each. A consumer whose parallelism was decided lower since (narrow_consumer) reads a
    contiguous run of them, as Flink's adaptive batch scheduler gives each subtask a
    SubpartitionIndexRange: a hashed key is in one subpartition, so in one subtask's run.
    """
    group = partition.consumer_vertex_group
    if group is None or consumer_subtask not in group.subtask_range:
        raise ValueError(f"subtask {consumer_subtask} does not consume partition {partition.partition_id!r}")
    index, consumers = consumer_subtask - group.subtask_range.start, len(group.subtask_range)
    subpartitions = partition.number_of_subpartitions
    return range(index * subpartitions // consumers, (index + 1) * subpartitions // consumers)


def narrow_consumer(consumer: ExecutionJobVertex) -> None:
    """`consumer` now has fewer subtasks (its parallelism was decided): the partitions it
    reads over all-to-all edges are read by those alone (their subpartitions stay)."""
    for result in consumer.inputs:
        for partition in result.partitions:
            group = partition.consumer_vertex_group
            if group is not None and group.vertex is consumer:
                group.subtask_range = range(consumer.parallelism)


def narrow_producer(result: IntermediateResult) -> None:
    """The producer of `result` now has fewer subtasks: an all-to-all consumer reads
    only their partitions."""
    consumer = result.consumer
    for vertex in consumer.task_vertices if consumer is not None else ():
        for group in vertex.consumed_partition_groups:
            if group.result is result:
                group.partition_range = range(len(result.partitions))
