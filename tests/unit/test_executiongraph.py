import gc
import re

import pytest

from flink_runtime.executiongraph import (
    TASK_COUNT_KEYS,
    ConsumedPartitionGroup,
    ConsumerVertexGroup,
    Execution,
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    IllegalStateTransition,
    IntermediateResultPartition,
    aggregate_vertex_state,
    default_max_parallelism,
    subpartition_range,
    vertex_task_counts,
)
from flink_runtime.jobgraph.jobgraph import (
    DistributionPattern,
    IntermediateDataSet,
    JobGraph,
    JobVertex,
    ResultPartitionType,
    new_job_id,
)

E = ExecutionState
ALL_TO_ALL = DistributionPattern.ALL_TO_ALL
POINTWISE = DistributionPattern.POINTWISE


def vertex(vertex_id: str, parallelism: int = 1, name: str | None = None, **kwargs) -> JobVertex:
    return JobVertex(id=vertex_id, name=name or vertex_id.title(), invokable="noop", parallelism=parallelism, **kwargs)


def two_vertex_graph(source: int, target: int, pattern: DistributionPattern) -> ExecutionGraph:
    job = JobGraph(name="two", job_id=new_job_id(), vertices=[vertex("src", source), vertex("dst", target)])
    job.connect("src", "dst", distribution_pattern=pattern)
    return ExecutionGraph(job)


def drive(execution: Execution, *states: ExecutionState) -> None:
    for state in states:
        assert execution.transition_state(state), (execution, state)


# -- building -------------------------------------------------------------------------


def test_graph_structure_of_a_small_pipeline():
    job = JobGraph(
        name="pipeline",
        job_id=new_job_id(),
        vertices=[vertex("source", 2, "Source"), vertex("map", 3, "Map"), vertex("sink", 1, "Sink")],
    )
    job.connect("source", "map", distribution_pattern=ALL_TO_ALL)
    job.connect("map", "sink", distribution_pattern=POINTWISE, result_type=ResultPartitionType.PIPELINED)
    graph = ExecutionGraph(job)

    assert graph.job_id == job.job_id
    assert graph.job_graph is job
    assert list(graph.vertices) == ["source", "map", "sink"]
    assert graph.total_subtasks == 6
    assert len(list(graph.all_execution_vertices())) == 6
    assert [ejv.id for ejv in graph.source_vertices()] == ["source"]
    assert list(graph.results) == ["source-to-map", "map-to-sink"]

    source, map_, sink = graph.vertices.values()
    assert map_.graph is graph
    assert map_.job_vertex is job.vertices[1]
    assert (map_.name, map_.parallelism, map_.max_parallelism) == ("Map", 3, 128)
    assert map_.inputs == [graph.results["source-to-map"]]
    assert map_.input_edges == [job.edges[0]]
    assert map_.produced_results == [graph.results["map-to-sink"]]

    result = graph.results["map-to-sink"]
    assert result.producer is map_
    assert result.consumer is sink
    assert result.edge is job.edges[1]
    assert result.result_type is ResultPartitionType.PIPELINED
    assert [p.producer for p in result.partitions] == map_.task_vertices
    assert [p.partition_number for p in result.partitions] == [0, 1, 2]
    assert [v.subtask_index for v in map_.task_vertices] == [0, 1, 2]
    assert all(v.job_vertex is map_ for v in map_.task_vertices)
    assert source.inputs == [] and source.task_vertices[0].consumed_partition_groups == []
    assert sink.produced_results == [] and sink.task_vertices[0].produced_partitions == []


def test_vertices_come_out_in_topological_order_whatever_the_declaration_order():
    job = JobGraph(name="backwards", vertices=[vertex("sink"), vertex("map"), vertex("source")])
    job.connect("map", "sink")
    job.connect("source", "map")
    assert list(ExecutionGraph(job).vertices) == ["source", "map", "sink"]


