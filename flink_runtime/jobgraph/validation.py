"""Checking a submitted JobGraph, in two stages.

1. Decoding (`decode_job_graph`, `convert_job_graph`): msgspec checks every field
   against the structs in `jobgraph.py` and stops at the first bad one. Its message
   ("Expected `int` >= 1 - at `$.vertices[0].parallelism`") is precise but written
   for programmers, so it is rewritten here to name the vertex, edge or data set, say
   what the field must be and show what it was.
2. Graph rules (`validate_job_graph`): what a single field cannot express - unique
   ids and names, references that resolve, one consumer per data set, no cycles,
   partitioners that fit their distribution pattern, co-location groups that can
   share a slot, known invokables and bounded sizes. All problems are collected, so a
   client fixes its graph in one round trip rather than one error at a time.

Every problem is a complete sentence: where, what is wrong, and what to do.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from flink_runtime.jobgraph.jobgraph import (
    MAX_PARALLELISM_UPPER_BOUND,
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    Partitioner,
    new_job_id,
)

MiB = 1024 * 1024
DEFAULT_MAX_DOCUMENT_BYTES = 16 * MiB


class InvalidJobGraph(ValueError):
    """A JobGraph was rejected. `errors` lists every problem found, one sentence each."""

    def __init__(self, errors: str | Iterable[str]) -> None:
        self.errors: list[str] = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("\n".join(self.errors))


# Lists and objects inside a config nest at most this deep (a vertex's config is a
# document, not a data structure; deeper ones only exhaust the recursion of encoders).
MAX_CONFIG_DEPTH = 32


@dataclass(frozen=True)
class JobGraphLimits:
    """Upper bounds on what one job may ask for.

    They protect the JobManager: the ExecutionGraph, the scheduler and every REST
    answer about the job grow with these numbers.
    """

    max_vertices: int = 10_000
    max_edges: int = 100_000
    max_datasets: int = 100_000
    # Sum of all vertices' parallelism: one Execution (and one slot request) each.
    max_total_subtasks: int = 1_000_000
    # The JSON size of one vertex's config, and of the job config.
    max_config_bytes: int = 1 * MiB
    # Beyond this many problems a client learns nothing new from the rest.
    max_errors: int = 100


# -- decoding -------------------------------------------------------------------------


def decode_job_graph(
    data: bytes | str,
    max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    *,
    invokable_exists: Callable[[str], bool] | None = None,
    builtin_invokables: Collection[str] = (),
    limits: JobGraphLimits = JobGraphLimits(),
) -> JobGraph:
    """Decode a JobGraph JSON document and validate it; raises InvalidJobGraph."""
    # A str can only be shorter in characters than in UTF-8 bytes, so the cheap length
    # check is exact for rejecting; encoding is needed only when it passes.
    if isinstance(data, str):
        if len(data) > max_bytes:
            raise _too_large(len(data.encode()), max_bytes)
        data = data.encode()
    if len(data) > max_bytes:
        raise _too_large(len(data), max_bytes)
    try:
        graph = msgspec.json.decode(data, type=JobGraph)
    except RecursionError:
        raise _too_deep() from None
    except msgspec.ValidationError as error:
        # The typed decoder stops at the first schema error, even when the document is
        # not JSON at all further on; the untyped pass tells the two apart and gives
        # the raw values to quote in the message.
        try:
            document = msgspec.json.decode(data)
        except msgspec.DecodeError as malformed:
            raise InvalidJobGraph(_explain_malformed_json(malformed, data)) from None
        except RecursionError:
            raise _too_deep() from None
        raise InvalidJobGraph(_explain_schema_error(str(error), document)) from None
    except msgspec.DecodeError as malformed:
        raise InvalidJobGraph(_explain_malformed_json(malformed, data)) from None
    return _complete_and_check(graph, invokable_exists, builtin_invokables, limits)


def convert_job_graph(
    data: dict[str, Any],
    *,
    invokable_exists: Callable[[str], bool] | None = None,
    builtin_invokables: Collection[str] = (),
    limits: JobGraphLimits = JobGraphLimits(),
) -> JobGraph:
    """Build a JobGraph from a JSON-like dict and validate it; raises InvalidJobGraph."""
    try:
        graph = msgspec.convert(data, JobGraph)
    except msgspec.ValidationError as error:
        raise InvalidJobGraph(_explain_schema_error(str(error), data)) from None
    return _complete_and_check(graph, invokable_exists, builtin_invokables, limits)


def _complete_and_check(
    graph: JobGraph,
    invokable_exists: Callable[[str], bool] | None,
    builtin_invokables: Collection[str],
    limits: JobGraphLimits,
) -> JobGraph:
    if graph.job_id is None:
        graph.job_id = new_job_id()
    _check_graph(graph, invokable_exists, builtin_invokables, limits)
    return graph


def _too_deep() -> InvalidJobGraph:
    return InvalidJobGraph(
        "The JobGraph document nests arrays or objects too deeply to be read; a config may nest "
        f"at most {MAX_CONFIG_DEPTH} levels."
    )


def _too_large(size: int, max_bytes: int) -> InvalidJobGraph:
    return InvalidJobGraph(
        f"The JobGraph document is {size:,} bytes, more than the limit of {max_bytes:,} bytes; "
        "move large data out of vertex config (e.g. into files the tasks read) or split the job."
    )


# -- graph rules ----------------------------------------------------------------------


def validate_job_graph(
    graph: JobGraph,
    *,
    invokable_exists: Callable[[str], bool] | None = None,
    builtin_invokables: Collection[str] = (),
    limits: JobGraphLimits = JobGraphLimits(),
) -> None:
    """Check a JobGraph's fields and graph rules; raises InvalidJobGraph listing all problems.

    `invokable_exists` answers whether an invokable name or class path can be run;
    without it invokables are checked for form only. `builtin_invokables` is only
    quoted in the message for an unknown one.
    """
    # A graph built in Python never went through the decoder, so its fields (a
    # parallelism of 0, a partitioner typed as a plain string) are unchecked; a round
    # trip through the builtin form applies exactly the decoder's rules.
    # A config value that is not JSON passes here as its repr; the config checks
    # report it with its vertex.
    document = msgspec.to_builtins(graph, enc_hook=repr)
    try:
        msgspec.convert(document, JobGraph)
    except msgspec.ValidationError as error:
        raise InvalidJobGraph(_explain_schema_error(str(error), document)) from None
    _check_graph(graph, invokable_exists, builtin_invokables, limits)


def _check_graph(
    graph: JobGraph,
    invokable_exists: Callable[[str], bool] | None,
    builtin_invokables: Collection[str],
    limits: JobGraphLimits,
) -> None:
    # Past these sizes the other checks (and their error lists) would cost what the
    # limits are there to prevent, so they are not run.
    size_errors = _check_counts(graph, limits)
    if size_errors:
        raise InvalidJobGraph(size_errors)

    errors: list[str] = []
    errors += _check_vertices(graph, invokable_exists, builtin_invokables, limits)
    errors += _check_datasets_and_edges(graph)
    errors += _check_co_location_groups(graph)
    errors += _check_acyclic(graph)
    if errors:
        if len(errors) > limits.max_errors:
            hidden = len(errors) - limits.max_errors
            errors = errors[: limits.max_errors] + [
                f"{hidden} more {'problem was' if hidden == 1 else 'problems were'} found but not "
                "listed; fix the ones above first."
            ]
        raise InvalidJobGraph(errors)


def _check_counts(graph: JobGraph, limits: JobGraphLimits) -> list[str]:
    errors = []
    for what, count, limit, advice in (
        ("vertices", len(graph.vertices), limits.max_vertices, "chain operators into fewer vertices"),
        ("edges", len(graph.edges), limits.max_edges, "split the job"),
        ("data sets", len(graph.intermediate_datasets), limits.max_datasets, "split the job"),
    ):
        if count > limit:
            errors.append(f"The job has {count:,} {what}, more than the limit of {limit:,}; {advice}.")
    return errors


def _check_vertices(
    graph: JobGraph,
    invokable_exists: Callable[[str], bool] | None,
    builtin_invokables: Collection[str],
    limits: JobGraphLimits,
) -> list[str]:
    errors = []
    if not graph.vertices:
        errors.append("The JobGraph has no vertices; add at least one vertex.")

    errors += _duplicates(
        [vertex.id for vertex in graph.vertices],
        lambda vertex_id, positions: (
            f"vertex id '{vertex_id}' is used by {len(positions)} vertices "
            f"({_listing(f'#{i}' for i in positions)}); vertex ids must be unique, so rename all but one."
        ),
    )
    errors += _duplicates(
        [vertex.name for vertex in graph.vertices],
        lambda name, positions: (
            f"vertex name '{name}' is used by vertices "
            f"{_quoted(graph.vertices[i].id for i in positions)}; "
            "vertex names must be unique, so rename all but one."
        ),
    )

    total_subtasks = 0
    known_invokables: dict[str, str | None] = {}  # invokable -> problem; many vertices share one
    for vertex in graph.vertices:
        where = f"vertex '{vertex.id}'"
        total_subtasks += vertex.parallelism
        if vertex.max_parallelism is not None and vertex.parallelism > vertex.max_parallelism:
            errors.append(
                f"{where}: parallelism {vertex.parallelism} is greater than its max_parallelism "
                f"{vertex.max_parallelism}; lower parallelism or raise max_parallelism "
                f"(at most {MAX_PARALLELISM_UPPER_BOUND})."
            )
        if vertex.co_location_group is not None and vertex.slot_sharing_group is None:
            errors.append(
                f"{where}: co_location_group '{vertex.co_location_group}' needs a slot_sharing_group, "
                "because co-located subtasks share one slot; set slot_sharing_group (e.g. 'default')."
            )
        if vertex.invokable not in known_invokables:
            known_invokables[vertex.invokable] = _invokable_problem(
                vertex.invokable, invokable_exists, builtin_invokables
            )
        problem = known_invokables[vertex.invokable]
        if problem:
            errors.append(f"{where}: {problem}")
        problem = _config_problem(vertex.config, limits.max_config_bytes)
        if problem:
            errors.append(f"{where}: config {problem}")

    problem = _config_problem(graph.config, limits.max_config_bytes)
    if problem:
        errors.append(f"The job config {problem}")
    if total_subtasks > limits.max_total_subtasks:
        errors.append(
            f"The job has {total_subtasks:,} subtasks in total (the sum of all vertices' parallelism), "
            f"more than the limit of {limits.max_total_subtasks:,}; lower the parallelism of some vertices."
        )
    return errors


# "package.module:ClassName", the form of a user-supplied invokable.
_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _invokable_problem(
    invokable: str,
    invokable_exists: Callable[[str], bool] | None,
    builtin_invokables: Collection[str],
) -> str | None:
    is_class_path = ":" in invokable
    if is_class_path and not _CLASS_PATH.match(invokable):
        return f"invokable '{invokable}' is not of the form 'package.module:ClassName'; correct it."
    if invokable_exists is None:
        return None
    try:
        exists = invokable_exists(invokable)
    except Exception as error:  # importing user code can fail in any way
        return f"invokable '{invokable}' could not be loaded ({error!r}); fix the module or its libraries."
    if exists:
        return None
    if is_class_path:
        return (
            f"invokable '{invokable}' was not found; check the module and class name, and that the "
            "module is importable on the TaskManagers (e.g. listed in the job's libraries)."
        )
    builtins = f" ({', '.join(sorted(builtin_invokables))})" if builtin_invokables else ""
    return (
        f"unknown invokable '{invokable}'{_did_you_mean(invokable, builtin_invokables)}; "
        f"use a built-in name{builtins} or 'package.module:Class'."
    )


def _config_problem(config: dict[str, Any], max_bytes: int) -> str | None:
    if _depth(config) > MAX_CONFIG_DEPTH:
        return f"nests lists or objects more than {MAX_CONFIG_DEPTH} levels deep; flatten it."
    try:
        size = len(msgspec.json.encode(config))
    except (TypeError, msgspec.EncodeError, RecursionError) as error:
        return f"is not JSON-serialisable ({error}); use only JSON values (str, number, bool, None, list, dict)."
    if size > max_bytes:
        return (
            f"is {size:,} bytes as JSON, more than the limit of {max_bytes:,}; "
            "pass large data through files the task reads instead."
        )
    return None


def _depth(value: Any) -> int:
    """How deeply lists and dicts nest in `value`; stops counting past the limit."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict | list) and level <= MAX_CONFIG_DEPTH:
            deepest = max(deepest, level + 1)
            pending.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _check_datasets_and_edges(graph: JobGraph) -> list[str]:
    errors = []
    vertices = {vertex.id: vertex for vertex in graph.vertices}
    datasets = {dataset.id: dataset for dataset in graph.intermediate_datasets}

    errors += _duplicates(
        [dataset.id for dataset in graph.intermediate_datasets],
        lambda dataset_id, positions: (
            f"data set id '{dataset_id}' is used by {len(positions)} data sets "
            f"({_listing(f'#{i}' for i in positions)}); data set ids must be unique, so rename all but one."
        ),
    )
    for dataset in graph.intermediate_datasets:
        if dataset.producer not in vertices:
            errors.append(
                f"data set '{dataset.id}': producer '{dataset.producer}' is not a vertex of this job"
                f"{_did_you_mean(dataset.producer, vertices)}; set producer to the id of the vertex "
                "that writes it."
            )

    consumers: dict[str, list[int]] = defaultdict(list)
    for index, edge in enumerate(graph.edges):
        where = f"edge #{index} ('{edge.source}' -> '{edge.target}')"
        dataset = datasets.get(edge.source)
        if dataset is None:
            if edge.source in vertices:
                hint = (
                    f"'{edge.source}' is a vertex, but an edge's source is a data set that vertex produces "
                    "(JobGraph.connect() creates both)"
                )
            else:
                hint = "declare it in intermediate_datasets or use JobGraph.connect()"
            errors.append(
                f"{where}: source '{edge.source}' is not a data set of this job"
                f"{_did_you_mean(edge.source, datasets)}; {hint}."
            )
        else:
            consumers[edge.source].append(index)
        consumer = vertices.get(edge.target)
        if consumer is None:
            errors.append(
                f"{where}: target '{edge.target}' is not a vertex of this job"
                f"{_did_you_mean(edge.target, vertices)}; set target to the id of the consuming vertex."
            )
        if dataset is not None and dataset.producer == edge.target:
            errors.append(
                f"vertex '{edge.target}' consumes its own output through data set '{dataset.id}' "
                f"(edge #{index}); an edge must lead to a different vertex."
            )
        producer = vertices.get(dataset.producer) if dataset is not None else None
        errors += [f"{where}: {problem}" for problem in _edge_problems(edge, producer, consumer)]

    for dataset_id, edge_indexes in consumers.items():
        if len(edge_indexes) > 1:
            edges = _listing(f"#{i} (to '{graph.edges[i].target}')" for i in edge_indexes)
            errors.append(
                f"data set '{dataset_id}' is consumed by {len(edge_indexes)} edges ({edges}); a data set "
                f"has exactly one consumer, so give each consumer its own data set from "
                f"'{datasets[dataset_id].producer}'."
            )
    return errors


