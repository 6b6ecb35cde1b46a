"""IOMetrics (what a task attempt read and wrote) and their sums per subtask and vertex."""

from __future__ import annotations

import msgspec

from flink_runtime.executiongraph import (
    ExecutionGraph,
    ExecutionState,
    graph_io_metrics,
    subtask_io_metrics,
    vertex_io_metrics,
)
from flink_runtime.io.metrics import NO_IO, IOMetrics
from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobGraph, JobVertex, new_job_id
from flink_runtime.rpc.messages import UpdateTaskExecutionState, WireMessage

E = ExecutionState


def test_add_and_merge_sum_every_field() -> None:
    a = IOMetrics(records_in=1, records_out=2, bytes_in=3, bytes_out=4, busy_ms=5, idle_ms=6)
    b = IOMetrics(records_in=10, records_out=20, bytes_in=30, bytes_out=40, busy_ms=50, idle_ms=60)
    assert a + b == IOMetrics(records_in=11, records_out=22, bytes_in=33, bytes_out=44, busy_ms=55, idle_ms=66)
    assert IOMetrics.merge([a, None, b, a]) == a + b + a
    assert IOMetrics.merge([]) == NO_IO == IOMetrics()
    assert a + NO_IO == a


def graph(source_parallelism: int = 2, sink_parallelism: int = 1) -> ExecutionGraph:
    job = JobGraph(
        name="io",
        job_id=new_job_id(),
        vertices=[
            JobVertex(id="src", name="Source", invokable="noop", parallelism=source_parallelism),
            JobVertex(id="sink", name="Sink", invokable="noop", parallelism=sink_parallelism),
        ],
    )
    job.connect("src", "sink", distribution_pattern=DistributionPattern.ALL_TO_ALL)
    return ExecutionGraph(job)


def finish(execution, metrics: IOMetrics | None) -> None:
    for state in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FINISHED):
        assert execution.transition_state(state)
    execution.io_metrics = metrics


def test_vertex_io_metrics_is_complete_once_every_subtask_reported() -> None:
    g = graph()
    source = g.vertices["src"]
    assert vertex_io_metrics(source) == (NO_IO, False)
    finish(source.task_vertices[0].current_execution, IOMetrics(records_out=7, bytes_out=100))
    partial = vertex_io_metrics(source)
    assert partial.metrics == IOMetrics(records_out=7, bytes_out=100)
    assert not partial.complete
    finish(source.task_vertices[1].current_execution, IOMetrics(records_out=5, bytes_out=60))
    assert vertex_io_metrics(source) == (IOMetrics(records_out=12, bytes_out=160), True)
    assert subtask_io_metrics(source.task_vertices[1]) == (IOMetrics(records_out=5, bytes_out=60), True)
    by_vertex = graph_io_metrics(g)
    assert list(by_vertex) == ["src", "sink"]
    assert by_vertex["sink"] == (NO_IO, False)


def test_a_replaced_attempt_is_not_counted_but_finished_rounds_are() -> None:
    g = graph(source_parallelism=1)
    subtask = g.vertices["src"].task_vertices[0]
    first = subtask.current_execution
    assert first.transition_state(E.FAILED)
    first.io_metrics = IOMetrics(records_out=3)
    # A restart within a round: the failed attempt's counts are dropped (its successor redoes the work).
    finish(subtask.reset_for_new_execution(), IOMetrics(records_out=10, bytes_in=1))
    assert vertex_io_metrics(g.vertices["src"]) == (IOMetrics(records_out=10, bytes_in=1), True)
    # A continuous job's next round: the finished round is kept, the new attempt adds to it.
    subtask.end_round()
    subtask.reset_for_new_execution()
    assert vertex_io_metrics(g.vertices["src"]) == (IOMetrics(records_out=10, bytes_in=1), False)
    finish(subtask.current_execution, IOMetrics(records_out=4, bytes_in=2))
    assert vertex_io_metrics(g.vertices["src"]) == (IOMetrics(records_out=14, bytes_in=3), True)


def test_update_task_execution_state_carries_io_metrics_and_old_senders_still_decode() -> None:
    update = UpdateTaskExecutionState(
        job_id="j",
        execution_id="e",
        jobmanager_id="jm",
        state="FINISHED",
        io_metrics=IOMetrics(records_in=1, records_out=2, bytes_in=3, bytes_out=4, busy_ms=5, idle_ms=6),
    )
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(update), type=WireMessage)
    assert decoded == update
    assert decoded.io_metrics.bytes_out == 4

    class OldUpdateTaskExecutionState(msgspec.Struct, tag="UpdateTaskExecutionState", kw_only=True):
        """The message as a TaskManager without I/O metrics sends it."""

        jobmanager_id: str
        job_id: str
        execution_id: str
        state: str
        error: str | None = None

    old = msgspec.msgpack.encode(
        OldUpdateTaskExecutionState(jobmanager_id="jm", job_id="j", execution_id="e", state="FINISHED")
    )
    decoded_old = msgspec.msgpack.decode(old, type=WireMessage)
    assert isinstance(decoded_old, UpdateTaskExecutionState)
    assert decoded_old.io_metrics is None
    # And a receiver without the field ignores it (msgspec skips unknown fields).
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(update), type=OldUpdateTaskExecutionState).state == "FINISHED"
