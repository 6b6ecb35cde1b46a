"""The JobMaster's decisions, pure (scheduler/job_scheduling.py): stimuli in, actions out,
time passed in; no JobMaster, no timers, no slots."""

from __future__ import annotations

from flink_runtime.executiongraph import ExecutionGraph, ExecutionState, ExecutionVertex, JobStatus
from flink_runtime.scheduler import job_scheduling as js
from flink_runtime.scheduler.failover import ExecutionFailureHandler
from flink_runtime.scheduler.restart import FixedDelayRestart, NoRestart, RestartStrategy

from .jobmaster_fakes import job_graph

E = ExecutionState
J = JobStatus


def running(strategy: RestartStrategy, failover: str = "region") -> tuple[js.JobScheduling, ExecutionGraph]:
    graph = ExecutionGraph(job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),)))
    scheduling = js.JobScheduling(ExecutionFailureHandler(strategy, failover))
    scheduling.graph_built(graph.total_subtasks)
    scheduling.to(J.CREATED)
    scheduling.to(J.RUNNING)
    return scheduling, graph


def vertex(graph: ExecutionGraph, vertex_id: str, subtask: int = 0) -> ExecutionVertex:
    return graph.vertices[vertex_id].task_vertices[subtask]


def end(vertex: ExecutionVertex, state: ExecutionState) -> None:
    for step in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING, state):
        assert vertex.current_execution.transition_state(step)


def test_a_region_failure_names_the_failed_subtask_and_the_producers_of_its_lost_inputs() -> None:
    scheduling, graph = running(FixedDelayRestart(3, 2.5))
    sources = [vertex(graph, "source", i) for i in (0, 1)]
    sink = vertex(graph, "sink")
    for source in sources:
        end(source, E.FINISHED)
        scheduling.execution_stopped(finished=True)
    end(sink, E.FAILED)
    scheduling.execution_stopped(finished=False)
    failed_attempt = sink.current_execution.attempt_id
    actions = scheduling.task_failed(sink, failed_attempt, list(graph.all_execution_vertices()), [sources[1]], now=0)
    assert actions == [js.ScheduleRegionRestart(failed_attempt, frozenset([sink, sources[1]]), 2.5)]
    assert scheduling.status is J.RUNNING
    # The delay passed: both get new attempts; the other source keeps its output.
    [restart] = scheduling.region_restart_due(sink, failed_attempt, frozenset([sink, sources[1]]))
    assert restart == js.RestartVertices((sink, sources[1]), (sources[1],))
    assert (scheduling.active, scheduling.finished, scheduling.num_restarts) == (2, 1, 1)


def test_a_region_restart_that_comes_too_late_does_nothing() -> None:
    scheduling, graph = running(FixedDelayRestart(3, 1.0))
    source = vertex(graph, "source")
    end(source, E.FAILED)
    scheduling.execution_stopped(finished=False)
    stale = source.current_execution.attempt_id
    source.reset_for_new_execution()  # e.g. a full restart came first
    assert scheduling.region_restart_due(source, stale, frozenset([source])) == []


def test_without_restarts_a_task_failure_fails_the_job_once_everything_stopped() -> None:
    scheduling, graph = running(NoRestart())
    source = vertex(graph, "source")
    end(source, E.FAILED)
    scheduling.execution_stopped(finished=False)
    actions = scheduling.task_failed(source, source.current_execution.attempt_id, [], [], now=0)
    assert actions == [js.Transition(J.RUNNING, J.FAILING), js.CancelAll()]
    assert scheduling.check_completion(continuous=False, stopping=False) == []  # two still run
    scheduling.execution_stopped(finished=False)
    scheduling.execution_stopped(finished=False)
    assert scheduling.check_completion(False, False) == [js.Transition(J.FAILING, J.FAILED), js.Finish()]


def test_full_failover_restarts_every_subtask_after_all_stopped_and_the_delay() -> None:
    scheduling, graph = running(FixedDelayRestart(1, 4.0), failover="full")
    source = vertex(graph, "source")
    actions = scheduling.task_failed(source, "a", list(graph.all_execution_vertices()), [], now=0)
    assert actions == [js.Transition(J.RUNNING, J.RESTARTING), js.CancelAll()]
    for _ in range(3):
        scheduling.execution_stopped(finished=False)
    assert scheduling.check_completion(False, False) == [js.ScheduleRestart(4.0)]
    assert scheduling.restart_due() == [js.Transition(J.RESTARTING, J.RUNNING), js.RestartAll()]
    assert (scheduling.active, scheduling.num_restarts) == (3, 1)
    assert scheduling.restart_due() == []  # a second timer finds the job running


