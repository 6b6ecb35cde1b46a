"""The ExecutionGraph: the JobGraph expanded to parallel subtasks.

Per JobVertex an ExecutionJobVertex, per subtask an ExecutionVertex, per attempt an
Execution; per IntermediateDataSet an IntermediateResult with one partition per
producer subtask. Vertices are built in topological order so that every input a
vertex is wired to already exists, as Flink's DefaultExecutionGraph.attachJobGraph
does.

The graph is touched only from the JobManager's main thread; nothing here locks.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from flink_runtime.executiongraph import wiring
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.executiongraph.vertices import (
    DEFAULT_ATTEMPTS_HISTORY_SIZE,
    Execution,
    ExecutionJobVertex,
    ExecutionVertex,
    IntermediateResult,
    IntermediateResultPartition,
)
from flink_runtime.jobgraph.jobgraph import IntermediateDataSet, JobEdge, JobGraph
from flink_runtime.jobgraph.topology import topological_order


class ExecutionGraph:
    """The runtime view of one job: what runs, where its data goes, which attempt is current."""

    def __init__(self, job_graph: JobGraph, attempts_history_size: int = DEFAULT_ATTEMPTS_HISTORY_SIZE):
        """attempts_history_size: how many ended attempts each subtask keeps (Flink's
        jobmanager.execution.attempts-history-size; 0 keeps none)."""
        self.job_graph = job_graph
        self.attempts_history_size = attempts_history_size
        self.job_id = job_graph.job_id
        # Like Flink's ExecutionGraphID: part of every attempt id, so a graph rebuilt
        # for the same job (after a JobManager failover) never reuses one.
        self.graph_id = secrets.token_hex(4)
        self.vertices: dict[str, ExecutionJobVertex] = {}
        self.results: dict[str, IntermediateResult] = {}
        self._executions: dict[str, Execution] = {}

        produced: dict[str, list[IntermediateDataSet]] = {}
        for dataset in job_graph.intermediate_datasets:
            produced.setdefault(dataset.producer, []).append(dataset)
        consumed: dict[str, list[JobEdge]] = {}
        for edge in job_graph.edges:
            consumed.setdefault(edge.target, []).append(edge)

        vertex_by_id = {vertex.id: vertex for vertex in job_graph.vertices}
        for job_vertex in (vertex_by_id[vertex_id] for vertex_id in topological_order(job_graph)):
            ejv = ExecutionJobVertex(self, job_vertex, produced.get(job_vertex.id, ()))
            self.vertices[ejv.id] = ejv
            for result in ejv.produced_results:
                self.results[result.id] = result
            for edge in consumed.get(job_vertex.id, ()):
                result = self.results[edge.source]
                ejv.inputs.append(result)
                ejv.input_edges.append(edge)
                wiring.connect(ejv, result, edge)
            for vertex in ejv.task_vertices:
                execution = vertex.current_execution
                self._executions[execution.attempt_id] = execution

        self.total_subtasks = sum(ejv.parallelism for ejv in self.vertices.values())

    # -- navigation ---------------------------------------------------------------

    def all_execution_vertices(self) -> Iterator[ExecutionVertex]:
        for ejv in self.vertices.values():
            yield from ejv.task_vertices

    def source_vertices(self) -> list[ExecutionJobVertex]:
        return [ejv for ejv in self.vertices.values() if not ejv.inputs]

    def execution(self, attempt_id: str) -> Execution | None:
        """The current attempt with this id; None for unknown or superseded attempts."""
        return self._executions.get(attempt_id)

    def partition(self, partition_id: str) -> IntermediateResultPartition | None:
        """Look up a partition by `IntermediateResultPartition.partition_id`."""
        result_id, _, number = partition_id.rpartition("#")
        result = self.results.get(result_id)
        if result is None or not number.isdigit() or int(number) >= len(result.partitions):
            return None
        return result.partitions[int(number)]

    # -- adaptive parallelism ---------------------------------------------------------

    def decide_parallelism(self, ejv: ExecutionJobVertex, parallelism: int) -> list[ExecutionVertex]:
        """Fix the parallelism of a vertex whose parallelism was not configured, before any
        of its subtasks was scheduled (Flink's AdaptiveBatchScheduler initialising a job
        vertex once its inputs are known): the subtasks past `parallelism` are removed
        and returned; the partitions it reads keep their subpartitions, which the subtasks
        left read in contiguous runs (wiring.subpartition_range). Only all-to-all edges
        may touch it (scheduler/adaptive_parallelism.py checks that)."""
        if ejv.parallelism_decided:
            raise ValueError(f"vertex {ejv.id!r}: its parallelism is decided already")
        if not 1 <= parallelism <= ejv.parallelism:
            raise ValueError(f"vertex {ejv.id!r}: parallelism {parallelism} is not in [1, {ejv.parallelism}]")
        started = [v for v in ejv.task_vertices if v.current_execution.state is not ExecutionState.CREATED]
        if started or any(v.current_execution.attempt_number for v in ejv.task_vertices):
            raise ValueError(f"vertex {ejv.id!r}: its subtasks were scheduled already")
        removed = ejv.task_vertices[parallelism:]
        ejv.task_vertices = ejv.task_vertices[:parallelism]
        ejv.parallelism = parallelism
        ejv.parallelism_decided = True
        for vertex in removed:
            self._executions.pop(vertex.current_execution.attempt_id, None)
        self.total_subtasks -= len(removed)
        wiring.narrow_consumer(ejv)
        for result in ejv.produced_results:
            result.partitions = result.partitions[:parallelism]
            wiring.narrow_producer(result)
        return removed

    # -- internal -----------------------------------------------------------------

    def register_execution(self, execution: Execution, replaces: Execution | None = None) -> None:
        """Make `execution` findable by id; forget the attempt it supersedes.

        Called by ExecutionVertex.reset_for_new_execution, not by the scheduler.
        """
        if replaces is not None:
            self._executions.pop(replaces.attempt_id, None)
        self._executions[execution.attempt_id] = execution

    def __repr__(self) -> str:
        return f"ExecutionGraph({self.job_id!r}, {len(self.vertices)} vertices, {self.total_subtasks} subtasks)"
