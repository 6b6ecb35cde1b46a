"""A real JobMaster driven through whole jobs on an in-memory JobManager (jobmaster_fakes.py):
deployment, failover, cancel, supervision and stop, each in milliseconds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.jobmanager.errors import JobAlreadyEnded
from flink_runtime.jobmanager.gateway import supervised
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.rpc.messages import CancelTask, Message, SubmitTask

from .jobmaster_fakes import FakeGateway, FakePlanner, current, finish_deployed, job_graph, run_to, start_job

E = ExecutionState
FIXED_DELAY = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1 s"}


def deployed_ids(gateway) -> list[str]:
    return [submit.descriptor.execution_id for submit in gateway.submitted]


def test_a_job_deploys_its_sources_then_consumers_publishes_and_finishes() -> None:
    job, gateway = start_job(job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),)))
    assert job.status is JobStatus.RUNNING
    assert len(gateway.submitted) == 2  # the sources; the sink waits for their partitions
    assert {d.descriptor.vertex_id for d in gateway.submitted} == {"source"}
    assert finish_deployed(job) == 2
    assert len(gateway.submitted) == 3  # the sink, once both partitions are finished
    assert finish_deployed(job) == 1
    assert job.status is JobStatus.RUNNING  # publishing (a worker's job) comes first
    gateway.settle()
    assert gateway.planner.published == [JobStatus.FINISHED]
    assert job.status is JobStatus.FINISHED
    assert gateway.statuses == ["CREATED", "RUNNING", "FINISHED"]
    assert not gateway.allocated, "slots left allocated after the job ended"


def test_a_failed_publish_fails_the_job_with_the_cause() -> None:
    planner = FakePlanner(splits=1, publish_error=OSError("sink directory is read-only"))
    job, gateway = start_job(job_graph(("source", 1)), planner=planner)
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FAILED
    assert "sink directory is read-only" in job.exceptions[-1].stacktrace


def test_a_consumer_is_deployed_only_from_the_partition_of_its_producers_current_attempt() -> None:
    # Simulation seed 1307: the producer reported its partition, then its TaskManager was lost
    # before its FINISHED; the consumer deployed from it fails too, and its region restart
    # comes first. It waits for the producer's new attempt: deployed again at once, it would
    # read the failed attempt's partition with a descriptor naming the new attempt (not run yet).
    config = {**FIXED_DELAY, "restart-strategy.fixed-delay.attempts": "3"}
    job, gateway = start_job(job_graph(("source", 1), ("sink", 1), edges=(("source", "sink"),)), config)
    producer = current(job, "source")
    run_to(job, producer, E.RUNNING)
    job.schedule_or_update_consumers("source-to-sink#0", "/data/source-to-sink#0", producer.attempt_id, "tcp://tm")
    consumer = current(job, "sink")
    assert consumer.state is E.DEPLOYING
    job.fail_execution(consumer.attempt_id, "TaskManager tm-1 is gone")
    job.fail_execution(producer.attempt_id, "TaskManager tm-1 is gone")
    gateway.advance(1.0)
    assert current(job, "sink").attempt_number == 1 and current(job, "sink").state is E.CREATED
    retry = current(job, "source")
    assert retry.attempt_number == 1 and deployed_ids(gateway)[-1] == retry.attempt_id
    run_to(job, retry, E.FINISHED)
    [gate] = gateway.submitted[-1].descriptor.input_gates
    assert gateway.submitted[-1].descriptor.execution_id == current(job, "sink").attempt_id
    assert gate.partition_producers == [retry.attempt_id] and gate.partition_locations == ["/data/source-to-sink#0"]


def test_region_failover_restarts_exactly_the_failed_subtask_after_the_delay() -> None:
    job, gateway = start_job(job_graph(("source", 3), ("sink", 1), edges=(("source", "sink"),)), FIXED_DELAY)
    failed = current(job, "source", 1)
    run_to(job, current(job, "source", 0), E.FINISHED)
    run_to(job, failed, E.FAILED, "OSError: disk full")
    assert job.status is JobStatus.RUNNING
    assert current(job, "source", 1) is failed, "restarted before the delay"
    gateway.advance(1.0)
    assert job.num_restarts == 1
    assert current(job, "source", 1).attempt_number == 1
    assert current(job, "source", 0).attempt_number == 0  # finished: kept
    assert current(job, "source", 2).attempt_number == 0  # still running: untouched
    assert deployed_ids(gateway)[-1] == current(job, "source", 1).attempt_id
    assert "disk full" in job.exceptions[0].stacktrace
    finish_deployed(job)
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FINISHED


def test_lost_inputs_rerun_their_producers_with_the_failed_consumer() -> None:
    job, gateway = start_job(job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),)), FIXED_DELAY)
    finish_deployed(job)
    sink = current(job, "sink")
    lost = current(job, "source", 1).vertex.produced_partitions[0].partition_id
    run_to(job, sink, E.FAILED, "PartitionNotFoundException", missing_partitions=[lost])
    gateway.advance(1.0)
    # The region: the sink and the producer of the partition it could not read.
    assert current(job, "source", 1).attempt_number == 1
    assert current(job, "source", 0).attempt_number == 0
    assert current(job, "sink").attempt_number == 1
    assert current(job, "sink").state is E.CREATED, "deployed before its input was produced again"
    assert deployed_ids(gateway)[-1] == current(job, "source", 1).attempt_id
    finish_deployed(job)  # the producer again: now the sink can run
    assert current(job, "sink").state is E.DEPLOYING
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FINISHED


def test_without_restarts_a_failure_fails_the_job_with_its_cause() -> None:
    job, gateway = start_job(job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),)))
    run_to(job, current(job, "source", 0), E.FAILED, "ValueError: bad record")
    assert job.status is JobStatus.FAILED  # the other source was cancelled (its TaskManager forgot it)
    assert gateway.cancelled == [current(job, "source", 1).attempt_id]
    assert job.root_exception is not None and "bad record" in job.root_exception.stacktrace
    assert gateway.statuses == ["CREATED", "RUNNING", "FAILING", "FAILED"]
    assert not gateway.allocated


def test_full_failover_restarts_every_subtask_after_the_delay() -> None:
    config = {**FIXED_DELAY, "jobmanager.execution.failover-strategy": "full"}
    job, gateway = start_job(job_graph(("source", 2)), config)
    run_to(job, current(job, "source", 0), E.FAILED, "boom")
    assert job.status is JobStatus.RESTARTING
    gateway.advance(1.0)
    assert job.status is JobStatus.RUNNING
    assert [current(job, "source", i).attempt_number for i in (0, 1)] == [1, 1]
    assert gateway.statuses == ["CREATED", "RUNNING", "RESTARTING", "RUNNING"]


def test_cancel_during_run_cancels_the_deployed_tasks() -> None:
    job, gateway = start_job(job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),)))
    job.cancel()
    assert sorted(gateway.cancelled) == sorted(current(job, "source", i).attempt_id for i in (0, 1))
    assert job.status is JobStatus.CANCELED
    assert current(job, "sink").state is E.CANCELED
    with pytest.raises(JobAlreadyEnded, match=f"^job {job.job_id} is already CANCELED$"):
        job.cancel()
    assert not gateway.allocated


def test_a_handler_that_raises_restarts_the_job_when_the_strategy_allows() -> None:
    job, gateway = start_job(job_graph(("source", 2)), FIXED_DELAY)

    @supervised
    def broken(job) -> None:
        raise RuntimeError("bookkeeping went wrong")

    broken(job)
    assert gateway.child_failures and job.status is JobStatus.RESTARTING
    gateway.advance(1.0)
    assert job.status is JobStatus.RUNNING
    assert [current(job, "source", i).attempt_number for i in (0, 1)] == [1, 1]
    assert "bookkeeping went wrong" in job.exceptions[-1].stacktrace
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FINISHED


def test_a_handler_that_raises_fails_the_job_without_restarts() -> None:
    job, gateway = start_job(job_graph(("source", 2)))

    @supervised
    def broken(job) -> None:
        raise RuntimeError("bookkeeping went wrong")

    broken(job)
    assert job.status is JobStatus.FAILED
    assert "bookkeeping went wrong" in job.exceptions[-1].stacktrace
    assert len(gateway.cancelled) == 2 and not gateway.allocated


def test_stop_with_savepoint_publishes_then_writes_the_savepoint_then_finishes(tmp_path: Path) -> None:
    job, gateway = start_job(job_graph(("source", 1)), {"state.checkpoints.dir": str(tmp_path / "cp")})
    request = job.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    execution = current(job, "source")
    job.update_task_execution_state(execution.attempt_id, E.INITIALIZING, None)
    job.update_task_execution_state(execution.attempt_id, E.RUNNING, None)
    # Stopping: no split is handed out any more.
    assert job.request_next_input_split(execution.attempt_id, None) is None
    job.update_task_execution_state(execution.attempt_id, E.FINISHED, None)
    gateway.settle()
    assert gateway.planner.published == [JobStatus.FINISHED]
    assert job.status is JobStatus.FINISHED
    location = gateway.savepoint_status[request]["operation"]["location"]
    assert Path(location).is_dir() and location.startswith(str(tmp_path / "sp"))


def test_a_stop_that_arrives_while_a_round_is_published_finishes_the_job(tmp_path: Path) -> None:
    # A continuous job publishing its round is neither running tasks nor between rounds: a
    # stop waiting for a savepoint would wait for ever (nothing triggers one), hanging Airflow's stop task.
    planner = FakePlanner(splits=1, monitor_interval=5.0)
    job, gateway = start_job(job_graph(("source", 1)), {"state.checkpoints.dir": str(tmp_path / "cp")}, planner=planner)
    finish_deployed(job)  # the round is done: its output is being published (a worker's job)
    request = job.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    gateway.settle()
    assert gateway.planner.published == [JobStatus.FINISHED]
    assert job.status is JobStatus.FINISHED
    location = gateway.savepoint_status[request]["operation"]["location"]
    assert Path(location, "_metadata").is_file()
    gateway.advance(10.0)  # and no round starts after the stop
    assert job.status is JobStatus.FINISHED and len(gateway.submitted) == 1


def test_a_stop_of_a_job_cancelled_before_its_savepoint_completes_failed(tmp_path: Path) -> None:
    # The stop waits for the running source; the job is cancelled meanwhile: the stop's
    # request completes failed (Flink completes its future exceptionally), not IN_PROGRESS.
    job, gateway = start_job(job_graph(("source", 1)), {"state.checkpoints.dir": str(tmp_path / "cp")})
    request = job.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    job.cancel()
    gateway.settle()
    assert job.status is JobStatus.CANCELED
    status = gateway.savepoint_status[request]
    assert status["status"]["id"] == "COMPLETED"
    assert "reached CANCELED before its savepoint completed" in status["operation"]["failure-cause"]["stack-trace"]
    assert not job.stopping and not list((tmp_path / "sp").glob("savepoint-*"))


def test_slots_fewer_than_subtasks_deploy_as_slots_come_back() -> None:
    job, gateway = start_job(job_graph(("source", 3)), slots=1)
    assert len(gateway.submitted) == 1 and len(gateway.pending_requests) == 2
    for expected in (2, 3):
        finish_deployed(job)
        assert len(gateway.submitted) == expected
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FINISHED


def test_cancel_answers_are_fenced_with_the_jobmanager_id() -> None:
    job, gateway = start_job(job_graph(("source", 1)))
    job.suspend("lost leadership")
    assert job.status is JobStatus.SUSPENDED
    assert isinstance(gateway.told[0], CancelTask) and gateway.told[0].jobmanager_id == "jm-1"


def test_a_canceled_the_jobmaster_did_not_ask_for_is_a_failure_and_restarts_the_subtask() -> None:
    """A TaskManager that lost the JobManager's heartbeats cancels its tasks on its own; their
    CANCELED must not end the attempt quietly (nothing would rerun it: RUNNING for ever)."""
    job, gateway = start_job(job_graph(("source", 2)), FIXED_DELAY)
    cancelled = current(job, "source", 1)
    run_to(job, current(job, "source", 0), E.FINISHED)
    run_to(job, cancelled, E.CANCELED, "TaskManager tm-1 lost JobManager jm-1")
    assert cancelled.state is E.FAILED
    assert "TaskManager tm-1 cancelled Source (2/2) on its own" in job.exceptions[-1].stacktrace
    assert "lost JobManager jm-1" in job.exceptions[-1].stacktrace
    gateway.advance(1.0)
    assert job.num_restarts == 1
    assert current(job, "source", 1).attempt_number == 1
    assert deployed_ids(gateway)[-1] == current(job, "source", 1).attempt_id
    finish_deployed(job)
    gateway.settle()
    assert job.status is JobStatus.FINISHED


def test_a_canceled_the_jobmaster_asked_for_stays_canceled() -> None:
    job, gateway = start_job(job_graph(("source", 1)))
    execution = current(job, "source")
    run_to(job, execution, E.RUNNING)
    gateway.ask_task_manager = lambda address, message, on_done: None  # the CancelTask is unanswered
    job.cancel()
    assert execution.state is E.CANCELING
    job.update_task_execution_state(execution.attempt_id, E.CANCELED, None)
    assert execution.state is E.CANCELED
    assert job.status is JobStatus.CANCELED
    assert not job.exceptions


def test_a_deployment_that_timed_out_is_failed_and_cancelled_on_its_task_manager() -> None:
    """The SubmitTask may only be slow: the TaskManager is told to cancel the attempt, so it
    does not run on in a slot the JobManager frees and gives to another task."""
    gateway = FakeGateway()
    answer_submit = gateway.ask_task_manager
    timeouts = [TimeoutError("ask timed out after 10 s")]

    def slow_submit(address: str, message: Message, on_done: Callable[[Any, BaseException | None], None]) -> None:
        if isinstance(message, SubmitTask) and timeouts:
            gateway.submitted.append(message)
            on_done(None, timeouts.pop())
        else:
            answer_submit(address, message, on_done)

    gateway.ask_task_manager = slow_submit  # type: ignore[method-assign]
    job = JobMaster(job_graph(("source", 1)), gateway, Configuration(FIXED_DELAY))
    gateway.job = job
    job.start()
    gateway.settle()
    timed_out = deployed_ids(gateway)[0]
    failed = current(job, "source")
    assert (failed.attempt_id, failed.state) == (timed_out, E.FAILED)
    assert "could not deploy Source (1/1): ask timed out" in job.exceptions[-1].stacktrace
    assert [(type(m), m.execution_id) for m in gateway.told] == [(CancelTask, timed_out)]
    gateway.advance(1.0)  # the restart strategy deploys a new attempt
    assert deployed_ids(gateway)[-1] == current(job, "source").attempt_id != timed_out