def test_a_global_failure_restarts_all_when_allowed_and_fails_otherwise() -> None:
    scheduling, graph = running(FixedDelayRestart(1, 1.0))
    vertices = list(graph.all_execution_vertices())
    assert scheduling.global_failure(vertices, now=0) == [js.Transition(J.RUNNING, J.RESTARTING), js.CancelAll()]
    assert scheduling.active == 3  # recounted from the graph, not trusted
    # A second global failure while restarting: the strategy (1 attempt) is used up.
    assert scheduling.global_failure(vertices, now=1) == [js.CancelAll(), js.ConcludeFailed()]
    assert scheduling.conclude_failed() == [js.Transition(J.RESTARTING, J.FAILED), js.Finish()]


def test_a_global_failure_without_restarts_fails_at_once() -> None:
    scheduling, graph = running(NoRestart())
    actions = scheduling.global_failure(list(graph.all_execution_vertices()), now=0)
    assert actions == [js.Transition(J.RUNNING, J.FAILING), js.CancelAll(), js.ConcludeFailed()]
    assert scheduling.conclude_failed() == [js.Transition(J.FAILING, J.FAILED), js.Finish()]
    assert scheduling.conclude_failed() == []


def test_a_global_failure_before_running_fails_the_job() -> None:
    scheduling = js.JobScheduling(ExecutionFailureHandler(FixedDelayRestart(5, 0.0), "region"))
    assert scheduling.global_failure([], now=0) == [js.Transition(J.INITIALIZING, J.FAILED), js.Finish()]


def test_every_subtask_finished_publishes_then_finishes() -> None:
    scheduling, _ = running(NoRestart())
    for _ in range(3):
        scheduling.execution_stopped(finished=True)
    assert scheduling.check_completion(continuous=False, stopping=False) == [js.Publish(next_round=False)]
    assert scheduling.check_completion(False, False) == []  # publishing: once only
    assert scheduling.published(failed=False, stopping=False) == [js.Transition(J.RUNNING, J.FINISHED), js.Finish()]


def test_a_stop_publishes_then_writes_the_savepoint_and_a_failed_savepoint_goes_on_in_rounds() -> None:
    scheduling, _ = running(NoRestart())
    for _ in range(3):
        scheduling.execution_stopped(finished=True)
    assert scheduling.check_completion(continuous=True, stopping=True) == [js.Publish(next_round=False)]
    assert scheduling.published(failed=False, stopping=True) == [js.TriggerStopSavepoint()]
    assert scheduling.finalizing  # until the savepoint is written: no completion meanwhile
    assert scheduling.stop_savepoint_done(failed=True) == [js.ResumeRounds()]
    assert scheduling.round_done(failed=False, stopping=False) == [js.AwaitInput()]
    assert scheduling.status is J.RUNNING and not scheduling.finalizing


def test_a_stop_that_arrives_while_a_round_is_published_writes_its_savepoint_after_it() -> None:
    # Neither running nor between rounds when the stop came: nothing else would trigger it.
    scheduling, _ = running(NoRestart())
    for _ in range(3):
        scheduling.execution_stopped(finished=True)
    assert scheduling.check_completion(continuous=True, stopping=False) == [js.Publish(next_round=True)]
    assert scheduling.round_done(failed=False, stopping=True) == [js.AwaitInput(), js.TriggerStopSavepoint()]
    assert scheduling.finalizing
    assert scheduling.stop_savepoint_done(failed=False) == [js.Transition(J.RUNNING, J.FINISHED), js.Finish()]


def test_a_successful_stop_savepoint_finishes_the_job() -> None:
    scheduling, _ = running(NoRestart())
    assert scheduling.stop_while_idle() == [js.TriggerStopSavepoint()]
    assert scheduling.stop_savepoint_done(failed=False) == [js.Transition(J.RUNNING, J.FINISHED), js.Finish()]


def test_cancel_is_refused_once_terminal_and_ends_when_everything_stopped() -> None:
    scheduling, _ = running(NoRestart())
    assert scheduling.cancel() == [js.Transition(J.RUNNING, J.CANCELLING), js.CancelAll()]
    assert scheduling.cancel() == []
    for _ in range(3):
        scheduling.execution_stopped(finished=False)
    assert scheduling.check_completion(False, False) == [js.Transition(J.CANCELLING, J.CANCELED), js.Finish()]
    assert scheduling.cancel() == []  # ended: the JobMaster refuses it (JobAlreadyEnded)


def test_a_round_published_while_cancelling_ends_the_job() -> None:
    scheduling, _ = running(NoRestart())
    for _ in range(3):
        scheduling.execution_stopped(finished=True)
    assert scheduling.check_completion(continuous=True, stopping=False) == [js.Publish(next_round=True)]
    scheduling.cancel()
    assert scheduling.round_done(failed=False, stopping=False) == [js.Transition(J.CANCELLING, J.CANCELED), js.Finish()]