def test_topological_order_keeps_declaration_order_when_it_already_is_one():
    ids = ["a", "z", "b", "y", "join"]
    job = JobGraph(name="diamond", vertices=[vertex(i) for i in ids])
    job.connect("a", "b")
    job.connect("z", "y")
    job.connect("b", "join")
    job.connect("y", "join")
    graph = ExecutionGraph(job)
    assert list(graph.vertices) == ids
    assert [ejv.id for ejv in graph.source_vertices()] == ["a", "z"]
    # inputs follow the job graph's edge order
    assert [r.id for r in graph.vertices["join"].inputs] == ["b-to-join", "y-to-join"]
    assert len(graph.vertices["join"].task_vertices[0].consumed_partition_groups) == 2


def test_max_parallelism_is_taken_from_the_vertex_or_derived_as_flink_does():
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256  # 150 -> 256
    assert default_max_parallelism(10_000) == 16_384
    assert default_max_parallelism(30_000) == 32_768
    job = JobGraph(name="m", vertices=[vertex("v", 4, max_parallelism=8)])
    assert ExecutionGraph(job).vertices["v"].max_parallelism == 8


def test_task_name_with_subtask_is_one_based():
    graph = two_vertex_graph(4, 1, ALL_TO_ALL)
    assert graph.vertices["src"].task_vertices[1].task_name_with_subtask == "Src (2/4)"
    assert graph.vertices["src"].task_vertices[1].id == "src_1"


def test_unconsumed_result_has_partitions_with_one_subpartition():
    job = JobGraph(name="dangling", vertices=[vertex("v", 3)])
    job.intermediate_datasets.append(IntermediateDataSet(id="out", producer="v"))
    graph = ExecutionGraph(job)
    result = graph.results["out"]
    assert result.consumer is None and result.edge is None
    assert [p.number_of_subpartitions for p in result.partitions] == [1, 1, 1]
    assert all(p.consumer_vertex_group is None for p in result.partitions)


def test_partition_ids_and_lookup():
    graph = two_vertex_graph(3, 3, ALL_TO_ALL)
    partition = graph.results["src-to-dst"].partitions[2]
    assert partition.partition_id == "src-to-dst#2"
    assert graph.partition("src-to-dst#2") is partition
    for unknown in ("src-to-dst#3", "nope#0", "src-to-dst#x", "src-to-dst"):
        assert graph.partition(unknown) is None


# -- wiring ---------------------------------------------------------------------------


def consumed_indices(graph: ExecutionGraph) -> list[list[int]]:
    """For each consumer subtask, the partition numbers it reads."""
    return [
        [p.partition_number for group in v.consumed_partition_groups for p in group]
        for v in graph.vertices["dst"].task_vertices
    ]


def consumer_indices(graph: ExecutionGraph) -> list[list[int]]:
    """For each partition, the consumer subtasks it feeds."""
    return [[v.subtask_index for v in p.consumer_vertex_group] for p in graph.results["src-to-dst"].partitions]


def is_contiguous(indices: list[int]) -> bool:
    return indices == list(range(indices[0], indices[0] + len(indices))) if indices else False


def check_pointwise(source: int, target: int) -> ExecutionGraph:
    """Properties any balanced pointwise wiring has, stated without Flink's formulas."""
    graph = two_vertex_graph(source, target, POINTWISE)
    reads = consumed_indices(graph)
    feeds = consumer_indices(graph)

    # both views describe the same edges
    edges_from_consumers = {(p, t) for t, ps in enumerate(reads) for p in ps}
    edges_from_producers = {(p, t) for p, ts in enumerate(feeds) for t in ts}
    assert edges_from_consumers == edges_from_producers

    assert all(feeds), "every producer partition is consumed by at least one consumer"
    assert all(reads), "every consumer reads at least one partition"
    assert all(is_contiguous(ps) for ps in reads), "consumers read contiguous ranges"
    assert all(is_contiguous(ts) for ts in feeds), "partitions feed contiguous ranges"
    # ranges advance monotonically: subtask i never reads data "after" subtask i+1
    assert [ps[0] for ps in reads] == sorted(ps[0] for ps in reads)
    assert [ts[0] for ts in feeds] == sorted(ts[0] for ts in feeds)

    if source >= target:
        assert all(len(ts) == 1 for ts in feeds), "fan-in: each partition has exactly one reader"
        sizes = [len(ps) for ps in reads]
    else:
        assert all(len(ps) == 1 for ps in reads), "fan-out: each consumer reads exactly one partition"
        sizes = [len(ts) for ts in feeds]
    assert max(sizes) - min(sizes) <= 1, f"unbalanced: {sizes}"
    assert sum(sizes) == max(source, target)

    # every reader of a partition gets its own subpartition, numbered from 0
    partitions = graph.results["src-to-dst"].partitions
    for p, ts in enumerate(feeds):
        assert partitions[p].number_of_subpartitions == len(ts)
        assert [subpartition_range(partitions[p], t) for t in ts] == [range(i, i + 1) for i in range(len(ts))]
    return graph


