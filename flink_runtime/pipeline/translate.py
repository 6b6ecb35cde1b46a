"""From a Pipeline's logical plan to a JobGraph of "spark" vertices.

Each vertex runs one chain of operators over one DataFrame. Its config is what the
Spark task reads:

    {"source": {...}}      only on vertices that read files
    {"operators": [...]}   always, applied in order to the vertex's input
    {"sink": {...}}        only on vertices that write files

Operators are chained as in Flink: a narrow operator (select, filter, with_column,
sql, transform, or a sink) joins its producer's vertex when chaining is on for the
pipeline and for the operator, the producer feeds nobody else, and both run with the
same parallelism. Otherwise it starts a vertex of its own, fed forward (equal
parallelism) or rebalanced (different parallelism).

Operators that need the rows of a key, or all rows, in one place start a vertex
behind an exchange: aggregate and distinct (hash on the keys, after a partial phase
in the producer where possible), join (hash on the join columns, left input first)
and union and rebalance (round robin); order_by (broadcast: each subtask cuts its own
range, operators/spark/ordering.py), limit (a partial top-N in the producer, the final
one in a single subtask) and a keyed sql (hash on the keys, for window functions).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from flink_runtime.jobgraph.jobgraph import (
    DistributionPattern,
    JobGraph,
    JobVertex,
    Partitioner,
    ResourceProfile,
    new_job_id,
)
from flink_runtime.jobgraph.validation import validate_job_graph
from flink_runtime.operators.aggregates import can_combine
from flink_runtime.pipeline.plan import Kind, LogicalPlan, Node
from flink_runtime.pipeline.resources import add_specs

INVOKABLE = "spark"
# Operators whose output order the operators after them keep (in the same subtasks).
_ORDERED = (Kind.ORDER, Kind.LIMIT)
MAX_VERTEX_NAME = 256


def translate(pipeline: LogicalPlan, job_id: str | None = None) -> JobGraph:
    """The validated JobGraph of the pipeline's operators that lead to a sink."""
    nodes = _leading_to_sinks(pipeline)
    # How many operators read each node's output; a node read twice (even by one join)
    # produces two data sets, and nothing chains into it.
    consumers = Counter(producer for node in nodes for producer in node.inputs)
    builder = _Builder(pipeline, consumers)
    for node in nodes:
        builder.add(node)
    graph = builder.job_graph(job_id or new_job_id())
    validate_job_graph(graph)
    return graph


def _leading_to_sinks(pipeline: LogicalPlan) -> list[Node]:
    """The nodes some sink depends on, in creation (hence topological) order."""
    sinks = [node for node in pipeline.nodes if node.kind is Kind.SINK]
    if not sinks:
        raise ValueError(
            f"Pipeline {pipeline.name!r} has no sink, so it would compute nothing; "
            "add a sink with write_parquet/write_csv/write_json."
        )
    needed: set[Node] = set()
    pending = list(sinks)
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            pending.extend(node.inputs)
    return sorted(needed, key=lambda node: node.sequence)


@dataclass(eq=False)
class _Vertex:
    """A vertex being built: its chain grows as operators are chained into it."""

    id: str
    parallelism: int
    slot_sharing_group: str = "default"
    # An operator in it set its parallelism (set_parallelism, or a limit's final top-N):
    # else it is only the pipeline's, and the scheduler may lower it from the data
    # (JobVertex.parallelism_configured, as Flink's for parallelism that was not set).
    configured: bool = False
    # What the operators chained into it asked for (summed into the vertex's resources).
    resources: list[ResourceProfile] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    source: dict[str, Any] | None = None
    operators: list[dict[str, Any]] = field(default_factory=list)
    sink: dict[str, Any] | None = None

    def append(self, label: str, operator: dict[str, Any]) -> None:
        self.labels.append(label)
        self.operators.append(copy.deepcopy(operator))

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.source is not None:
            config["source"] = self.source
        config["operators"] = self.operators
        if self.sink is not None:
            config["sink"] = self.sink
        return config


