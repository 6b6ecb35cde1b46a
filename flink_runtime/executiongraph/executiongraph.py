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
from flink_runtime.executiongraph.execution import Execution, ExecutionVertex
from flink_runtime.executiongraph.intermediate import IntermediateResult, IntermediateResultPartition
from flink_runtime.jobgraph.jobgraph import (
    MAX_PARALLELISM_UPPER_BOUND,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobVertex,
)
from flink_runtime.jobgraph.topology import topological_order

# Flink's lower bound for a derived max parallelism (KeyGroupRangeAssignment).
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128


def default_max_parallelism(parallelism: int) -> int:
    """Flink's computeDefaultMaxParallelism: 1.5 x parallelism rounded up to a power of two."""
    wanted = parallelism + parallelism // 2
    power_of_two = 1 << (wanted - 1).bit_length()
    return min(max(power_of_two, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), MAX_PARALLELISM_UPPER_BOUND)


class ExecutionGraph:
    """The runtime view of one job: what runs, where its data goes, which attempt is current."""

    def __init__(self, job_graph: JobGraph):
        self.job_graph = job_graph
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
                ejv.connect_input(self.results[edge.source], edge)
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
    )

    def __init__(
        self,
        graph: ExecutionGraph,
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
        # Filled by connect_input, in the order of the job graph's edges.
        self.inputs: list[IntermediateResult] = []
        self.input_edges: list[JobEdge] = []
        self.task_vertices = [ExecutionVertex(self, index) for index in range(self.parallelism)]
        for position, result in enumerate(self.produced_results):
            result.partitions = [vertex.produced_partitions[position] for vertex in self.task_vertices]

    def connect_input(self, result: IntermediateResult, edge: JobEdge) -> None:
        """Add `result` as the next input, read over `edge`."""
        self.inputs.append(result)
        self.input_edges.append(edge)
        wiring.connect(self, result, edge)

    def __repr__(self) -> str:
        return f"ExecutionJobVertex({self.id!r}, parallelism={self.parallelism})"