def _edge_problems(edge: JobEdge, producer: JobVertex | None, consumer: JobVertex | None) -> list[str]:
    """Partitioner and distribution pattern must agree, as Flink derives one from the other.

    forward: POINTWISE between equal parallelisms, subtask i feeding subtask i.
    hash: ALL_TO_ALL, since each key belongs to one consumer subtask and every
        producer subtask must be able to reach it.
    broadcast: ALL_TO_ALL, since every consumer subtask receives every record.
    rebalance: either (POINTWISE is Flink's "rescale").
    """
    problems = []
    pointwise = edge.distribution_pattern == DistributionPattern.POINTWISE
    partitioner = edge.partitioner
    if partitioner == Partitioner.FORWARD:
        if not pointwise:
            problems.append(
                "the forward partitioner needs distribution_pattern POINTWISE (subtask i feeds subtask i); "
                "set POINTWISE, or use the rebalance or hash partitioner for ALL_TO_ALL."
            )
        if producer is not None and consumer is not None and producer.parallelism != consumer.parallelism:
            problems.append(
                f"the forward partitioner needs equal parallelism on both sides, but producer "
                f"'{producer.id}' has {producer.parallelism} and consumer '{consumer.id}' has "
                f"{consumer.parallelism}; make them equal, or use the rebalance partitioner."
            )
    elif partitioner == Partitioner.HASH and pointwise:
        problems.append(
            "the hash partitioner needs distribution_pattern ALL_TO_ALL, because every producer subtask "
            "must reach the one consumer subtask that owns a key; set ALL_TO_ALL, or use the forward "
            "or rebalance partitioner for POINTWISE."
        )
    elif partitioner == Partitioner.BROADCAST and pointwise:
        problems.append(
            "the broadcast partitioner needs distribution_pattern ALL_TO_ALL, because every consumer "
            "subtask receives every record; set ALL_TO_ALL."
        )
    if edge.keys and partitioner != Partitioner.HASH:
        problems.append(
            f"keys apply only to the hash partitioner, not '{Partitioner(partitioner).value}'; "
            "remove keys or set partitioner to hash."
        )
    if any(not key for key in edge.keys):
        problems.append("keys contains an empty field name; remove it (an empty keys list hashes the whole record).")
    return problems


