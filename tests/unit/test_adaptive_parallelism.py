"""Deciding a vertex's parallelism from the bytes it reads (scheduler/adaptive_parallelism.py)
and what the decision does to the ExecutionGraph (ExecutionGraph.decide_parallelism,
wiring.subpartition_range): every key of a hash exchange read by exactly one subtask."""

from __future__ import annotations

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.executiongraph import ExecutionGraph, ExecutionState, subpartition_range
from flink_runtime.jobgraph.jobgraph import (
    DistributionPattern,
    JobGraph,
    JobVertex,
    Partitioner,
    new_job_id,
)
from flink_runtime.pipeline import Pipeline
from flink_runtime.scheduler.adaptive_parallelism import (
    AdaptiveParallelism,
    consumed_bytes,
    decided_parallelism,
    is_adaptive,
)
from flink_runtime.scheduler.strategy import consumers_ready

MB = 1 << 20
ALL_TO_ALL, POINTWISE = DistributionPattern.ALL_TO_ALL, DistributionPattern.POINTWISE


def spark_vertex(vertex_id: str, parallelism: int, configured: bool = False, **kwargs) -> JobVertex:
    return JobVertex(
        id=vertex_id,
        name=vertex_id.title(),
        invokable="spark",
        parallelism=parallelism,
        parallelism_configured=configured,
        **kwargs,
    )


def chain(*vertices: JobVertex, pattern: DistributionPattern = ALL_TO_ALL, partitioner=Partitioner.HASH) -> JobGraph:
    job = JobGraph(name="chain", job_id=new_job_id(), vertices=list(vertices))
    for producer, consumer in zip(vertices, vertices[1:], strict=False):
        job.connect(producer.id, consumer.id, distribution_pattern=pattern, partitioner=partitioner)
    return job


def finish(graph: ExecutionGraph, vertex_id: str, size_bytes: int = MB) -> None:
    for vertex in graph.vertices[vertex_id].task_vertices:
        for partition in vertex.produced_partitions:
            partition.size_bytes = size_bytes
            partition.mark_finished()


def deciding(config: dict | None = None) -> tuple[AdaptiveParallelism, list[int], list[ExecutionGraph]]:
    """An AdaptiveParallelism over a graph set later, and the counts it reports removed."""
    removed: list[int] = []
    graphs: list[ExecutionGraph] = []
    adaptive = AdaptiveParallelism(Configuration(config or {}), lambda: graphs[0] if graphs else None, removed.append)
    return adaptive, removed, graphs


# -- the decision -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("consumed", "upper", "lower", "expected"),
    [
        (0, 4, 1, 1),  # empty input: the lower bound
        (1, 4, 1, 1),
        (16 * MB, 4, 1, 1),
        (16 * MB + 1, 4, 1, 2),  # rounded up
        (48 * MB, 4, 1, 3),
        (1 << 40, 4, 1, 4),  # never above the vertex's own parallelism
        (MB, 4, 3, 3),  # the configured minimum
        (MB, 2, 3, 2),  # ... capped at the upper bound
        (None, 4, 1, 4),  # sizes not known: as configured
    ],
)
def test_the_parallelism_is_the_bytes_per_task_rounded_up_within_the_bounds(consumed, upper, lower, expected) -> None:
    assert decided_parallelism(consumed, upper, lower, 16 * MB) == expected


def test_the_pipeline_api_leaves_unset_parallelism_to_the_scheduler() -> None:
    p = Pipeline("words", parallelism=2)
    words = p.read_text("/in/*.txt").select("explode(split(value, ' ')) AS word")
    words.key_by("word").agg("count(*) AS n").write_parquet("/out/counts")
    pinned = Pipeline("pinned", parallelism=2)
    words = pinned.read_text("/in/*.txt").select("explode(split(value, ' ')) AS word")
    words.key_by("word").agg("count(*) AS n").set_parallelism(2).write_parquet("/out/counts")

    source, final = ExecutionGraph(p.job_graph()).vertices.values()
    assert (source.parallelism, final.parallelism) == (2, 2)
    assert is_adaptive(source)  # from its input splits, at start
    assert is_adaptive(final)  # from its input's bytes, once its sources finished
    assert [is_adaptive(ejv) for ejv in ExecutionGraph(pinned.job_graph()).vertices.values()] == [True, False]