@pytest.mark.parametrize(
    ("source", "target"),
    [(1, 1), (4, 4), (4, 2), (5, 2), (7, 3), (10, 3), (2, 4), (2, 5), (3, 7), (3, 10), (1, 6), (6, 1)],
)
def test_pointwise_wiring_properties(source, target):
    check_pointwise(source, target)


@pytest.mark.parametrize(
    ("source", "target", "reads"),
    [
        (4, 4, [[0], [1], [2], [3]]),
        (4, 2, [[0, 1], [2, 3]]),
        (5, 2, [[0, 1], [2, 3, 4]]),
        (7, 3, [[0, 1], [2, 3], [4, 5, 6]]),
        (2, 4, [[0], [0], [1], [1]]),
        (2, 5, [[0], [0], [0], [1], [1]]),
        (3, 7, [[0], [0], [0], [1], [1], [2], [2]]),
    ],
)
def test_pointwise_wiring_matches_flink(source, target, reads):
    assert consumed_indices(two_vertex_graph(source, target, POINTWISE)) == reads


def test_pointwise_fan_in_shares_one_consumer_group_per_consumer():
    graph = two_vertex_graph(5, 2, POINTWISE)
    partitions = graph.results["src-to-dst"].partitions
    assert partitions[0].consumer_vertex_group is partitions[1].consumer_vertex_group
    assert partitions[1].consumer_vertex_group is not partitions[2].consumer_vertex_group
    assert [subpartition_range(p, p.consumer_vertex_group.subtask_range.start) for p in partitions] == [range(1)] * 5


def test_pointwise_fan_out_consumers_share_the_group_naming_their_partition():
    graph = two_vertex_graph(2, 5, POINTWISE)
    consumers = graph.vertices["dst"].task_vertices
    assert consumers[0].consumed_partition_groups[0] is consumers[2].consumed_partition_groups[0]
    assert consumers[2].consumed_partition_groups[0] is not consumers[3].consumed_partition_groups[0]


def test_all_to_all_shares_one_group_in_each_direction():
    graph = two_vertex_graph(30, 40, ALL_TO_ALL)
    consumers = graph.vertices["dst"].task_vertices
    partitions = graph.results["src-to-dst"].partitions

    group = consumers[0].consumed_partition_groups[0]
    assert isinstance(group, ConsumedPartitionGroup)
    assert all(v.consumed_partition_groups[0] is group for v in consumers)
    assert group.partition_range == range(30) and len(group) == 30
    assert list(group) == partitions

    consumer_group = partitions[0].consumer_vertex_group
    assert isinstance(consumer_group, ConsumerVertexGroup)
    assert all(p.consumer_vertex_group is consumer_group for p in partitions)
    assert consumer_group.vertex is graph.vertices["dst"]
    assert consumer_group.subtask_range == range(40)
    assert list(consumer_group) == consumers

    assert all(p.number_of_subpartitions == 40 for p in partitions)
    assert subpartition_range(partitions[7], 13) == range(13, 14)


def test_subpartition_range_rejects_a_subtask_that_does_not_read_the_partition():
    graph = two_vertex_graph(2, 4, POINTWISE)
    with pytest.raises(ValueError, match="does not consume"):
        subpartition_range(graph.results["src-to-dst"].partitions[0], 3)


