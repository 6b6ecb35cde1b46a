"""Checking a submitted JobGraph, in two stages.

1. Decoding (`decode_job_graph`, `convert_job_graph`): msgspec checks every field
   against the structs in `jobgraph.py` and stops at the first bad one. Its message
   ("Expected `int` >= 1 - at `$.vertices[0].parallelism`") is precise but written
   for programmers, so `decode_errors.py` rewrites it to name the vertex, edge or data
   set, say what the field must be and show what it was.
2. Graph rules (`validate_job_graph`): what a single field cannot express - unique
   ids and names, references that resolve, one consumer per data set, no cycles,
   (`topology.py`), partitioners that fit their distribution pattern, co-location groups that can
   share a slot, known invokables and bounded sizes. All problems are collected, so a
   client fixes its graph in one round trip rather than one error at a time.

Every problem is a complete sentence: where, what is wrong, and what to do.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import msgspec

from flink_runtime.jobgraph.decode_errors import explain_malformed_json, explain_schema_error
from flink_runtime.jobgraph.errors import InvalidJobGraph
from flink_runtime.jobgraph.jobgraph import (
    MAX_PARALLELISM_UPPER_BOUND,
    DistributionPattern,
    JobEdge,
    JobGraph,
    JobVertex,
    Partitioner,
    new_job_id,
)
from flink_runtime.jobgraph.topology import cycle_message, cycles, dependencies, kahn
from flink_runtime.jobgraph.wording import did_you_mean, duplicates, listing, quoted

MiB = 1024 * 1024
DEFAULT_MAX_DOCUMENT_BYTES = 16 * MiB


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
            raise InvalidJobGraph(explain_malformed_json(malformed, data)) from None
        except RecursionError:
            raise _too_deep() from None
        raise InvalidJobGraph(explain_schema_error(str(error), document)) from None
    except msgspec.DecodeError as malformed:
        raise InvalidJobGraph(explain_malformed_json(malformed, data)) from None
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
        raise InvalidJobGraph(explain_schema_error(str(error), data)) from None
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
        raise InvalidJobGraph(explain_schema_error(str(error), document)) from None
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
    errors += _check_slot_sharing_groups(graph)
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

    errors += duplicates(
        [vertex.id for vertex in graph.vertices],
        lambda vertex_id, positions: (
            f"vertex id '{vertex_id}' is used by {len(positions)} vertices "
            f"({listing(f'#{i}' for i in positions)}); vertex ids must be unique, so rename all but one."
        ),
    )
    errors += duplicates(
        [vertex.name for vertex in graph.vertices],
        lambda name, positions: (
            f"vertex name '{name}' is used by vertices "
            f"{quoted(graph.vertices[i].id for i in positions)}; "
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
        f"unknown invokable '{invokable}'{did_you_mean(invokable, builtin_invokables)}; "
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

    errors += duplicates(
        [dataset.id for dataset in graph.intermediate_datasets],
        lambda dataset_id, positions: (
            f"data set id '{dataset_id}' is used by {len(positions)} data sets "
            f"({listing(f'#{i}' for i in positions)}); data set ids must be unique, so rename all but one."
        ),
    )
    for dataset in graph.intermediate_datasets:
        if dataset.producer not in vertices:
            errors.append(
                f"data set '{dataset.id}': producer '{dataset.producer}' is not a vertex of this job"
                f"{did_you_mean(dataset.producer, vertices)}; set producer to the id of the vertex "
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
                f"{did_you_mean(edge.source, datasets)}; {hint}."
            )
        else:
            consumers[edge.source].append(index)
        consumer = vertices.get(edge.target)
        if consumer is None:
            errors.append(
                f"{where}: target '{edge.target}' is not a vertex of this job"
                f"{did_you_mean(edge.target, vertices)}; set target to the id of the consuming vertex."
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
            edges = listing(f"#{i} (to '{graph.edges[i].target}')" for i in edge_indexes)
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
            shown = listing(f"'{vertex.id}': {vertex.parallelism}" for vertex in members)
            errors.append(
                f"co-location group '{group}' has vertices of different parallelism ({shown}); "
                "the i-th subtasks of its vertices share a slot, so give them equal parallelism."
            )
        # A missing slot sharing group is reported per vertex already.
        sharing: dict[str, list[str]] = defaultdict(list)
        for vertex in members:
            if vertex.slot_sharing_group is not None:
                sharing[vertex.slot_sharing_group].append(vertex.id)
        if len(sharing) > 1:
            shown = listing(
                (f"'{name}': {quoted(ids)}" for name, ids in sharing.items()),
                separator="; ",
            )
            errors.append(
                f"co-location group '{group}' spans several slot sharing groups ({shown}); "
                "co-located subtasks share a slot, so put all its vertices in one slot sharing group."
            )
    return errors


def _check_slot_sharing_groups(graph: JobGraph) -> list[str]:
    used = {vertex.slot_sharing_group for vertex in graph.vertices if vertex.slot_sharing_group is not None}
    return [
        f"$.slot_sharing_groups['{name}']: no vertex is in slot sharing group '{name}' (groups: "
        f"{quoted(sorted(used)) or 'none'}); set slot_sharing_group on its vertices or remove the entry."
        for name in graph.slot_sharing_groups
        if name not in used
    ]


def _check_acyclic(graph: JobGraph) -> list[str]:
    # Self-loops are reported with the edge that makes them.
    ids, successors = dependencies(graph, include_self_loops=False)
    if len(kahn(successors)) == len(ids):
        return []
    return [cycle_message(ids, cycle) for cycle in cycles(successors)]
