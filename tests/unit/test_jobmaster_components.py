"""Each part of the JobMaster built alone, with fakes for what it reaches: the
ExecutionDeployer, the PartitionRegistry, TaskReports, JobCheckpointing, ContinuousRounds."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import Execution, ExecutionGraph, ExecutionState, JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobmanager.errors import TaskReportRefused
from flink_runtime.jobmanager.execution_deployment import ExecutionDeployer
from flink_runtime.jobmanager.job_checkpoints import JobCheckpointing
from flink_runtime.jobmanager.rounds import ContinuousRounds
from flink_runtime.jobmanager.task_reports import PartitionRegistry, TaskReports, UnknownExecution
from flink_runtime.rpc.messages import CancelTask, SubmitTask
from flink_runtime.scheduler.slotpool import PhysicalSlot
from flink_runtime.scheduler.source_splits import SourceSplits, SplitProgress

from .jobmaster_fakes import ADDRESS, FakeGateway, job_graph

E = ExecutionState


def graph_of(*vertices: tuple[str, int], edges: tuple[tuple[str, str], ...] = ()) -> ExecutionGraph:
    return ExecutionGraph(job_graph(*vertices, edges=edges))


class StateLog:
    """The `set_state` a component gets: applies and records every change."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, ExecutionState, str | None]] = []

    def __call__(self, execution: Execution, state: ExecutionState, error: str | None) -> bool:
        if not execution.transition_state(state, error):
            return False
        self.changes.append((execution.attempt_id, state, error))
        return True


# -- ExecutionDeployer -----------------------------------------------------------------------


def deployer(slots: int, graph: ExecutionGraph | None = None) -> tuple[ExecutionDeployer, FakeGateway, StateLog]:
    gateway = FakeGateway(slots)
    states = StateLog()
    deploy = ExecutionDeployer(
        "job",
        gateway,
        lambda request_id, profile: gateway.request_slot(None, request_id, [], profile),  # type: ignore[arg-type]
        lambda execution, allocation_id, slot_index: SimpleNamespace(execution_id=execution.attempt_id),  # type: ignore[arg-type,return-value]
        states,
        lambda attempt_id: graph.execution(attempt_id) if graph is not None else None,
    )
    return deploy, gateway, states


def test_the_deployer_submits_into_a_free_slot_and_waits_for_one_otherwise() -> None:
    graph = graph_of(("source", 2))
    deploy, gateway, states = deployer(slots=1, graph=graph)
    first, second = graph.vertices["source"].task_vertices
    deploy.schedule_all([first, second])
    assert first.current_execution.state is E.DEPLOYING
    assert [s.descriptor.execution_id for s in gateway.submitted] == [first.current_execution.attempt_id]
    assert second.current_execution.state is E.SCHEDULED and gateway.pending_requests
    # Once the pool has a slot for the waiting request, the waiting attempt is deployed into it.
    request_id = gateway.pending_requests.pop(0)
    gateway.allocated[request_id] = slot = PhysicalSlot("tm-1", 1, "localhost", request_id)
    assert deploy.slot_allocated(request_id, slot, accept=True) == [second.current_execution.attempt_id]
    assert second.current_execution.state is E.DEPLOYING
    assert [s.descriptor.execution_id for s in gateway.submitted][-1] == second.current_execution.attempt_id


def test_the_deployer_fails_the_attempts_of_a_timed_out_request_or_a_lost_allocation() -> None:
    graph = graph_of(("source", 2))
    deploy, gateway, states = deployer(slots=1, graph=graph)
    first, second = graph.vertices["source"].task_vertices
    deploy.schedule_all([first, second])
    deploy.request_timed_out(gateway.pending_requests[0], 3.0)
    assert second.current_execution.state is E.FAILED
    assert "NoResourceAvailableException" in (states.changes[-1][2] or "") and "(3 s)" in (states.changes[-1][2] or "")
    allocation = first.current_execution.assigned_resource
    assert allocation is not None
    deploy.allocation_lost(allocation, "TaskManager tm-1 is gone")
    assert first.current_execution.state is E.FAILED
    assert states.changes[-1] == (first.current_execution.attempt_id, E.FAILED, "TaskManager tm-1 is gone")


