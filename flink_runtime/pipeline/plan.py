"""The logical plan a Pipeline records: one Node per operator the user called.

A node knows its inputs, what it does (`spec`, the piece of vertex config it becomes)
and the user's settings (parallelism, name, chaining). It knows nothing about
vertices: `translate` decides which nodes share a vertex and where data is exchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flink_runtime.jobgraph.jobgraph import ResourceProfile


class Kind(enum.Enum):
    # Reads files; always the head of a vertex.
    SOURCE = "source"
    # Row-by-row operators (select, filter, with_column, sql, transform): chainable.
    NARROW = "narrow"
    # Writes files; chainable like a narrow operator, consumed by nobody.
    SINK = "sink"
    # Operators behind a data exchange; always the head of a vertex.
    AGGREGATE = "aggregate"
    DISTINCT = "distinct"
    JOIN = "join"
    UNION = "union"
    REBALANCE = "rebalance"
    # Global order: range-partitioned behind a broadcast exchange (operators/spark/ordering.py).
    ORDER = "order"
    # The first n rows (in an order, when it follows order_by): partial per producer, final in one subtask.
    LIMIT = "limit"
    # A sql() over all rows of each key (window functions): behind a hash exchange on the keys.
    KEYED_SQL = "keyed_sql"


@dataclass(eq=False)
class Node:
    """One operator. Compared by identity: two equal-looking selects are two nodes."""

    kind: Kind
    inputs: list[Node]
    # source: the source config; sink: the sink config; narrow: the operator dict;
    # aggregate: {"keys", "aggregates"}; join: {"on", "how"}; others: {}.
    spec: dict[str, Any]
    # The operator's name in a vertex name ("Select") and its vertex id prefix ("select").
    label: str
    id_prefix: str
    # Creation order, which is a topological order: inputs exist before their consumers.
    sequence: int
    parallelism: int | None = None
    name: str | None = None
    chaining: bool = True
    # What one subtask of the operator needs (None: unspecified), and the name of the slot
    # sharing group it was put in (None: its input's, or "default").
    resources: ResourceProfile | None = None
    slot_sharing_group: str | None = None

    @property
    def display_name(self) -> str:
        return self.name if self.name is not None else self.label


class LogicalPlan(Protocol):
    """A Pipeline as `translate` reads it: its settings and the nodes recorded so far."""

    name: str
    parallelism: int
    chaining: bool
    config: dict[str, Any]
    libraries: list[str]

    @property
    def nodes(self) -> list[Node]: ...

    @property
    def slot_sharing_group_resources(self) -> dict[str, ResourceProfile]: ...
