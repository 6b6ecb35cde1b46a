"""The JobMaster: one job's ExecutionGraph, its scheduling and its status.

A JobMaster is not an actor of its own: the JobManager's mailbox drives it, so its
state is touched only there. It asks the JobManager (its `JobMasterGateway`) for
slots and RPCs and answers the messages the JobManager routes to it by job id.

Scheduling is lazy from the sources, as Flink's batch scheduling (scheduler/strategy.py):

  1. every source subtask asks for a (shared) slot and is deployed into it;
  2. a producer that finishes commits its partitions and reports them with
     ScheduleOrUpdateConsumers; a consumer subtask is deployed once every partition
     it reads is finished (blocking exchanges);
  3. when every subtask has FINISHED the job is FINISHED.

A failed subtask is restarted alone (region failover) or with the whole job, as the
restart strategy allows (scheduler/failover.py); otherwise the other subtasks are
cancelled and the job is FAILED when all of them have stopped. A handler of the job
that raises fails it globally (`restart`, the JobManager's supervision of its jobs).

This module holds the job's state and status; the pieces that act on it and read
best alone are in their own modules, as mixins of the JobMaster:

  execution_deployment.py  slots and SubmitTask (Flink's ExecutionDeployer)
  job_checkpoints.py       savepoint requests and the CheckpointedJob view
  rounds.py                continuous sources, which run the graph in rounds
  task_reports.py          what TaskManagers report: task states, split requests,
                           finished partitions, reconciliation

and the decisions that need no job at all are in scheduler/ (strategy, failover,
slots, source splits, exception history) and deployment/ (task descriptors).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from flink_runtime.checkpoint.coordinator import CheckpointCoordinator, CheckpointFailure
from flink_runtime.checkpoint.progress import CHECKPOINTS_DIR_KEY, ProgressTracker
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    JobStatus,
)
from flink_runtime.invokable import Prepared
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.execution_deployment import ExecutionDeployment
from flink_runtime.jobmanager.gateway import JobMasterGateway, SupervisedGateway, supervised
from flink_runtime.jobmanager.job_checkpoints import JobCheckpoints
from flink_runtime.jobmanager.operation_requests import OperationRequests
from flink_runtime.jobmanager.rounds import ContinuousRounds
from flink_runtime.jobmanager.submission import SubmissionWaiters
from flink_runtime.jobmanager.task_reports import TaskReports
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.planner.tasks import UserCodeError
from flink_runtime.rpc.messages import (
    JobStatusChanged,
    Message,
)
from flink_runtime.scheduler.exception_history import (
    ExceptionEntry,
    exception_entry,
    task_failure_entry,
    user_code_entry,
)
from flink_runtime.scheduler.execution_slots import ExecutionSlotAllocator
from flink_runtime.scheduler.failover import ExecutionFailureHandler
from flink_runtime.scheduler.source_splits import SourceSplits, SplitProgress
from flink_runtime.scheduler.strategy import sources_to_restart, vertices_to_start

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_E = ExecutionState


class RecoveryGivenUp(RuntimeError):
    """The job was recovered too often without reaching RUNNING."""


class JobMaster(ExecutionDeployment, JobCheckpoints, ContinuousRounds, TaskReports):
    """One job: its ExecutionGraph, status and the pieces that act on them (see the module
    docstring); the mixins are the parts kept in modules of their own."""

    def __init__(self, job_graph: JobGraph, gateway: JobMasterGateway, cluster_config: Configuration) -> None:
        assert job_graph.job_id is not None
        self.job_graph = job_graph
        self.job_id: str = job_graph.job_id
        self.name = job_graph.name
        # Its callbacks run supervised: what they raise fails this job (restart below).
        self.gateway = SupervisedGateway(gateway, self)
        self.supervisor = gateway
        self.config = cluster_config.copy(job_graph.config)
        self.status = JobStatus.INITIALIZING
        self.status_timestamps: dict[JobStatus, float] = {JobStatus.INITIALIZING: time.time()}
        self.graph: ExecutionGraph | None = None
        self.exceptions: list[ExceptionEntry] = []
        # Failovers so far, regional and full (Flink's numRestarts).
        self.num_restarts = 0
        self._slots = ExecutionSlotAllocator(
            self.job_id,
            lambda request_id: gateway.request_slot(self, request_id, []),
            gateway.release_slot,
            gateway.cancel_slot_request,
        )
        self._partition_locations: dict[str, str] = {}
        # Partition id -> RPC address of the TaskManager that produced it (and serves it).
        self._partition_addresses: dict[str, str] = {}
        # Failed attempt id -> the finished partitions it could not fetch (task_reports.py).
        self._lost_inputs: dict[str, list[str]] = {}
        self._active_executions = 0
        self._finished_executions = 0
        self._submission = SubmissionWaiters(self.job_id)
        self._prepared: dict[str, Prepared] = {}
        self._finalizing = False
        self._failure_handler: ExecutionFailureHandler[ExecutionVertex] = ExecutionFailureHandler.from_config(
            self.config
        )
        self._restart_delay = 0.0
        self.splits = SourceSplits()
        # A checkpoint directory the job chose is checked with security.allowed-directories
        # where it is written; the cluster's own is the operator's choice.
        confined = CHECKPOINTS_DIR_KEY in job_graph.config
        self.coordinator = CheckpointCoordinator(self, self.config, checkpoints_dir_confined=confined)
        self.tracker = ProgressTracker(self, self.coordinator.checkpoints_dir, checkpoints_dir_confined=confined)
        self.savepoint_requests = OperationRequests(
            "savepoint", lambda request_id, status: gateway.savepoint_request_changed(self, request_id, status)
        )
        # Kept in memory only (as Flink's dispatcher keeps them): lost with the JobManager.
        self.checkpoint_requests = OperationRequests("checkpoint")
        self._stop_request: tuple[str, str | None] | None = None
        self.is_continuous = False
        self.data_namespace = job_graph.job_id
        self._idle = False  # a continuous job between rounds
        self._round = 0
        self._processed_files: dict[str, set[str]] = {}
        self._data_dir = str(
            self.config.raw("io.tmp.dirs") or os.path.join(tempfile.gettempdir(), "flink-runtime-data")
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @supervised
    def start(self) -> None:
        """Build the ExecutionGraph, then prepare the vertices off the mailbox (input
        splits, plan checks: file listings and Spark analysis take time)."""
        try:
            self.graph = graph = ExecutionGraph(self.job_graph)
        except Exception as exc:
            self._fail_before_running(exc, invalid=True)
            return
        self._active_executions = graph.total_subtasks
        self._submission.expect_sources({ejv.id for ejv in graph.source_vertices()})
        self.gateway.run_async(asyncio.to_thread(self._prepare_vertices), self._on_prepared)

    def _prepare_vertices(self) -> dict[str, Prepared]:
        """Runs in a worker thread. The job's code (invokables, transforms, libraries) is
        imported and its plan resolved in the planner process, never here."""
        assert self.graph is not None
        self.coordinator.restored = self.tracker.load_restore(set(self.graph.vertices))
        restored = self.tracker.restore.vertices if self.tracker.restore is not None else {}
        return self.gateway.planner.run(
            planner_tasks.prepare_job,
            self.job_graph.to_json(),
            self.config,
            restored,
            self.data_namespace,
            self.gateway.blob_dir,
            timeout=self.gateway.planner_timeout,
        )

    def _on_prepared(self, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if self.status is not JobStatus.INITIALIZING:
            return  # cancelled while preparing
        if error is not None or prepared is None:
            self._fail_before_running(error or RuntimeError("preparation failed"), invalid=True)
            return
        assert self.graph is not None
        self._prepared = prepared
        self.is_continuous = any(p.monitor_interval for p in prepared.values())
        graph = self.graph
        self.splits.start({v: p.splits for v, p in prepared.items() if graph.vertices[v].inputs == [] or p.splits})
        self._transition(JobStatus.CREATED)
        self._declare_slot_usage()
        for vertex in self.tracker.apply_restore():
            self._restore_finished(vertex)
        self._transition(JobStatus.RUNNING)
        self.coordinator.start_periodic()
        self._schedule_all(vertices_to_start(self.graph))
        self._complete_if_all_stopped()  # a savepoint may have restored every subtask as finished

    def _restore_finished(self, vertex: ExecutionVertex) -> None:
        """A savepoint says this subtask finished: count it done and its partitions
        available (their chunks are read from the savepoint)."""
        self._set_execution_state(vertex.current_execution, _E.FINISHED)
        for partition in vertex.produced_partitions:
            partition.mark_finished()

    def give_up_recovery(self, reason: str) -> None:
        """Instead of start(): the JobManager will not recover this job again; it ends FAILED."""
        self._fail_before_running(RecoveryGivenUp(reason), invalid=False)

    def _fail_before_running(self, error: BaseException, invalid: bool) -> None:
        self._submission.invalid_reason = str(error) if invalid else None
        if isinstance(error, UserCodeError) and error.cause_name:
            self.exceptions.append(user_code_entry(error.cause_name, str(error), error.cause_trace))
        else:
            self._record_exception(error, None)
        self._transition(JobStatus.FAILED)
        self._finish()

    @property
    def prepared_splits(self) -> dict[str, int]:
        """How many input splits each source vertex was prepared with."""
        return self.splits.total()

    @property
    def split_progress(self) -> dict[str, SplitProgress]:
        return self.splits.progress

    def wait_until_running(self) -> asyncio.Future[Message]:
        """Resolves with Success once every source vertex has a subtask running, or a failure."""
        return self._submission.wait(self.status, self._root_cause())

    def _root_cause(self) -> str | None:
        return self.exceptions[0].stacktrace if self.exceptions else None

    # -- job status ---------------------------------------------------------------------------

    def _transition(self, new: JobStatus) -> None:
        old = self.status
        self.status = old.check_transition(new)
        now = time.time()
        self.status_timestamps[new] = now
        log.info("Job %s (%s) switched from %s to %s.", self.name, self.job_id, old.value, new.value)
        self.gateway.job_status_changed(
            self,
            JobStatusChanged(job_id=self.job_id, old_state=old.value, new_state=new.value, timestamp=now),
        )

    def cancel(self) -> str | None:
        """Start cancelling; returns a reason when the job cannot be cancelled."""
        if self.status.is_terminal:
            return f"job {self.job_id} is already {self.status.value}"
        if self.status in (JobStatus.CANCELLING, JobStatus.FAILING):
            return None
        # Cancelling during a restart: whatever still runs is being cancelled already,
        # and the pending restart sees CANCELLING and does nothing.
        self._transition(JobStatus.CANCELLING)
        self._cancel_all_executions()
        self._complete_if_all_stopped()
        return None

    def suspend(self, reason: str) -> None:
        """This JobManager lost its leadership: stop working on the job without ending it
        (SUSPENDED is only locally terminal); the new leader recovers it from the job
        store. Tasks are told to cancel; what they still report is refused (fencing)."""
        if self.status.is_terminal:
            return
        log.warning("Suspending job %s (%s): %s", self.name, self.job_id, reason)
        if self.graph is not None:
            self._tell_deployed_to_cancel()
        self._transition(JobStatus.SUSPENDED)
        self._finish()

    def restart(self, error: BaseException) -> None:
        """Supervision: a handler or callback of this job raised, so its state cannot be
        trusted. As Flink's global failover without restart: the job fails with that
        exception, its tasks are cancelled and its slots given back; never a stuck job."""
        if self.status.is_terminal:
            return
        log.error("Job %s (%s) fails: its JobMaster raised %r", self.name, self.job_id, error)
        self._record_exception(error, None, f"the JobMaster of this job failed: {error}")
        self._finalizing = False
        if self.status is JobStatus.INITIALIZING:
            self._transition(JobStatus.FAILED)
        else:
            if self.status.can_transition_to(JobStatus.FAILING):
                self._transition(JobStatus.FAILING)
            self._cancel_all_executions()  # may end the job FAILED already (nothing ran)
            if self.status.is_terminal:
                return
            self._transition(JobStatus.FAILED)  # the JobManager's job-end cleanup discards staged output
        self._finish()

    def _handle_task_failure(self, execution: Execution) -> None:
        """A subtask failed: restart what the failure handler says (scheduler/failover.py),
        or fail the job. A source subtask's new attempt continues with the splits no
        attempt has completed."""
        if self.status not in (JobStatus.CREATED, JobStatus.RUNNING):
            self._complete_if_all_stopped()  # already failing, cancelling or restarting
            return
        assert self.graph is not None
        result = self._failure_handler.task_failed(
            execution.vertex, list(self.graph.all_execution_vertices()), time.monotonic()
        )
        if not result.can_restart:
            self._transition(JobStatus.FAILING)
        elif not result.global_failover:
            log.info(
                "Restarting %s (region failover) in %.3g s.",
                execution.vertex.task_name_with_subtask,
                result.restart_delay,
            )
            self.gateway.schedule_once(result.restart_delay, self._restart_region, execution)
            return
        else:
            self._restart_delay = result.restart_delay
            self._transition(JobStatus.RESTARTING)
        self._cancel_all_executions()
        self._complete_if_all_stopped()

    def _restart_region(self, failed: Execution) -> None:
        vertex = failed.vertex
        if self.status is not JobStatus.RUNNING or vertex.current_execution is not failed:
            return  # the job moved on (cancelled, failed, fully restarted) meanwhile
        vertex.reset_for_new_execution()
        self.num_restarts += 1
        self._active_executions += 1
        if self._rerun_producers_of_lost_inputs(failed):
            return  # deployed once its producers have finished again (ScheduleOrUpdateConsumers)
        self._schedule(vertex)

    def _restart(self) -> None:
        """Every execution stopped and the delay passed: run the job again from its sources.

        Each subtask gets a new attempt; partitions and sink output of the old attempts
        are never read or published (new attempts commit over them), so a restart
        leaves no duplicates.
        """
        if self.status is not JobStatus.RESTARTING:
            return
        self._reset_all_executions()
        self.num_restarts += 1
        # Completed splits' chunks stay committed: the new attempts skip them.
        self.splits.restart()
        self._transition(JobStatus.RUNNING)
        self._schedule_all(sources_to_restart(self.graph))

    def _reset_all_executions(self) -> None:
        """A new attempt for every subtask (a full restart, a new round); their partitions
        are reported anew."""
        assert self.graph is not None
        for vertex in self.graph.all_execution_vertices():
            vertex.reset_for_new_execution()
        self._active_executions = self.graph.total_subtasks
        self._finished_executions = 0
        self._partition_locations.clear()
        self._partition_addresses.clear()
        self._lost_inputs.clear()
        self._declare_slot_usage()

    def _schedule_all(self, vertices: Iterable[ExecutionVertex]) -> None:
        for vertex in vertices:
            self._schedule(vertex)

    def _complete_if_all_stopped(self) -> None:
        if self._active_executions > 0 or self.status.is_terminal or self._finalizing:
            return
        if self.status is JobStatus.RESTARTING:
            self.gateway.schedule_once(self._restart_delay, self._restart)
            return
        if self.status is JobStatus.FAILING:
            self._transition(JobStatus.FAILED)
        elif self.status is JobStatus.CANCELLING:
            self._transition(JobStatus.CANCELED)
        elif self.status is JobStatus.RUNNING and self._finished_executions == self._total_subtasks:
            # Every subtask finished: publish what the sinks staged, then declare FINISHED
            # (or, for a continuous job, wait for more input).
            self._finalizing = True
            on_done = self._on_round_done if self.is_continuous and self._stop_request is None else self._on_finalized
            self.gateway.run_async(asyncio.to_thread(self._run_terminal_hooks, JobStatus.FINISHED), on_done)
            return
        else:
            return
        self._finish()  # the JobManager's job-end cleanup discards staged output (checkpoint_retention.py)

    def _run_terminal_hooks(self, status: JobStatus) -> None:
        """Runs in a worker thread: each vertex publishes (FINISHED) or discards its
        staged output, in the planner process (a vertex's hook is the job's code)."""
        self.gateway.planner.run(
            planner_tasks.run_terminal_hooks,
            self.job_graph.to_json(),
            self.config,
            self._prepared,
            self.data_namespace,
            status,
            self._round > 0,  # a continuation: the job published to its sinks before
            timeout=self.gateway.planner_timeout,
        )

    def _on_finalized(self, result: None, error: BaseException | None) -> None:
        if error is None and self._stop_request is not None:
            # Stop-with-savepoint: the output is published; now the savepoint, then FINISHED.
            request_id, target = self._stop_request
            self._stop_request = None
            try:
                self.coordinator.trigger(
                    True,
                    target,
                    terminal=True,
                    on_complete=lambda location, failure: self._stopped(request_id, location, failure),
                )
            except CheckpointFailure as failure:
                self._stopped(request_id, None, failure)
            return
        self._finalizing = False
        self._end(error)

    def _end(self, error: BaseException | None) -> None:
        """A running job ends: FINISHED, or FAILED with `error` (its output was published,
        or publishing it failed)."""
        if error is None:
            self._transition(JobStatus.FINISHED)
        else:
            self._record_exception(error, None)
            self._transition(JobStatus.FAILING)
            self._transition(JobStatus.FAILED)
        self._finish()

    def _finish(self) -> None:
        """The job is terminal: give back every slot and slot request it still holds."""
        self.coordinator.fail_all(f"job {self.job_id} is {self.status.value}")
        self._slots.release_all(self.graph.all_execution_vertices() if self.graph is not None else ())
        self._submission.answer_all(self.status, self._root_cause())

    @property
    def _total_subtasks(self) -> int:
        return self.graph.total_subtasks if self.graph is not None else 0

    # -- execution state changes (all go through here) --------------------------------------------

    def _set_execution_state(self, execution: Execution, state: ExecutionState, error: str | None = None) -> bool:
        old = execution.state
        if not execution.transition_state(state, error):
            return False
        _log_execution_transition(execution, old, error)
        if state is _E.RUNNING or state is _E.FINISHED:
            self._submission.vertex_running(execution.vertex.job_vertex.id, self.status, self._root_cause())
        if state.is_terminal:
            self._active_executions -= 1
            self._slots.release(execution.vertex, execution.attempt_id)
            self.coordinator.execution_stopped(execution.attempt_id, finished=state is _E.FINISHED)
            if state is _E.FINISHED:
                self._finished_executions += 1
                self.splits.attempt_finished(execution.attempt_id)
            else:
                vertex = execution.vertex
                self.splits.attempt_stopped(vertex.job_vertex.id, execution.attempt_id, vertex.subtask_index)
            if state is _E.FAILED:
                self._record_failure(execution, error or "unknown failure")
                self._handle_task_failure(execution)
            self._complete_if_all_stopped()
        return True

    def _fail_execution(self, execution: Execution, reason: str) -> None:
        self._set_execution_state(execution, _E.FAILED, reason)

    # -- exceptions ---------------------------------------------------------------------------------

    def _record_failure(self, execution: Execution, error: str) -> None:
        address = self.gateway.task_manager_address(execution.task_manager_id or "")
        task_name = execution.vertex.task_name_with_subtask
        self.exceptions.append(task_failure_entry(error, task_name, address, execution.task_manager_id))

    def _record_exception(self, exc: BaseException, task_name: str | None, message: str | None = None) -> None:
        self.exceptions.append(exception_entry(exc, task_name, message))

    @property
    def root_exception(self) -> ExceptionEntry | None:
        return self.exceptions[0] if self.exceptions else None


def _log_execution_transition(execution: Execution, old: ExecutionState, error: str | None) -> None:
    """As Flink's Execution logs it: every transition at debug, a failure with its cause
    (the one line that tells why a job restarted or failed) as a warning."""
    new = execution.state
    where = f" on {execution.task_manager_id}" if execution.task_manager_id else ""
    line = f"{execution.vertex.task_name_with_subtask} ({execution.attempt_id}) switched from {old.value}"
    line += f" to {new.value}{where}"
    if new is _E.FAILED:
        log.warning("%s with failure cause: %s", line, error or "unknown failure")
    else:
        log.debug("%s.", line)
