"""Summaries of a vertex's subtasks for REST answers and dashboards.

Nothing in coordination depends on these; they mirror what Flink's web UI shows.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.io.metrics import NO_IO, IOMetrics

if TYPE_CHECKING:
    from flink_runtime.executiongraph.executiongraph import ExecutionGraph
    from flink_runtime.executiongraph.vertices import ExecutionJobVertex, ExecutionVertex

_S = ExecutionState

# Key order of Flink's REST "tasks" object. RECONCILING is a Flink state we never
# enter; the key stays so clients written for Flink find every field.
TASK_COUNT_KEYS: tuple[str, ...] = (
    "created",
    "scheduled",
    "deploying",
    "running",
    "finished",
    "canceling",
    "canceled",
    "failed",
    "reconciling",
    "initializing",
)
_STATE_OF_KEY = {key: _S.__members__.get(key.upper()) for key in TASK_COUNT_KEYS}


def vertex_task_counts(ejv: ExecutionJobVertex) -> dict[str, int]:
    """How many subtasks' current attempts are in each state, keyed as Flink's REST does."""
    counts = Counter(vertex.current_execution.state for vertex in ejv.task_vertices)
    return {key: counts.get(state, 0) for key, state in _STATE_OF_KEY.items()}


def aggregate_vertex_state(ejv: ExecutionJobVertex) -> ExecutionState:
    """One state for the whole vertex, by Flink's ExecutionJobVertex.getAggregateJobVertexState.

    The first rule that applies wins: any FAILED, any CANCELING, any CANCELED, any
    INITIALIZING, any RUNNING; FINISHED only if all finished (some finished and the
    rest not yet running reads as RUNNING); everything else collapses to CREATED.
    """
    counts = Counter(vertex.current_execution.state for vertex in ejv.task_vertices)
    for state in (_S.FAILED, _S.CANCELING, _S.CANCELED, _S.INITIALIZING, _S.RUNNING):
        if counts[state]:
            return state
    if counts[_S.FINISHED]:
        return _S.FINISHED if counts[_S.FINISHED] == ejv.parallelism else _S.RUNNING
    return _S.CREATED


class VertexIOMetrics(NamedTuple):
    """A vertex's (or subtask's) I/O so far, and whether every current attempt has
    reported (Flink's "read-records-complete" and the other "*-complete" fields:
    attempts report when they end, so a running vertex is incomplete)."""

    metrics: IOMetrics
    complete: bool


def subtask_io_metrics(vertex: ExecutionVertex) -> VertexIOMetrics:
    """One subtask's I/O: its earlier rounds (continuous jobs) plus its current attempt."""
    current = vertex.current_execution.io_metrics
    earlier = vertex.earlier_rounds_io_metrics
    if current is None:
        return VertexIOMetrics(earlier, False)
    # No earlier rounds (every job but a continuous one): the attempt's own, not a new sum
    # (IOMetrics is immutable); a job's snapshot asks this twice per subtask.
    return VertexIOMetrics(current if earlier is NO_IO else earlier + current, True)


def vertex_io_metrics(ejv: ExecutionJobVertex) -> VertexIOMetrics:
    """The sum over a vertex's subtasks of `subtask_io_metrics`: what Flink's GET /jobs/:id
    shows as a vertex's "metrics". Failed or cancelled attempts that were replaced are
    not counted (their replacements redo the work), as in Flink."""
    subtasks = [subtask_io_metrics(vertex) for vertex in ejv.task_vertices]
    return VertexIOMetrics(
        IOMetrics.merge(subtask.metrics for subtask in subtasks), all(subtask.complete for subtask in subtasks)
    )


def graph_io_metrics(graph: ExecutionGraph) -> dict[str, VertexIOMetrics]:
    """`vertex_io_metrics` of every vertex of a job, by vertex id (topological order)."""
    return {vertex_id: vertex_io_metrics(ejv) for vertex_id, ejv in graph.vertices.items()}