@pytest.mark.parametrize(
    "job",
    [
        chain(spark_vertex("a", 2), spark_vertex("b", 2), pattern=POINTWISE, partitioner=Partitioner.FORWARD),
        chain(spark_vertex("a", 2), spark_vertex("b", 2, configured=True)),
        chain(spark_vertex("a", 2), JobVertex(id="b", name="B", invokable="noop", parallelism=2)),
        chain(spark_vertex("a", 2), spark_vertex("b", 2, co_location_group="together")),
    ],
    ids=["pointwise input", "configured", "not Spark", "co-located"],
)
def test_only_unconfigured_spark_vertices_read_over_all_to_all_edges_are_decided(job: JobGraph) -> None:
    assert not is_adaptive(ExecutionGraph(job).vertices["b"])


def test_a_vertex_feeding_another_pointwise_keeps_its_parallelism() -> None:
    job = chain(spark_vertex("a", 2), spark_vertex("b", 2), spark_vertex("c", 2))
    job.edges[1].distribution_pattern, job.edges[1].partitioner = POINTWISE, Partitioner.FORWARD
    graph = ExecutionGraph(job)
    assert not is_adaptive(graph.vertices["b"]) and not is_adaptive(graph.vertices["c"])


def test_a_broadcast_input_counts_once() -> None:
    graph = ExecutionGraph(chain(spark_vertex("a", 3), spark_vertex("b", 3), partitioner=Partitioner.BROADCAST))
    finish(graph, "a", size_bytes=5 * MB)
    assert consumed_bytes(graph.vertices["b"]) == 5 * MB


# -- what deciding does to the graph ----------------------------------------------------------


def test_deciding_removes_the_subtasks_past_it_and_each_left_reads_a_run_of_subpartitions() -> None:
    graph = ExecutionGraph(chain(spark_vertex("source", 4), spark_vertex("final", 4)))
    final = graph.vertices["final"]
    removed_attempts = [v.current_execution.attempt_id for v in final.task_vertices[2:]]
    removed = graph.decide_parallelism(final, 2)

    assert [v.subtask_index for v in removed] == [2, 3]
    assert final.parallelism == 2 and final.parallelism_decided
    assert [v.task_name_with_subtask for v in final.task_vertices] == ["Final (1/2)", "Final (2/2)"]
    assert graph.total_subtasks == 6
    assert all(graph.execution(attempt) is None for attempt in removed_attempts)
    partitions = graph.results["source-to-final"].partitions
    # The producers still split each partition in 4 (they may have written them already).
    assert all(p.number_of_subpartitions == 4 for p in partitions)
    assert [subpartition_range(partitions[0], t) for t in range(2)] == [range(0, 2), range(2, 4)]
    # Every subpartition is read by exactly one subtask left.
    read = sorted(i for t in range(2) for i in subpartition_range(partitions[3], t))
    assert read == [0, 1, 2, 3]

    finish(graph, "source")
    assert consumers_ready(partitions[-1]) == final.task_vertices


def test_uneven_runs_still_cover_every_subpartition_once() -> None:
    graph = ExecutionGraph(chain(spark_vertex("source", 1), spark_vertex("final", 3)))
    graph.decide_parallelism(graph.vertices["final"], 2)
    (partition,) = graph.results["source-to-final"].partitions
    assert [subpartition_range(partition, t) for t in range(2)] == [range(0, 1), range(1, 3)]


def test_a_decided_producer_narrows_what_its_consumer_reads() -> None:
    graph = ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 4), spark_vertex("c", 4)))
    b, c = graph.vertices["b"], graph.vertices["c"]
    graph.decide_parallelism(b, 1)
    assert len(graph.results["b-to-c"].partitions) == 1
    assert all(
        list(group) == graph.results["b-to-c"].partitions
        for v in c.task_vertices
        for group in v.consumed_partition_groups
    )
    graph.decide_parallelism(c, 2)
    (partition,) = graph.results["b-to-c"].partitions
    assert [subpartition_range(partition, t) for t in range(2)] == [range(0, 2), range(2, 4)]


def test_deciding_twice_after_scheduling_or_out_of_bounds_is_refused() -> None:
    graph = ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 2), spark_vertex("c", 2)))
    with pytest.raises(ValueError, match=r"not in \[1, 2\]"):
        graph.decide_parallelism(graph.vertices["b"], 3)
    graph.decide_parallelism(graph.vertices["b"], 1)
    with pytest.raises(ValueError, match="decided already"):
        graph.decide_parallelism(graph.vertices["b"], 1)
    assert graph.vertices["c"].task_vertices[0].current_execution.transition_state(ExecutionState.SCHEDULED)
    with pytest.raises(ValueError, match="scheduled already"):
        graph.decide_parallelism(graph.vertices["c"], 1)


# -- the JobMaster's side -------------------------------------------------------------------------