def test_the_deployer_gives_back_a_slot_nobody_waits_for() -> None:
    deploy, gateway, _ = deployer(slots=1)
    gateway.allocated["stray"] = slot = PhysicalSlot("tm-1", 0, "localhost", "stray")
    assert deploy.slot_allocated("unknown-request", slot, accept=True) == []
    assert "stray" not in gateway.allocated and len(gateway.free_slots) == 2


def test_the_deployer_fails_an_attempt_whose_slot_vanished() -> None:
    graph = graph_of(("source", 1))
    deploy, _, states = deployer(slots=1)
    [vertex] = graph.vertices["source"].task_vertices
    deploy.schedule(vertex)
    deploy.deploy(vertex.current_execution, "no-such-allocation")
    assert states.changes[-1][1] is E.FAILED and "vanished" in (states.changes[-1][2] or "")


def test_cancel_all_asks_deployed_tasks_and_cancels_the_rest_at_once() -> None:
    graph = graph_of(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    deploy, gateway, _ = deployer(slots=2)
    [source] = graph.vertices["source"].task_vertices
    [sink] = graph.vertices["sink"].task_vertices
    deploy.deploy(source.current_execution, deploy.schedule(source) or "")
    deploy.cancel_all(graph.all_execution_vertices())
    assert gateway.cancelled == [source.current_execution.attempt_id]
    # The fake TaskManager no longer knows the task: concluded CANCELED here.
    assert source.current_execution.state is E.CANCELED and sink.current_execution.state is E.CANCELED


def test_tell_deployed_to_cancel_is_fenced_and_expects_no_answer() -> None:
    graph = graph_of(("source", 1))
    deploy, gateway, _ = deployer(slots=1)
    [source] = graph.vertices["source"].task_vertices
    deploy.deploy(source.current_execution, deploy.schedule(source) or "")
    deploy.tell_deployed_to_cancel(graph.all_execution_vertices())
    [told] = gateway.told
    assert isinstance(told, CancelTask) and told.jobmanager_id == "jm-1"
    assert source.current_execution.state is E.DEPLOYING
    assert all(isinstance(m, SubmitTask) for m in gateway.submitted)


# -- PartitionRegistry and TaskReports ---------------------------------------------------------


def test_the_registry_knows_finished_partitions_and_derives_running_ones(tmp_path: Path) -> None:
    graph = graph_of(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    registry = PartitionRegistry(str(tmp_path), lambda: "ns", lambda: graph, lambda tm: ADDRESS if tm else None)
    [source] = graph.vertices["source"].task_vertices
    partition_id = source.produced_partitions[0].partition_id
    assert registry.location(partition_id).startswith(str(tmp_path))
    assert registry.address(partition_id) == ""  # its producer is not deployed
    registry.finished(partition_id, "/data/p", "tcp://tm-2")
    assert (registry.location(partition_id), registry.address(partition_id)) == ("/data/p", "tcp://tm-2")
    registry.inputs_lost("attempt-1", [partition_id, "unknown#0"])
    assert registry.take_lost_producers("attempt-1") == [source]
    assert registry.take_lost_producers("attempt-1") == []
    registry.forget([partition_id])
    assert registry.locations == {} and registry.addresses == {}


def reports(graph: ExecutionGraph, status: JobStatus = JobStatus.RUNNING, stopping: bool = False):
    job = SimpleNamespace(job_id="job", graph=graph, status=status, stopping=stopping)
    registry = PartitionRegistry("/data", lambda: "ns", lambda: graph, lambda tm: None)
    scheduled: list[Any] = []
    splits = SourceSplits()
    splits.start({"source": [InputSplit(0), InputSplit(1)]})
    answers = TaskReports(job, registry, {}, splits, StateLog(), lambda vs: scheduled.extend(vs))  # type: ignore[arg-type]
    return answers, registry, scheduled


def test_reports_refuse_a_partition_from_an_attempt_that_is_not_the_running_one() -> None:
    graph = graph_of(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    answers, registry, scheduled = reports(graph)
    [source] = graph.vertices["source"].task_vertices
    partition_id = source.produced_partitions[0].partition_id
    with pytest.raises(TaskReportRefused, match="not the running attempt"):
        answers.schedule_or_update_consumers(partition_id, "/p", source.current_execution.attempt_id)
    for step in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING):
        source.current_execution.transition_state(step)
    answers.schedule_or_update_consumers(partition_id, "/p", source.current_execution.attempt_id)
    assert scheduled == list(graph.vertices["sink"].task_vertices)
    assert registry.location(partition_id) == "/p"


def test_a_failed_producers_partition_is_released_and_its_scheduled_consumer_fails() -> None:
    # Simulation seed 1779: a producer's ScheduleOrUpdateConsumers arrives (late) while the
    # JobManager still sees it RUNNING, schedules the consumer; then the producer's FAILED.
    graph = graph_of(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    answers, registry, scheduled = reports(graph)
    [source] = graph.vertices["source"].task_vertices
    [sink] = graph.vertices["sink"].task_vertices
    partition = source.produced_partitions[0]
    failed = source.current_execution
    for step in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING):
        failed.transition_state(step)
    answers.schedule_or_update_consumers(partition.partition_id, "/p", failed.attempt_id)
    assert scheduled == [sink] and partition.produced_by == failed.attempt_id
    sink.current_execution.transition_state(E.SCHEDULED)  # waiting for a slot
    failed.transition_state(E.FAILED, "AskTimeoutError")
    answers.producer_stopped(failed)
    # The failed attempt's partition no longer counts, and the consumer scheduled from it fails.
    assert not partition.is_finished and partition.produced_by is None
    assert partition.partition_id not in registry.locations and partition.partition_id not in registry.producers
    assert sink.current_execution.state is E.FAILED
    assert f"{partition.partition_id} is not available any more" in (sink.current_execution.failure_cause or "")
    # A report from the failed attempt changes nothing; the next attempt's report counts.
    with pytest.raises(TaskReportRefused):
        answers.schedule_or_update_consumers(partition.partition_id, "/p", failed.attempt_id)
    assert not partition.is_finished
    source.reset_for_new_execution()
    sink.reset_for_new_execution()
    retry = source.current_execution
    for step in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING):
        retry.transition_state(step)
    answers.schedule_or_update_consumers(partition.partition_id, "/p2", retry.attempt_id)
    assert partition.produced_by == retry.attempt_id and registry.producers[partition.partition_id] == retry.attempt_id


def test_reports_hand_out_splits_while_running_and_stop_an_unknown_attempt() -> None:
    graph = graph_of(("source", 1))
    answers, _, _ = reports(graph)
    [source] = graph.vertices["source"].task_vertices
    attempt = source.current_execution.attempt_id
    for step in (E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING):
        source.current_execution.transition_state(step)
    first = answers.request_next_input_split(attempt, None)
    assert first is not None and first.split_number == 0
    with pytest.raises(UnknownExecution):
        answers.request_next_input_split("no-such-attempt", None)
    stopped, _, _ = reports(graph, stopping=True)
    assert stopped.request_next_input_split(attempt, None) is None  # a stop hands out no more
    assert answers.executions_on("tm-x") == {}


def test_a_failed_report_with_missing_partitions_records_the_lost_inputs() -> None:
    graph = graph_of(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    answers, registry, _ = reports(graph)
    [source] = graph.vertices["source"].task_vertices
    [sink] = graph.vertices["sink"].task_vertices
    attempt = sink.current_execution.attempt_id
    lost = [source.produced_partitions[0].partition_id]
    assert answers.update_task_execution_state(attempt, E.FAILED, "gone", missing_partitions=lost)
    assert registry.take_lost_producers(attempt) == [source]
    assert not answers.update_task_execution_state("no-such-attempt", E.FAILED, "x")


# -- JobCheckpointing ------------------------------------------------------------------------------


class CheckpointHost:
    def __init__(self, graph: ExecutionGraph | None) -> None:
        self.graph = graph
        self.status = JobStatus.RUNNING
        self.is_continuous = False
        self.data_namespace = "ns"
        self.finalizing = False
        self.split_progress: dict[str, SplitProgress] = {}
        self.prepared = {"source": Prepared(splits=[InputSplit(0, payload={"files": ["a.csv"]})])}
        self.cancelled = 0
        self.stops: list[bool] = []
        self.idle = True

    def processed_files(self, vertex_id: str) -> set[str]:
        return {"old.csv"}

    def task_manager_address(self, task_manager_id: str) -> str | None:
        return ADDRESS

    def cancel(self) -> str | None:
        self.cancelled += 1
        return None

    def stop_while_idle(self) -> bool:
        self.stops.append(self.idle)
        return self.idle


def checkpointing(
    tmp_path: Path, host: CheckpointHost, job_id: str | None = None, restore_from: str | None = None
) -> tuple[JobCheckpointing, FakeGateway, list[Any]]:
    gateway = FakeGateway()
    completed: list[Any] = []
    graph = job_graph(("source", 1))
    graph.job_id = job_id or graph.job_id
    graph.config = {"state.checkpoints.dir": str(tmp_path / "cp")}
    if restore_from is not None:
        graph.config["execution.savepoint.path"] = restore_from
    part = JobCheckpointing(
        host,  # type: ignore[arg-type]
        graph,
        Configuration(graph.config),
        gateway,
        PartitionRegistry("/data", lambda: "ns", lambda: host.graph, lambda tm: None),
        lambda request_id, status: gateway.savepoint_status.__setitem__(request_id, status),
        lambda *args: completed.append(args),
    )
    return part, gateway, completed


def test_checkpointing_owns_the_stop_request_and_refuses_checkpoints_once_stopping(tmp_path: Path) -> None:
    host = CheckpointHost(graph_of(("source", 1)))
    part, gateway, _ = checkpointing(tmp_path, host)
    assert part.accepts_checkpoints()
    request = part.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    assert part.stopping and not part.accepts_checkpoints()
    assert host.stops == [True]  # the host was asked to stop at once if nothing runs
    outcomes: list[bool] = []
    part.write_stop_savepoint(outcomes.append)
    gateway.settle()
    assert outcomes == [False] and not part.stopping
    assert "location" in gateway.savepoint_status[request]["operation"]


def test_checkpointing_reads_files_from_the_preparation_and_earlier_rounds(tmp_path: Path) -> None:
    part, _, _ = checkpointing(tmp_path, CheckpointHost(None))
    assert part.prepared_split_files("source") == {0: ["a.csv"]}
    assert part.completed_files("source") == {"old.csv"}
    assert part.vertex_and_subtask("nobody") == (None, -1)


# -- ContinuousRounds ------------------------------------------------------------------------------


class RoundsHost:
    job_id = "job"

    def __init__(self) -> None:
        self.status = JobStatus.RUNNING
        self.stopping = False
        self.is_continuous = True
        self.data_namespace = "job"
        self.runs: list[str] = []  # the data namespace of each run from the sources
        self.ended: list[BaseException | None] = []
        self.deployer = SimpleNamespace(slots=SimpleNamespace(requests_made=0, kept_slots_taken=0, held_slots=0))

    def run_from_sources(self) -> None:
        self.runs.append(self.data_namespace)

    def end(self, error: BaseException | None) -> None:
        self.ended.append(error)


class SourcePlanner:
    """JobPlanning's side the rounds use: the scans answer `scans`, in order."""

    def __init__(self, scans: list[dict[str, Prepared]]) -> None:
        self.prepared = {"source": Prepared(monitor_interval=5.0)}
        self.scans = scans
        self.asked: list[tuple[dict[str, list[str]], str]] = []

    def prepare_sources(self, processed: dict[str, list[str]], data_namespace: str) -> dict[str, Prepared]:
        self.asked.append((processed, data_namespace))
        return self.scans.pop(0)


class SourceFiles:
    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]:
        return {0: ["a.csv"], 1: ["b.csv"]}

    def completed_files(self, vertex_id: str) -> set[str]:
        return {"old.csv"}


class Rounds(SimpleNamespace):
    rounds: ContinuousRounds
    host: RoundsHost
    gateway: FakeGateway
    planner: SourcePlanner
    splits: SourceSplits
    graph: ExecutionGraph


def rounds_with(scans: list[dict[str, Prepared]]) -> Rounds:
    host, gateway, planner, splits = RoundsHost(), FakeGateway(), SourcePlanner(scans), SourceSplits()
    graph = graph_of(("source", 1))
    rounds = ContinuousRounds(host, gateway, planner, splits, SourceFiles(), lambda: graph)  # type: ignore[arg-type]
    return Rounds(rounds=rounds, host=host, gateway=gateway, planner=planner, splits=splits, graph=graph)


def new_input(*numbers: int) -> dict[str, Prepared]:
    return {"source": Prepared(splits=[InputSplit(n) for n in numbers])}


def test_rounds_poll_every_monitor_interval_until_new_input_starts_a_round() -> None:
    t = rounds_with([{"source": Prepared()}, new_input(0)])
    t.rounds.round_done()
    assert t.rounds.idle
    t.gateway.advance(4.9)
    assert t.planner.asked == []
    t.gateway.advance(0.1)  # the first scan: nothing new, look again later
    assert t.host.runs == [] and t.rounds.idle
    # The planner is asked without the files processed before, in the job's namespace.
    assert t.planner.asked == [({"source": ["old.csv"]}, "job")]
    t.gateway.advance(5.0)
    assert t.host.runs == ["job/round-1"] and t.host.data_namespace == "job/round-1"
    assert not t.rounds.idle and t.rounds.round == 1


def test_a_new_round_takes_the_new_splits_and_releases_the_previous_rounds_partitions() -> None:
    t = rounds_with([new_input(0, 1), new_input(7)])
    [vertex] = t.graph.vertices["source"].task_vertices
    vertex.current_execution.io_metrics = IOMetrics(records_in=3)
    t.rounds.round_done()
    t.gateway.advance(5.0)
    # The job's own directory holds every round's: the first round releases nothing.
    assert t.host.runs == ["job/round-1"] and t.gateway.released_namespaces == []
    assert t.splits.total() == {"source": 2} and t.planner.prepared["source"].splits == new_input(0, 1)["source"].splits
    assert vertex.earlier_rounds_io_metrics == IOMetrics(records_in=3)  # kept before the new attempt
    # Round 1 read split 0 (file a.csv): the files processed so far, for checkpoints and scans.
    t.splits.progress = {"source": SplitProgress(completed={0: 0})}
    t.rounds.round_done()
    assert t.rounds.processed_files("source") == {"a.csv"}
    t.gateway.advance(5.0)
    assert t.host.runs == ["job/round-1", "job/round-2"]
    assert t.gateway.released_namespaces == ["job/round-1"] and t.splits.total() == {"source": 1}


def test_a_batch_job_going_on_after_a_failed_stop_ends_when_no_input_is_left() -> None:
    t = rounds_with([{"source": Prepared()}])
    t.host.is_continuous = False
    t.planner.prepared = {"source": Prepared()}  # no monitor interval: it looks at once
    t.rounds.round_done()
    t.gateway.advance(0)
    assert t.host.ended == [None] and t.host.runs == [] and not t.rounds.idle


def test_a_stop_takes_an_idle_job_and_ends_its_polling() -> None:
    t = rounds_with([new_input(0)])
    t.rounds.round_done()
    assert t.rounds.take_idle() and not t.rounds.take_idle()
    t.gateway.advance(10)
    assert t.host.runs == []  # the scan due finds the job no longer idle: no round
