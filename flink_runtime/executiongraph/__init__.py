"""The ExecutionGraph: a JobGraph expanded to subtasks, attempts and result partitions."""

from flink_runtime.executiongraph.aggregation import (
    TASK_COUNT_KEYS,
    VertexIOMetrics,
    aggregate_vertex_state,
    graph_io_metrics,
    subtask_io_metrics,
    vertex_io_metrics,
    vertex_task_counts,
)
from flink_runtime.executiongraph.executiongraph import ExecutionGraph
from flink_runtime.executiongraph.states import ExecutionState, IllegalStateTransition, JobStatus
from flink_runtime.executiongraph.vertices import (
    ConsumedPartitionGroup,
    ConsumerVertexGroup,
    Execution,
    ExecutionJobVertex,
    ExecutionVertex,
    IntermediateResult,
    IntermediateResultPartition,
    default_max_parallelism,
)
from flink_runtime.executiongraph.wiring import subpartition_range

__all__ = [
    "TASK_COUNT_KEYS",
    "ConsumedPartitionGroup",
    "ConsumerVertexGroup",
    "Execution",
    "ExecutionGraph",
    "ExecutionJobVertex",
    "ExecutionState",
    "ExecutionVertex",
    "IllegalStateTransition",
    "IntermediateResult",
    "IntermediateResultPartition",
    "JobStatus",
    "VertexIOMetrics",
    "aggregate_vertex_state",
    "default_max_parallelism",
    "graph_io_metrics",
    "subpartition_range",
    "subtask_io_metrics",
    "vertex_io_metrics",
    "vertex_task_counts",
]