def count_instances(*types: type) -> dict[type, int]:
    counts = dict.fromkeys(types, 0)
    for obj in gc.get_objects():
        if type(obj) in counts:
            counts[type(obj)] += 1
    return counts


def test_all_to_all_object_counts_stay_linear():
    kinds = (
        ConsumedPartitionGroup,
        ConsumerVertexGroup,
        IntermediateResultPartition,
        ExecutionVertex,
        Execution,
    )
    gc.collect()
    before = count_instances(*kinds)
    graph = two_vertex_graph(300, 500, ALL_TO_ALL)
    after = count_instances(*kinds)
    created = {kind.__name__: after[kind] - before[kind] for kind in kinds}
    assert created == {
        "ConsumedPartitionGroup": 1,
        "ConsumerVertexGroup": 1,
        "IntermediateResultPartition": 300,
        "ExecutionVertex": 800,
        "Execution": 800,
    }
    del graph


def tracked_objects_for(n: int) -> int:
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        graph = two_vertex_graph(n, n, ALL_TO_ALL)
        grown = len(gc.get_objects()) - before
        del graph
        return grown
    finally:
        gc.enable()


def test_all_to_all_total_objects_grow_linearly_with_parallelism():
    small, large = tracked_objects_for(100), tracked_objects_for(400)
    # 4x the parallelism: about 4x the objects (N x M storage would be 16x).
    assert large < 4.5 * small, (small, large)


# -- executions -----------------------------------------------------------------------


def test_new_execution_starts_created_with_a_timestamp():
    graph = two_vertex_graph(2, 2, ALL_TO_ALL)
    ev = graph.vertices["src"].task_vertices[1]
    execution = ev.current_execution
    assert execution.vertex is ev
    assert execution.state is E.CREATED
    assert execution.attempt_number == 0
    assert execution.attempt_id == f"{graph.graph_id}-src-1-0"
    assert list(execution.state_timestamps) == [E.CREATED]
    assert (execution.assigned_resource, execution.task_manager_id, execution.failure_cause) == (None,) * 3
    assert not execution.is_terminal
    assert graph.execution(execution.attempt_id) is execution


def test_graph_ids_differ_between_rebuilds_of_one_job():
    job = JobGraph(name="j", job_id=new_job_id(), vertices=[vertex("v", 1)])
    first, second = ExecutionGraph(job), ExecutionGraph(job)
    assert re.fullmatch(r"[0-9a-f]+", first.graph_id)
    assert first.graph_id != second.graph_id
    a = first.vertices["v"].task_vertices[0].current_execution.attempt_id
    b = second.vertices["v"].task_vertices[0].current_execution.attempt_id
    assert a != b
    assert second.execution(a) is None


def test_legal_transitions_are_applied_with_timestamps():
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    path = [E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FINISHED]
    drive(execution, *path)
    assert execution.state is E.FINISHED
    assert execution.is_terminal
    assert list(execution.state_timestamps) == [E.CREATED, *path]
    stamps = list(execution.state_timestamps.values())
    assert stamps == sorted(stamps)


def test_a_task_may_skip_forward():
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    drive(execution, E.DEPLOYING, E.RUNNING)
    assert E.SCHEDULED not in execution.state_timestamps


def test_illegal_and_repeated_transitions_are_ignored():
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    drive(execution, E.SCHEDULED, E.DEPLOYING, E.RUNNING)
    stamps = dict(execution.state_timestamps)
    assert not execution.transition_state(E.SCHEDULED)  # backwards
    assert not execution.transition_state(E.RUNNING)  # repeated
    assert not execution.transition_state(E.CREATED)
    assert execution.state is E.RUNNING
    assert execution.state_timestamps == stamps


@pytest.mark.parametrize("terminal", [E.FINISHED, E.CANCELED, E.FAILED])
def test_terminal_states_are_final(terminal):
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    drive(execution, E.RUNNING, terminal)
    for state in E:
        assert not execution.transition_state(state, failure_cause="late")
    assert execution.state is terminal
    assert execution.failure_cause is None