class _Builder:
    def __init__(self, pipeline: LogicalPlan, consumers: Counter[Node]) -> None:
        self._pipeline = pipeline
        self._consumers = consumers
        self._graph = JobGraph(
            name=pipeline.name,
            vertices=[],
            config=copy.deepcopy(pipeline.config),
            libraries=list(pipeline.libraries),
        )
        self._vertices: list[_Vertex] = []
        # The vertex whose output is the node's output.
        self._vertex_of: dict[Node, _Vertex] = {}
        # Vertices whose output is in order (an order_by's or a limit's, and what they feed forward).
        self._ordered: set[_Vertex] = set()

    def add(self, node: Node) -> None:
        handlers = {
            Kind.SOURCE: self._source,
            Kind.NARROW: self._narrow,
            Kind.SINK: self._narrow,
            Kind.AGGREGATE: self._aggregate,
            Kind.DISTINCT: self._distinct,
            Kind.JOIN: self._join,
            Kind.UNION: self._union,
            Kind.REBALANCE: self._rebalance,
            Kind.ORDER: self._order,
            Kind.LIMIT: self._limit,
            Kind.KEYED_SQL: self._keyed_sql,
        }
        vertex = self._vertex_of[node] = handlers[node.kind](node)
        if node.kind in _ORDERED:
            self._ordered.add(vertex)
        if node.resources is not None:
            vertex.resources.append(node.resources)

    # -- one method per kind of operator ---------------------------------------------------

    def _source(self, node: Node) -> _Vertex:
        vertex = self._new_vertex(node)
        vertex.labels.append(node.display_name)
        vertex.source = copy.deepcopy(node.spec)
        return vertex

    def _narrow(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        upstream = self._vertex_of[producer]
        if self._chains(node, producer, upstream):
            vertex = upstream
            vertex.configured |= node.parallelism is not None
        else:
            vertex = self._new_vertex(node)
            if upstream in self._ordered:
                if upstream.parallelism != vertex.parallelism:
                    raise ValueError(
                        f"{node.display_name} runs with parallelism {vertex.parallelism} after an order_by or limit "
                        f"with {upstream.parallelism}: redistributing the rows would lose their order; leave its "
                        "parallelism unset (it follows the order's), or set the order's instead."
                    )
                self._ordered.add(vertex)  # fed forward, subtask by subtask: still in order
            if upstream.parallelism == vertex.parallelism:
                self._connect(upstream, vertex, DistributionPattern.POINTWISE, Partitioner.FORWARD)
            else:
                self._connect(upstream, vertex, DistributionPattern.ALL_TO_ALL, Partitioner.REBALANCE)
        if node.kind is Kind.SINK:
            vertex.labels.append(node.display_name)
            vertex.sink = copy.deepcopy(node.spec)
        else:
            vertex.append(node.display_name, node.spec)
        return vertex

    def _aggregate(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        upstream = self._vertex_of[producer]
        keys, aggregates = node.spec["keys"], node.spec["aggregates"]
        # The partial phase changes what the producer's vertex outputs, so it needs the
        # producer to feed this aggregate only; otherwise raw rows go to one complete phase.
        if can_combine(aggregates) and self._consumers[producer] == 1:
            partial = {"op": "aggregate", "keys": keys, "aggregates": aggregates, "phase": "partial"}
            upstream.append(_phase_label(node, "Partial aggregate", "partial"), partial)
            phase, label = "final", _phase_label(node, "Final aggregate")
        else:
            phase, label = "complete", node.display_name
        vertex = self._new_vertex(node)
        self._connect(upstream, vertex, DistributionPattern.ALL_TO_ALL, Partitioner.HASH, keys)
        vertex.append(label, {"op": "aggregate", "keys": keys, "aggregates": aggregates, "phase": phase})
        return vertex

    def _distinct(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        upstream = self._vertex_of[producer]
        # Deduplicating before the exchange ships fewer rows; as for aggregates, only
        # when the producer's output goes nowhere else.
        if self._consumers[producer] == 1:
            upstream.append(_phase_label(node, "Partial distinct", "partial"), {"op": "distinct"})
        vertex = self._new_vertex(node)
        self._connect(upstream, vertex, DistributionPattern.ALL_TO_ALL, Partitioner.HASH, [])
        vertex.append(node.display_name, {"op": "distinct"})
        return vertex

    def _join(self, node: Node) -> _Vertex:
        vertex = self._new_vertex(node)
        on = node.spec["on"]
        for producer in node.inputs:  # left, then right: the task's input order
            self._connect(self._vertex_of[producer], vertex, DistributionPattern.ALL_TO_ALL, Partitioner.HASH, on)
        vertex.append(node.display_name, {"op": "join", "on": on, "how": node.spec["how"]})
        return vertex

    def _union(self, node: Node) -> _Vertex:
        vertex = self._new_vertex(node)
        for producer in node.inputs:
            self._connect(self._vertex_of[producer], vertex, DistributionPattern.ALL_TO_ALL, Partitioner.REBALANCE)
        vertex.append(node.display_name, {"op": "union"})
        return vertex

    def _rebalance(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        vertex = self._new_vertex(node)
        self._connect(self._vertex_of[producer], vertex, DistributionPattern.ALL_TO_ALL, Partitioner.REBALANCE)
        vertex.labels.append(node.display_name)
        return vertex

    def _order(self, node: Node) -> _Vertex:
        # Every subtask sees all rows' keys to draw the same range boundaries, and keeps its
        # range (operators/spark/ordering.py): producers write their rows once, broadcast.
        (producer,) = node.inputs
        vertex = self._new_vertex(node)
        self._connect(self._vertex_of[producer], vertex, DistributionPattern.ALL_TO_ALL, Partitioner.BROADCAST)
        vertex.append(node.display_name, {"op": "order", "order": node.spec["order"]})
        return vertex

    def _limit(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        upstream = self._vertex_of[producer]
        operator = {"op": "limit", "n": node.spec["n"], "order": node.spec["order"]}
        # Each producer keeps its own first n (the partial top-N) when it feeds nobody else.
        if self._consumers[producer] == 1:
            upstream.append(_phase_label(node, f"Partial {node.label.lower()}", "partial"), operator)
        vertex = self._new_vertex(node)
        vertex.parallelism, vertex.configured = 1, True  # the final top-N sees every producer's candidates
        self._connect(upstream, vertex, DistributionPattern.ALL_TO_ALL, Partitioner.REBALANCE)
        vertex.append(node.display_name, operator)
        return vertex

    def _keyed_sql(self, node: Node) -> _Vertex:
        (producer,) = node.inputs
        vertex = self._new_vertex(node)
        keys = node.spec["keys"]
        self._connect(self._vertex_of[producer], vertex, DistributionPattern.ALL_TO_ALL, Partitioner.HASH, keys)
        vertex.append(node.display_name, {"op": "sql", "query": node.spec["query"]})
        return vertex

    # -- helpers ---------------------------------------------------------------------------

    def _chains(self, node: Node, producer: Node, upstream: _Vertex) -> bool:
        return (
            self._pipeline.chaining
            and node.chaining
            and self._consumers[producer] == 1
            and upstream.parallelism == self._parallelism(node)
            and node.slot_sharing_group in (None, upstream.slot_sharing_group)
        )

    def _parallelism(self, node: Node) -> int:
        if node.parallelism is not None:
            return node.parallelism
        if node.inputs and all(self._vertex_of[producer] in self._ordered for producer in node.inputs):
            # What follows an order or a limit stays in its subtasks, so it keeps the order.
            return self._vertex_of[node.inputs[0]].parallelism
        return self._pipeline.parallelism

    def _new_vertex(self, node: Node) -> _Vertex:
        group = node.slot_sharing_group
        if group is None:
            # As in Flink: an operator without a group takes its inputs' when they agree.
            inherited = {self._vertex_of[producer].slot_sharing_group for producer in node.inputs}
            group = inherited.pop() if len(inherited) == 1 else "default"
        vertex = _Vertex(
            id=f"{node.id_prefix}-{len(self._vertices) + 1}",
            parallelism=self._parallelism(node),
            slot_sharing_group=group,
            configured=node.parallelism is not None,
        )
        self._vertices.append(vertex)
        return vertex

    def _connect(
        self,
        producer: _Vertex,
        consumer: _Vertex,
        pattern: DistributionPattern,
        partitioner: Partitioner,
        keys: list[str] | None = None,
    ) -> None:
        self._graph.connect(producer.id, consumer.id, pattern, partitioner, keys=list(keys or []))

    def job_graph(self, job_id: str) -> JobGraph:
        taken: set[str] = set()
        for vertex in self._vertices:
            name = _unique_name(vertex.labels, taken)
            taken.add(name)
            self._graph.add_vertex(
                JobVertex(
                    id=vertex.id,
                    name=name,
                    invokable=INVOKABLE,
                    parallelism=vertex.parallelism,
                    parallelism_configured=vertex.configured,
                    config=vertex.config(),
                    slot_sharing_group=vertex.slot_sharing_group,
                    # Only when given: the JSON of a job without resources stays as it was.
                    **({"resources": add_specs(vertex.resources)} if vertex.resources else {}),
                )
            )
        used = {vertex.slot_sharing_group for vertex in self._vertices}
        # Groups given resources but no operator are left out, as Flink ignores them.
        self._graph.slot_sharing_groups = {
            name: spec for name, spec in self._pipeline.slot_sharing_group_resources.items() if name in used
        }
        self._graph.job_id = job_id
        return self._graph


def _phase_label(node: Node, default: str, suffix: str | None = None) -> str:
    """ "Partial aggregate" by default; "<user's name> (partial)" for a named operator."""
    if node.name is None:
        return default
    return f"{node.name} ({suffix})" if suffix else node.name


def _unique_name(labels: list[str], taken: set[str]) -> str:
    """The chain's operator names joined with " -> ", made unique (vertex names must be)."""
    name = _fit(" -> ".join(labels), labels, MAX_VERTEX_NAME)
    number = 1
    while name in taken:
        number += 1
        suffix = f" ({number})"
        name = _fit(" -> ".join(labels), labels, MAX_VERTEX_NAME - len(suffix)) + suffix
    return name


def _fit(name: str, labels: list[str], limit: int) -> str:
    if len(name) <= limit:
        return name
    # A very long chain keeps its ends: where the data comes from and where it goes.
    name = f"{labels[0]} -> ... ({len(labels) - 2} more) -> {labels[-1]}"
    return name if len(name) <= limit else name[: limit - 3] + "..."
