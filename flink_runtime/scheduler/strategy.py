"""Which subtasks to deploy when: Flink's lazy-from-sources scheduling of batch jobs.

Exchanges are blocking, so a subtask can run once every partition it reads is
finished. At the start (and after a restore, which may mark subtasks finished) that is
the sources and whatever the restore made ready; afterwards each finished partition
(ScheduleOrUpdateConsumers) can make its consumers ready. Pure: it reads the
ExecutionGraph and names vertices; deploying them is the JobMaster's business.
"""

from __future__ import annotations

from collections.abc import Iterable

from flink_runtime.executiongraph import ExecutionGraph, ExecutionState, ExecutionVertex, IntermediateResultPartition
from flink_runtime.jobgraph.jobgraph import DistributionPattern


def _ready(vertex: ExecutionVertex) -> bool:
    return vertex.current_execution.state is ExecutionState.CREATED and all(
        group.all_finished() for group in vertex.consumed_partition_groups
    )


def inputs_finished(vertex: ExecutionVertex) -> bool:
    """Every partition the subtask reads is finished (a source: always)."""
    return all(group.all_finished() for group in vertex.consumed_partition_groups)


def vertices_to_start(graph: ExecutionGraph) -> list[ExecutionVertex]:
    """Not yet scheduled, with every input finished (sources have none)."""
    return [vertex for ejv in graph.vertices.values() for vertex in ejv.task_vertices if _ready(vertex)]


def sources_to_restart(graph: ExecutionGraph) -> Iterable[ExecutionVertex]:
    """After a restart or a new round every subtask is new: the sources come first."""
    return [vertex for ejv in graph.source_vertices() for vertex in ejv.task_vertices]


def consumers_ready(partition: IntermediateResultPartition) -> list[ExecutionVertex]:
    """The partition just finished: the consumers that can run now. Consumers of an
    ALL_TO_ALL result read every partition, so they wait for the last one."""
    group = partition.consumer_vertex_group
    if group is None:
        return []
    result = partition.result
    all_to_all = result.edge is not None and result.edge.distribution_pattern is DistributionPattern.ALL_TO_ALL
    if all_to_all and not result.all_partitions_finished:
        return []
    return [consumer for consumer in group if _ready(consumer)]