def test_a_vertex_is_decided_from_its_inputs_bytes_once_they_are_all_finished() -> None:
    adaptive, removed, graphs = deciding()
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 4))))
    b = graph.vertices["b"]
    graph.vertices["a"].task_vertices[0].produced_partitions[0].mark_finished()
    adaptive.decide(b)
    assert b.parallelism == 4 and not b.parallelism_decided  # an input still running
    finish(graph, "a", size_bytes=10 * MB)  # 20 MB in all: 2 subtasks of 16 MB at most
    adaptive.decide(b)
    assert (b.parallelism, removed) == (2, [2])
    adaptive.decide(b)  # decided once
    assert removed == [2]


def test_an_input_of_unknown_size_keeps_the_upper_bound() -> None:
    adaptive, removed, graphs = deciding()
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 4))))
    finish(graph, "a", size_bytes=-1)
    adaptive.decide(graph.vertices["b"])
    assert graph.vertices["b"].parallelism == 4 and graph.vertices["b"].parallelism_decided and removed == []


def test_the_options_bound_and_disable_it_and_a_restored_decision_holds_regardless() -> None:
    settings = {
        "execution.batch.adaptive.auto-parallelism.min-parallelism": 3,
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 kb",
    }
    adaptive, _, graphs = deciding(settings)
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 4))))
    finish(graph, "a", size_bytes=100)
    adaptive.decide(graph.vertices["b"])
    assert graph.vertices["b"].parallelism == 3

    off, removed, graphs = deciding({"execution.batch.adaptive.auto-parallelism.enabled": "false"})
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("a", 2), spark_vertex("b", 4))))
    finish(graph, "a", size_bytes=100)
    off.decide(graph.vertices["b"])
    assert graph.vertices["b"].parallelism == 4 and removed == []
    off.decide_restored({"b": 1, "gone": 2})  # what a savepoint recorded, before its subtasks are restored
    assert graph.vertices["b"].parallelism == 1 and removed == [3]


def test_bad_option_values_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigurationError, match="min-parallelism"):
        AdaptiveParallelism(
            Configuration({"execution.batch.adaptive.auto-parallelism.min-parallelism": 0}), lambda: None, print
        )
    with pytest.raises(ConfigurationError, match="avg-data-volume-per-task"):
        AdaptiveParallelism(
            Configuration({"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "lots"}),
            lambda: None,
            print,
        )


def test_a_source_with_fewer_splits_than_subtasks_runs_one_subtask_per_split() -> None:
    adaptive, removed, graphs = deciding()
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("source", 4), spark_vertex("final", 4))))
    adaptive.decide_sources({"source": 1, "final": 0})  # the final has inputs: decided later
    source, final = graph.vertices["source"], graph.vertices["final"]
    assert (source.parallelism, final.parallelism, removed) == (1, 4, [3])
    assert all(len(group) == 1 for vertex in final.task_vertices for group in vertex.consumed_partition_groups)
    adaptive.decide_sources({"source": 1})  # decided once
    assert removed == [3]

    many, removed, graphs = deciding()
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("source", 4), spark_vertex("final", 4))))
    many.decide_sources({"source": 9})  # more splits than subtasks: all of them
    assert graph.vertices["source"].parallelism == 4 and graph.vertices["source"].parallelism_decided
    assert removed == []
    empty, removed, graphs = deciding()
    graphs.append(graph := ExecutionGraph(chain(spark_vertex("source", 4), spark_vertex("final", 4))))
    empty.decide_sources({"source": 0})  # no input at all: one subtask
    assert graph.vertices["source"].parallelism == 1 and removed == [3]


@pytest.mark.parametrize(
    ("job", "config"),
    [
        (chain(spark_vertex("source", 4, configured=True), spark_vertex("final", 4)), {}),
        (
            chain(
                spark_vertex("source", 4), spark_vertex("final", 4), pattern=POINTWISE, partitioner=Partitioner.FORWARD
            ),
            {},
        ),
        (
            chain(spark_vertex("source", 4), spark_vertex("final", 4)),
            {"execution.batch.adaptive.auto-parallelism.enabled": False},
        ),
    ],
    ids=["configured", "feeding pointwise", "disabled"],
)
def test_a_source_keeps_its_parallelism_when_set_feeding_pointwise_or_disabled(job: JobGraph, config: dict) -> None:
    adaptive, removed, graphs = deciding(config)
    graphs.append(graph := ExecutionGraph(job))
    adaptive.decide_sources({"source": 1})
    assert graph.vertices["source"].parallelism == 4 and removed == []
