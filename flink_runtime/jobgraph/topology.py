"""Order and cycles of a JobGraph's vertices: the one topological sort of the project.

Validation uses it to reject cycles (naming one concrete cycle per strongly connected
component), the ExecutionGraph to create vertices producers first.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from flink_runtime.jobgraph.errors import InvalidJobGraph
from flink_runtime.jobgraph.jobgraph import JobGraph


def topological_order(graph: JobGraph) -> list[str]:
    """Vertex ids, every producer before its consumers; raises InvalidJobGraph on a cycle.

    Among vertices that are ready at the same time the one declared first comes
    first, so a graph declared in topological order keeps its order. Edges that
    reference unknown data sets or vertices are ignored (validation reports them).
    """
    ids, successors = dependencies(graph, include_self_loops=True)
    order = kahn(successors)
    if len(order) < len(ids):
        raise InvalidJobGraph([cycle_message(ids, cycle) for cycle in cycles(successors)])
    return [ids[index] for index in order]


def dependencies(graph: JobGraph, *, include_self_loops: bool) -> tuple[list[str], list[list[int]]]:
    """Vertex ids (first declaration of each) and, per vertex, the indexes of its consumers."""
    index_of: dict[str, int] = {}
    for vertex in graph.vertices:
        index_of.setdefault(vertex.id, len(index_of))
    producer_of = {}
    for dataset in graph.intermediate_datasets:
        producer_of.setdefault(dataset.id, dataset.producer)
    successors: list[list[int]] = [[] for _ in index_of]
    for edge in graph.edges:
        producer = index_of.get(producer_of.get(edge.source, ""))
        consumer = index_of.get(edge.target)
        if producer is None or consumer is None or (producer == consumer and not include_self_loops):
            continue
        successors[producer].append(consumer)
    return list(index_of), successors


def kahn(successors: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's algorithm, always taking the lowest ready index; short of a cycle's vertices."""
    in_degree = [0] * len(successors)
    for targets in successors:
        for target in targets:
            in_degree[target] += 1
    ready = [node for node, degree in enumerate(in_degree) if degree == 0]  # sorted: a valid heap
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for target in successors[node]:
            in_degree[target] -= 1
            if in_degree[target] == 0:
                heapq.heappush(ready, target)
    return order


def cycles(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """One concrete cycle per strongly connected component that has one."""
    found = []
    for component in _strongly_connected_components(successors):
        members = set(component)
        start = min(component)
        if len(component) == 1 and start not in successors[start]:
            continue
        # Inside a cyclic component every vertex has a successor in it, so following
        # them must come back to a vertex already on the path.
        path: list[int] = []
        position: dict[int, int] = {}
        node = start
        while node not in position:
            position[node] = len(path)
            path.append(node)
            node = min(target for target in successors[node] if target in members)
        found.append(path[position[node] :] + [node])
    return sorted(found)


def _strongly_connected_components(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """Tarjan's algorithm, iterative so that long chains do not hit the recursion limit."""
    count = len(successors)
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
    components = []
    counter = 0
    for root in range(count):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, iter(successors[root]))]
        while work:
            node, targets = work[-1]
            for target in targets:
                if index[target] == -1:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack[target] = True
                    work.append((target, iter(successors[target])))
                    break
                if on_stack[target]:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack[member] = False
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def cycle_message(ids: Sequence[str], cycle: Sequence[int]) -> str:
    names = [f"'{ids[node]}'" for node in cycle]
    if len(names) > 12:
        names = names[:10] + [f"... ({len(cycle) - 1} vertices in all)", names[-1]]
    path = " -> ".join(names)
    return (
        f"The vertices {path} form a cycle; a JobGraph must be acyclic, so remove or redirect one of the edges on it."
    )