def test_failure_cause_is_recorded():
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    assert execution.transition_state(E.FAILED, failure_cause="boom")
    assert execution.failure_cause == "boom"


def test_cancel_path():
    execution = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0].current_execution
    drive(execution, E.RUNNING, E.CANCELING, E.CANCELED)
    assert execution.is_terminal


# -- restarting -----------------------------------------------------------------------


def test_reset_refuses_a_live_attempt():
    graph = two_vertex_graph(2, 2, ALL_TO_ALL)
    ev = graph.vertices["src"].task_vertices[0]
    old = ev.current_execution
    drive(old, E.RUNNING)
    with pytest.raises(IllegalStateTransition, match=r"Src \(1/2\).*attempt 0 is still RUNNING"):
        ev.reset_for_new_execution()
    assert ev.current_execution is old
    assert graph.execution(old.attempt_id) is old


def test_reset_creates_and_registers_the_next_attempt():
    graph = two_vertex_graph(2, 2, ALL_TO_ALL)
    ev = graph.vertices["src"].task_vertices[1]
    old = ev.current_execution
    old.task_manager_id = "tm-1"
    drive(old, E.RUNNING, E.FAILED)

    new = ev.reset_for_new_execution()
    assert ev.current_execution is new
    assert new.attempt_number == 1
    assert new.attempt_id == f"{graph.graph_id}-src-1-1"
    assert new.state is E.CREATED
    assert new.task_manager_id is None and new.failure_cause is None
    assert graph.execution(new.attempt_id) is new
    assert graph.execution(old.attempt_id) is None  # stale updates find nothing
    assert old.state is E.FAILED  # the old attempt is left as it ended

    drive(new, E.CANCELED)
    assert ev.reset_for_new_execution().attempt_number == 2


def test_prior_executions_are_kept_bounded_by_the_history_size():
    job = JobGraph(name="one", job_id=new_job_id(), vertices=[vertex("src", 1)])
    ev = ExecutionGraph(job, attempts_history_size=3).vertices["src"].task_vertices[0]
    ended = []
    for number in range(5):
        execution = ev.current_execution
        drive(execution, E.RUNNING, E.FAILED)
        execution.failure_cause = f"boom {number}"
        ended.append(execution)
        ev.reset_for_new_execution()
    # As Flink's EvictingBoundedList: the newest 3 ended attempts, oldest first; 0 and 1 evicted.
    assert [e.attempt_number for e in ev.prior_executions] == [2, 3, 4]
    assert ev.prior_execution_attempt(3) is ended[3] and ev.prior_execution_attempt(3).state is E.FAILED
    assert ev.prior_execution_attempt(1) is None  # evicted
    assert ev.prior_execution_attempt(5) is None  # the current attempt is not a prior one
    assert ev.current_execution.attempt_number == 5


def test_a_history_size_of_zero_keeps_no_prior_executions():
    job = JobGraph(name="one", job_id=new_job_id(), vertices=[vertex("src", 1)])
    ev = ExecutionGraph(job, attempts_history_size=0).vertices["src"].task_vertices[0]
    drive(ev.current_execution, E.RUNNING, E.FAILED)
    ev.reset_for_new_execution()
    assert list(ev.prior_executions) == [] and ev.prior_execution_attempt(0) is None


def test_the_default_history_keeps_16_prior_executions():
    ev = two_vertex_graph(1, 1, ALL_TO_ALL).vertices["src"].task_vertices[0]
    for _ in range(20):
        drive(ev.current_execution, E.RUNNING, E.FAILED)
        ev.reset_for_new_execution()
    assert [e.attempt_number for e in ev.prior_executions] == list(range(4, 20))


def test_reset_forgets_the_produced_partitions():
    graph = two_vertex_graph(2, 3, ALL_TO_ALL)
    result = graph.results["src-to-dst"]
    ev0, ev1 = graph.vertices["src"].task_vertices
    for ev in (ev0, ev1):
        drive(ev.current_execution, E.RUNNING, E.FINISHED)
        ev.produced_partitions[0].mark_finished()
    assert result.all_partitions_finished

    ev1.reset_for_new_execution()
    assert not ev1.produced_partitions[0].is_finished
    assert ev0.produced_partitions[0].is_finished
    assert result.number_of_finished_partitions == 1
    assert not graph.vertices["dst"].task_vertices[0].consumed_partition_groups[0].all_finished()