def _check_co_location_groups(graph: JobGraph) -> list[str]:
    errors = []
    groups: dict[str, list[JobVertex]] = defaultdict(list)
    for vertex in graph.vertices:
        if vertex.co_location_group is not None:
            groups[vertex.co_location_group].append(vertex)
    for group, members in groups.items():
        if len({vertex.parallelism for vertex in members}) > 1:
            listing = _listing(f"'{vertex.id}': {vertex.parallelism}" for vertex in members)
            errors.append(
                f"co-location group '{group}' has vertices of different parallelism ({listing}); "
                "the i-th subtasks of its vertices share a slot, so give them equal parallelism."
            )
        # A missing slot sharing group is reported per vertex already.
        sharing: dict[str, list[str]] = defaultdict(list)
        for vertex in members:
            if vertex.slot_sharing_group is not None:
                sharing[vertex.slot_sharing_group].append(vertex.id)
        if len(sharing) > 1:
            listing = _listing(
                (f"'{name}': {_quoted(ids)}" for name, ids in sharing.items()),
                separator="; ",
            )
            errors.append(
                f"co-location group '{group}' spans several slot sharing groups ({listing}); "
                "co-located subtasks share a slot, so put all its vertices in one slot sharing group."
            )
    return errors


def _check_acyclic(graph: JobGraph) -> list[str]:
    # Self-loops are reported with the edge that makes them.
    ids, successors = _dependencies(graph, include_self_loops=False)
    if len(_kahn(successors)) == len(ids):
        return []
    return [_cycle_message(ids, cycle) for cycle in _cycles(successors)]