# -- partitions -----------------------------------------------------------------------


def test_mark_finished_is_idempotent_and_counted():
    graph = two_vertex_graph(3, 2, ALL_TO_ALL)
    result = graph.results["src-to-dst"]
    group = graph.vertices["dst"].task_vertices[0].consumed_partition_groups[0]
    first, second, third = result.partitions

    assert first.mark_finished()
    assert not first.mark_finished()
    assert result.number_of_finished_partitions == 1
    assert not result.all_partitions_finished
    assert not group.all_finished()

    second.mark_finished()
    third.mark_finished()
    assert result.number_of_finished_partitions == 3
    assert result.all_partitions_finished
    assert group.all_finished()

    third.reset()
    third.reset()
    assert result.number_of_finished_partitions == 2
    assert not group.all_finished()


def test_partial_consumed_group_checks_only_its_own_partitions():
    graph = two_vertex_graph(5, 2, POINTWISE)
    result = graph.results["src-to-dst"]
    first_reader, second_reader = (v.consumed_partition_groups[0] for v in graph.vertices["dst"].task_vertices)
    result.partitions[0].mark_finished()
    result.partitions[1].mark_finished()
    assert first_reader.all_finished()
    assert not second_reader.all_finished()
    assert not result.all_partitions_finished


# -- summaries ------------------------------------------------------------------------


def set_states(graph: ExecutionGraph, *states: ExecutionState) -> None:
    for ev, state in zip(graph.vertices["src"].task_vertices, states, strict=True):
        if state is not E.CREATED:
            drive(ev.current_execution, state)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((E.CREATED, E.CREATED, E.CREATED), E.CREATED),
        ((E.SCHEDULED, E.DEPLOYING, E.CREATED), E.CREATED),
        ((E.RUNNING, E.DEPLOYING, E.CREATED), E.RUNNING),
        ((E.INITIALIZING, E.RUNNING, E.CREATED), E.INITIALIZING),
        ((E.FINISHED, E.FINISHED, E.SCHEDULED), E.RUNNING),
        ((E.FINISHED, E.FINISHED, E.FINISHED), E.FINISHED),
        ((E.CANCELED, E.FINISHED, E.RUNNING), E.CANCELED),
        ((E.CANCELED, E.CANCELING, E.RUNNING), E.CANCELING),
        ((E.CANCELED, E.CANCELING, E.FAILED), E.FAILED),
    ],
)
def test_aggregate_vertex_state_follows_flink(states, expected):
    graph = two_vertex_graph(3, 1, ALL_TO_ALL)
    set_states(graph, *states)
    assert aggregate_vertex_state(graph.vertices["src"]) is expected


def test_task_counts_use_flink_rest_keys():
    graph = two_vertex_graph(5, 1, ALL_TO_ALL)
    set_states(graph, E.CREATED, E.RUNNING, E.RUNNING, E.FAILED, E.INITIALIZING)
    counts = vertex_task_counts(graph.vertices["src"])
    assert tuple(counts) == TASK_COUNT_KEYS
    assert counts == {
        "created": 1,
        "scheduled": 0,
        "deploying": 0,
        "running": 2,
        "finished": 0,
        "canceling": 0,
        "canceled": 0,
        "failed": 1,
        "reconciling": 0,
        "initializing": 1,
    }
    assert set(TASK_COUNT_KEYS) == {s.value.lower() for s in E} | {"reconciling"}


def test_task_counts_follow_the_current_attempt():
    graph = two_vertex_graph(2, 1, ALL_TO_ALL)
    ev = graph.vertices["src"].task_vertices[0]
    drive(ev.current_execution, E.FAILED)
    ev.reset_for_new_execution()
    counts = vertex_task_counts(graph.vertices["src"])
    assert (counts["created"], counts["failed"]) == (2, 0)