def topological_order(graph: JobGraph) -> list[str]:
    """Vertex ids, every producer before its consumers; raises InvalidJobGraph on a cycle.

    Among vertices that are ready at the same time the one declared first comes
    first, so a graph declared in topological order keeps its order. Edges that
    reference unknown data sets or vertices are ignored (validation reports them).
    """
    ids, successors = _dependencies(graph, include_self_loops=True)
    order = _kahn(successors)
    if len(order) < len(ids):
        raise InvalidJobGraph([_cycle_message(ids, cycle) for cycle in _cycles(successors)])
    return [ids[index] for index in order]


def _dependencies(graph: JobGraph, *, include_self_loops: bool) -> tuple[list[str], list[list[int]]]:
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


def _kahn(successors: Sequence[Sequence[int]]) -> list[int]:
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


def _cycles(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """One concrete cycle per strongly connected component that has one."""
    cycles = []
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
        cycles.append(path[position[node] :] + [node])
    return sorted(cycles)


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


def _cycle_message(ids: Sequence[str], cycle: Sequence[int]) -> str:
    names = [f"'{ids[node]}'" for node in cycle]
    if len(names) > 12:
        names = names[:10] + [f"... ({len(cycle) - 1} vertices in all)", names[-1]]
    path = " -> ".join(names)
    return (
        f"The vertices {path} form a cycle; a JobGraph must be acyclic, so remove or redirect one of the edges on it."
    )


# -- helpers for messages ---------------------------------------------------------------


def _duplicates(values: Sequence[str], describe: Callable[[str, list[int]], str]) -> list[str]:
    positions: dict[str, list[int]] = defaultdict(list)
    for position, value in enumerate(values):
        positions[value].append(position)
    return [describe(value, where) for value, where in positions.items() if len(where) > 1]


def _listing(items: Iterable[str], limit: int = 10, separator: str = ", ") -> str:
    """Items joined for a message, at most `limit` of them: a message is read, not searched."""
    items = list(items)
    if len(items) > limit:
        return separator.join(items[:limit]) + f"{separator}and {len(items) - limit} more"
    return separator.join(items)


def _quoted(names: Iterable[str]) -> str:
    return _listing(f"'{name}'" for name in names)


# Fuzzy matching costs O(candidates) per call; on huge graphs a hint is not worth it.
_MAX_SUGGESTION_CANDIDATES = 1000


def _did_you_mean(word: str, candidates: Collection[str]) -> str:
    if not candidates or len(candidates) > _MAX_SUGGESTION_CANDIDATES:
        return ""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    if word.lower() in by_lower:
        return f" (did you mean '{by_lower[word.lower()]}'?)"
    matches = difflib.get_close_matches(word, list(candidates), n=1)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


# -- explaining decode errors -------------------------------------------------------------


def _explain_malformed_json(error: msgspec.DecodeError, data: bytes) -> str:
    message = str(error)
    if message == "Input data was truncated":
        return "JobGraph is not valid JSON: the document ends early (is it truncated?); send all of it."
    # msgspec reports a byte offset; people and editors think in lines and columns.
    match = re.search(r"\(byte (\d+)\)$", message)
    if match:
        offset = int(match.group(1))
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        problem = message[: match.start()].strip().removeprefix("JSON is malformed: ")
        return f"JobGraph is not valid JSON: {problem} at line {line}, column {column} (byte {offset})."
    return f"JobGraph is not valid JSON: {message}."


_SCHEMA_ERROR = re.compile(r"^(?P<problem>.*?) - at (?P<key>`key` in )?`(?P<path>\$[^`]*)`$", re.S)
_PATH_SEGMENT = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")
_COLLECTIONS = {"vertices": "vertex", "edges": "edge", "intermediate_datasets": "data set"}
_MISSING: Any = object()
_JOB_GRAPH_TYPE = msgspec.inspect.type_info(JobGraph)


def _explain_schema_error(message: str, document: Any) -> str:
    """Rewrite a msgspec ValidationError message for the person who wrote the document.

    Falls back to msgspec's own words (with its $.path) for anything not understood.
    """
    match = _SCHEMA_ERROR.match(message)
    problem, path_text = (match["problem"], match["path"]) if match else (message, "$")
    path = _parse_path(path_text)
    if path is None:
        return f"JobGraph does not match the schema: {message}."

    # Who: the vertex, edge or data set the path is inside of, named by its id.
    subject, field_path = "JobGraph", path
    if len(path) >= 2 and path[0] in _COLLECTIONS and isinstance(path[1], int):
        subject = f"{_COLLECTIONS[path[0]]} #{path[1]}"
        label = _item_label(path[0], _value_at(document, path[:2]))
        subject = f"{subject} ({label})" if label else subject
        field_path = path[2:]
    field = _format_path(field_path)
    where = f"{subject}: {field}" if field else subject
    at = f", at {path_text}"

    expected_type = _type_at(path)
    value = _value_at(document, path)
    if match and match["key"]:
        return f"{where} has a key that is not a string{at}; use string keys only."
    if missing := re.fullmatch(r"Object missing required field `(.+)`", problem):
        return f"{where}: required field '{missing[1]}' is missing{at}; add it."
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", problem):
        known = _field_names(expected_type)
        listing = f" (known fields: {', '.join(known)})" if known else ""
        return (
            f"{where}: unknown field '{unknown[1]}'{_did_you_mean(unknown[1], known)}{at}; "
            f"remove or rename it{listing}."
        )
    if expected_type is not None and (problem.startswith("Expected") or problem.startswith("Invalid enum")):
        got = f" (got {_show(value)})" if value is not _MISSING else ""
        hint = ""
        if isinstance(value, str) and isinstance(_unwrap(expected_type), msgspec.inspect.EnumType):
            choices = [member.value for member in _unwrap(expected_type).cls]
            hint = _did_you_mean(value, choices)
        return f"{where} must be {_describe(expected_type)}{got}{hint}{at}."
    return f"{where}: {problem}{at}."


def _parse_path(text: str) -> list[str | int] | None:
    path: list[str | int] = []
    position = 1  # after "$"
    while position < len(text):
        segment = _PATH_SEGMENT.match(text, position)
        if segment is None:
            return None
        path.append(segment[1] if segment[1] is not None else int(segment[2]))
        position = segment.end()
    return path


def _format_path(path: Sequence[str | int]) -> str:
    text = ""
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    return text.removeprefix(".")


def _value_at(document: Any, path: Sequence[str | int]) -> Any:
    for segment in path:
        in_list = isinstance(segment, int) and isinstance(document, list) and segment < len(document)
        in_dict = isinstance(segment, str) and isinstance(document, dict) and segment in document
        if not (in_list or in_dict):
            return _MISSING
        document = document[segment]
    return document


def _item_label(collection: str, item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    if collection == "edges":
        source, target = item.get("source"), item.get("target")
        if isinstance(source, str) and isinstance(target, str):
            return f"'{source}' -> '{target}'"
        return ""
    for key in ("id", "name"):
        if isinstance(item.get(key), str):
            return f"'{item[key]}'"
    return ""


def _unwrap(type_: Any) -> Any:
    """The type without its metadata and without `| None`."""
    while True:
        if isinstance(type_, msgspec.inspect.Metadata):
            type_ = type_.type
        elif isinstance(type_, msgspec.inspect.UnionType):
            others = [t for t in type_.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(others) != 1:
                return type_
            type_ = others[0]
        else:
            return type_


def _type_at(path: Sequence[str | int]) -> Any:
    type_: Any = _JOB_GRAPH_TYPE
    for segment in path:
        type_ = _unwrap(type_)
        if isinstance(segment, int) and isinstance(type_, msgspec.inspect.ListType):
            type_ = type_.item_type
        elif isinstance(segment, str) and isinstance(type_, msgspec.inspect.StructType):
            fields = {field.encode_name: field.type for field in type_.fields}
            if segment not in fields:
                return None
            type_ = fields[segment]
        elif isinstance(segment, str) and isinstance(type_, msgspec.inspect.DictType):
            type_ = type_.value_type
        else:
            return None
    return type_


def _field_names(type_: Any) -> list[str]:
    type_ = _unwrap(type_)
    if isinstance(type_, msgspec.inspect.StructType):
        return [field.encode_name for field in type_.fields]
    return []


def _describe(type_: Any) -> str:
    """What a value of this type looks like, in words ("an integer from 1 to 32768")."""
    inspect = msgspec.inspect
    if isinstance(type_, inspect.Metadata):
        description = (type_.extra_json_schema or {}).get("description")
        return description.rstrip(".") if description else _describe(type_.type)
    if isinstance(type_, inspect.UnionType):
        # "or null" is left out: null only ever means "absent", which nobody gets wrong.
        members = [member for member in type_.types if not isinstance(member, inspect.NoneType)]
        return " or ".join(_describe(member) for member in members)
    if isinstance(type_, inspect.IntType | inspect.FloatType):
        kind = "an integer" if isinstance(type_, inspect.IntType) else "a number"
        if type_.ge is not None and type_.le is not None:
            return f"{kind} from {type_.ge} to {type_.le}"
        bounds = [
            f"{symbol} {bound}"
            for symbol, bound in ((">=", type_.ge), (">", type_.gt), ("<=", type_.le), ("<", type_.lt))
            if bound is not None
        ]
        return f"{kind} {' and '.join(bounds)}" if bounds else kind
    if isinstance(type_, inspect.StrType):
        low, high = type_.min_length, type_.max_length
        if low is not None and high is not None:
            text = f"a string of {low} to {high} characters"
        elif low is not None:
            text = f"a string of at least {low} characters"
        elif high is not None:
            text = f"a string of at most {high} characters"
        else:
            text = "a string"
        return f"{text} matching {type_.pattern}" if type_.pattern else text
    if isinstance(type_, inspect.EnumType):
        return "one of " + ", ".join(f"'{member.value}'" for member in type_.cls)
    simple = {
        inspect.BoolType: "true or false",
        inspect.NoneType: "null",
        inspect.ListType: "a list",
        inspect.DictType: "an object",
        inspect.StructType: "an object",
        inspect.AnyType: "any JSON value",
    }
    return simple.get(type(type_), "a valid value")


def _show(value: Any, limit: int = 40) -> str:
    if isinstance(value, str):
        text = f"'{value}'"
    else:
        try:
            text = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
