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
restart strategy allows; otherwise the other subtasks are cancelled and the job is
FAILED when all of them have stopped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from flink_runtime.checkpoint.coordinator import CheckpointCoordinator, CheckpointFailure
from flink_runtime.checkpoint.progress import STATE_CONFIG_KEY, ProgressTracker
from flink_runtime.configuration import Configuration
from flink_runtime.deployment import task_deployment_descriptor
from flink_runtime.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    JobStatus,
)
from flink_runtime.invokable import COMPLETED_SPLITS_KEY, Prepared, builtin_invokable
from flink_runtime.io.partitions import partition_dir
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.gateway import JobMasterGateway, SupervisedGateway
from flink_runtime.jobmanager.savepoint_requests import SavepointRequests
from flink_runtime.jobmanager.submission import SubmissionWaiters
from flink_runtime.operators.spark.chain import inputs_needed_after_stop
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.planner.tasks import UserCodeError
from flink_runtime.rpc.messages import (
    CancelTask,
    JobStatusChanged,
    Message,
    SubmitTask,
    TaskDeploymentDescriptor,
    TaskOperationResult,
)
from flink_runtime.rpc.supervision import supervise
from flink_runtime.scheduler.exception_history import (
    ExceptionEntry,
    exception_entry,
    task_failure_entry,
    user_code_entry,
)
from flink_runtime.scheduler.execution_slots import ExecutionSlotAllocator
from flink_runtime.scheduler.failover import ExecutionFailureHandler
from flink_runtime.scheduler.source_splits import SourceSplits, SplitProgress
from flink_runtime.scheduler.strategy import consumers_ready, sources_to_restart, vertices_to_start

if TYPE_CHECKING:
    from flink_runtime.scheduler.slotpool import PhysicalSlot

log = logging.getLogger(__name__)

_E = ExecutionState
_DEPLOYED = (_E.DEPLOYING, _E.INITIALIZING, _E.RUNNING)


class RecoveryGivenUp(RuntimeError):
    """The job was recovered too often without reaching RUNNING."""


class UnknownExecution(LookupError):
    """A task asked about an attempt that is not (or no longer) a live attempt of this job."""


def _supervised(method: Callable[..., None]) -> Callable[..., None]:
    """An entry point the JobManager calls outside a message about the job (slot pool
    events, start): what it raises is this job's failure (see JobMaster.restart)."""

    @functools.wraps(method)
    def call(self: JobMaster, *args: Any) -> None:
        try:
            method(self, *args)
        except Exception as error:
            supervise(self._supervisor, self, error)

    return call


class JobMaster:
    def __init__(self, job_graph: JobGraph, gateway: JobMasterGateway, cluster_config: Configuration) -> None:
        assert job_graph.job_id is not None
        self.job_graph = job_graph
        self.job_id: str = job_graph.job_id
        self.name = job_graph.name
        # Its callbacks run supervised: what they raise fails this job (restart below).
        self.gateway = SupervisedGateway(gateway, self)
        self._supervisor = gateway
        self.config = cluster_config.copy(job_graph.config)
        self.status = JobStatus.INITIALIZING
        self.status_timestamps: dict[JobStatus, float] = {JobStatus.INITIALIZING: time.time()}
        self.graph: ExecutionGraph | None = None
        self.exceptions: list[ExceptionEntry] = []
        self._slots = ExecutionSlotAllocator(
            self.job_id,
            lambda request_id: gateway.request_slot(self, request_id, []),
            gateway.release_slot,
            gateway.cancel_slot_request,
        )
        self._partition_locations: dict[str, str] = {}
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
        self.coordinator = CheckpointCoordinator(self, self.config)
        self.tracker = ProgressTracker(self, self.coordinator.checkpoints_dir)
        self.savepoint_requests = SavepointRequests(
            lambda request_id, status: gateway.savepoint_request_changed(self, request_id, status)
        )
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

    @_supervised
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

    def _vertex_config(self, vertex_id: str, subtask_index: int) -> dict[str, Any]:
        base = self.graph.vertices[vertex_id].job_vertex.config if self.graph is not None else {}
        extra = dict(self._prepared[vertex_id].config) if vertex_id in self._prepared else {}
        completed = self.splits.completed_by(vertex_id, subtask_index)
        if completed:
            # The chunks a new attempt of this subtask keeps; any other split chunk in its
            # partition was committed by an attempt that died before reporting it, and
            # that split is being (or was) redone elsewhere.
            extra[COMPLETED_SPLITS_KEY] = completed
        return {**base, **extra} if extra else base

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
            self._transition(JobStatus.FAILED)
            self.gateway.run_async(asyncio.to_thread(self._run_terminal_hooks, self.status))  # discard staged output
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
        self._active_executions += 1
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
        self._finish()
        self.gateway.run_async(asyncio.to_thread(self._run_terminal_hooks, self.status))

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
        if error is None:
            self._transition(JobStatus.FINISHED)
        else:
            self._record_exception(error, None)
            self._transition(JobStatus.FAILING)
            self._transition(JobStatus.FAILED)
        self._finish()

    # -- continuous sources: rounds ---------------------------------------------------------------
    #
    # A job with a continuous source (monitor_interval) runs in rounds. A round is one
    # batch run of the whole graph over the input files not processed yet; when it is
    # done its output is published and the job stays RUNNING, looking for new files
    # every monitor_interval. Keyed aggregations carry their state from round to round,
    # so their output is always the total over every file so far (and replaces the
    # previous round's); any other round's output adds to what earlier rounds published.
    # A batch job whose stop failed goes on the same way, for one more round.

    def _on_round_done(self, result: None, error: BaseException | None) -> None:
        self._finalizing = False
        if error is not None:
            self._record_exception(error, None)
            self._transition(JobStatus.FAILING)
            self._transition(JobStatus.FAILED)
            self._finish()
            return
        self._idle = True
        for vertex_id, progress in self.split_progress.items():
            files = self.prepared_split_files(vertex_id)
            self._processed_files.setdefault(vertex_id, set()).update(
                f for n in progress.completed for f in files.get(n, [])
            )
        self.tracker.start_new_round()
        self._poll_for_input()

    def _poll_for_input(self) -> None:
        if self.status is not JobStatus.RUNNING or not self._idle or self._stop_request is not None:
            return
        # A batch job gets here once, after a failed stop: it looks at once for what is left.
        intervals = [p.monitor_interval for p in self._prepared.values() if p.monitor_interval]
        self.gateway.schedule_once(
            min(intervals, default=0),
            lambda: self.gateway.run_async(asyncio.to_thread(self._scan_sources), self._on_scanned),
        )

    def _scan_sources(self) -> dict[str, Prepared]:
        """Worker thread: prepare the sources again (in the planner process), without the
        files already processed."""
        assert self.graph is not None
        return self.gateway.planner.run(
            planner_tasks.prepare_sources,
            self.job_graph.to_json(),
            self.config,
            {ejv.id: sorted(self.completed_files(ejv.id)) for ejv in self.graph.source_vertices()},
            self.data_namespace,
            timeout=self.gateway.planner_timeout,
        )

    def _on_scanned(self, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if self.status is not JobStatus.RUNNING or not self._idle or self._stop_request is not None:
            return
        if error is None and prepared is not None and any(p.splits for p in prepared.values()):
            self._start_round(prepared)
            return
        if self.is_continuous:
            if error is not None:
                log.warning("Scanning the input of job %s failed: %s", self.job_id, error)
            self._poll_for_input()
            return
        # A batch job going on after a failed stop: all its input is read and published.
        self._idle = False
        if error is None:
            self._transition(JobStatus.FINISHED)
        else:
            self._record_exception(error, None)
            self._transition(JobStatus.FAILING)
            self._transition(JobStatus.FAILED)
        self._finish()

    def _start_round(self, prepared: dict[str, Prepared]) -> None:
        assert self.graph is not None
        self._idle = False
        self._round += 1
        previous, self.data_namespace = self.data_namespace, f"{self.job_id}/round-{self._round}"
        self.gateway.release_partitions(self.job_id, previous)
        self._reset_all_executions()
        self._prepared.update(prepared)
        self.splits.new_round({vertex_id: p.splits for vertex_id, p in prepared.items()})
        splits = sum(len(p.splits) for p in prepared.values())
        log.info("Job %s: round %d over %d new input splits.", self.job_id, self._round, splits)
        self._schedule_all(sources_to_restart(self.graph))

    def _stopped(self, request_id: str, location: str | None, failure: BaseException | None) -> None:
        self.savepoint_requests.complete(request_id, location, failure)
        if failure is not None:
            # As in Flink, a stop whose savepoint failed leaves the job running. What the
            # stopped run read is published (as a stop does); the job goes on in rounds,
            # as a continuous job does: the next one reads the input this one did not.
            log.warning("Stop of job %s failed, the job keeps running: %s", self.job_id, failure)
            self._on_round_done(None, None)
            return
        self._finalizing = False
        self._transition(JobStatus.FINISHED)
        self._finish()

    def _finish(self) -> None:
        """The job is terminal: give back every slot and slot request it still holds."""
        self.coordinator.fail_all(f"job {self.job_id} is {self.status.value}")
        self._slots.release_all(self.graph.all_execution_vertices() if self.graph is not None else ())
        self._submission.answer_all(self.status, self._root_cause())

    @property
    def _total_subtasks(self) -> int:
        return self.graph.total_subtasks if self.graph is not None else 0

    # -- slots -------------------------------------------------------------------------------------

    def _declare_slot_usage(self) -> None:
        assert self.graph is not None
        self._slots.declare_usage(self.graph.all_execution_vertices())

    def _schedule(self, vertex: ExecutionVertex) -> None:
        execution = vertex.current_execution
        if not execution.transition_state(_E.SCHEDULED):
            return
        allocation_id = self._slots.allocate(vertex, execution.attempt_id)
        if allocation_id is not None:
            self._deploy(execution, allocation_id)

    @_supervised
    def on_slot_allocated(self, request_id: str, slot: PhysicalSlot) -> None:
        waiting = self._slots.slot_allocated(request_id, slot) if not self.status.is_terminal else None
        if waiting is None:
            self.gateway.release_slot(slot.allocation_id or request_id)
            return
        assert slot.allocation_id is not None and self.graph is not None
        for attempt_id in waiting:
            execution = self.graph.execution(attempt_id)
            if execution is not None and execution.state is _E.SCHEDULED:
                self._deploy(execution, slot.allocation_id)

    @_supervised
    def on_slot_request_timeout(self, request_id: str, timeout: float) -> None:
        reason = (
            f"NoResourceAvailableException: no TaskManager offered a slot within slot.request.timeout "
            f"({timeout:g} s). Start TaskManagers (flink-runtime taskmanager) and check that they "
            f"reach the JobManager at jobmanager.rpc.address:jobmanager.rpc.port."
        )
        self._fail_attempts(self._slots.request_timed_out(request_id), reason)

    @_supervised
    def on_allocation_lost(self, allocation_id: str, reason: str) -> None:
        """The TaskManager holding this allocation is gone: fail what ran in it."""
        self._fail_attempts(self._slots.allocation_lost(allocation_id), reason)

    def _fail_attempts(self, attempt_ids: list[str], reason: str) -> None:
        assert self.graph is not None
        for attempt_id in attempt_ids:
            execution = self.graph.execution(attempt_id)
            if execution is not None:
                self._fail_execution(execution, reason)

    # -- deployment ----------------------------------------------------------------------------

    def _deploy(self, execution: Execution, allocation_id: str) -> None:
        slot = self.gateway.slot_of(allocation_id)
        address = self.gateway.task_manager_address(slot.task_manager_id) if slot is not None else None
        if slot is None or address is None:
            self._fail_execution(execution, f"slot {allocation_id} vanished before deployment")
            return
        execution.assigned_resource = allocation_id
        execution.task_manager_id = slot.task_manager_id
        self._set_execution_state(execution, _E.DEPLOYING)
        descriptor = self._deployment_descriptor(execution, allocation_id, slot.slot_index)
        self.gateway.ask_task_manager(
            address,
            SubmitTask(descriptor=descriptor),
            lambda answer, error: self._on_task_submitted(execution, answer, error),
        )

    def _on_task_submitted(self, execution: Execution, answer: Any, error: BaseException | None) -> None:
        if error is not None:
            self._fail_execution(execution, f"could not deploy {execution.vertex.task_name_with_subtask}: {error}")
        elif isinstance(answer, TaskOperationResult) and not answer.success:
            self._fail_execution(
                execution, f"TaskManager refused {execution.vertex.task_name_with_subtask}: {answer.reason}"
            )

    def _deployment_descriptor(
        self, execution: Execution, allocation_id: str, slot_index: int
    ) -> TaskDeploymentDescriptor:
        vertex = execution.vertex
        vertex_id = vertex.job_vertex.id
        return task_deployment_descriptor(
            execution,
            job_id=self.job_id,
            job_name=self.name,
            jobmanager_id=self.gateway.jobmanager_id,
            allocation_id=allocation_id,
            slot_index=slot_index,
            data_namespace=self.data_namespace,
            vertex_config={
                **self._vertex_config(vertex_id, vertex.subtask_index),
                STATE_CONFIG_KEY: self.tracker.state_config(vertex_id, vertex.subtask_index, execution.attempt_id),
            },
            job_config=self.job_graph.config,
            libraries=self.job_graph.libraries,
            partition_locations=self._partition_locations,
            chunk_locations=self.tracker.chunks_for,
        )

    # -- messages from TaskManagers --------------------------------------------------------------

    def update_task_execution_state(
        self,
        execution_id: str,
        state: ExecutionState,
        error: str | None,
        state_handle: dict[str, Any] | None = None,
    ) -> bool:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None:
            return False
        if state is _E.FINISHED and state_handle is not None:
            self.tracker.final_states[(execution.vertex.job_vertex.id, execution.vertex.subtask_index)] = state_handle
        return self._set_execution_state(execution, state, error)

    def request_next_input_split(
        self, execution_id: str, host: str | None, completed_split: int | None = None
    ) -> InputSplit | None:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None or execution.is_terminal:
            # Told "no split left", such a task would commit what it has as if complete.
            state = "unknown" if execution is None else execution.state.value
            raise UnknownExecution(f"execution {execution_id} of job {self.job_id} is {state}: it must stop")
        if self.status is not JobStatus.RUNNING or execution.state is _E.CANCELING:
            return None  # being cancelled: the task stops, and its partitions are never used
        vertex = execution.vertex
        stopping = self._stop_request is not None
        return self.splits.next_split(
            vertex.job_vertex.id, execution_id, vertex.subtask_index, host, completed_split, stopping
        )

    def schedule_or_update_consumers(self, partition_id: str, location: str, execution_id: str) -> str | None:
        """A producer committed a partition; deploy consumers whose inputs are now complete."""
        partition = self.graph.partition(partition_id) if self.graph is not None else None
        if partition is None:
            return f"unknown partition {partition_id}"
        producer = partition.producer.current_execution
        if producer.attempt_id != execution_id or producer.state not in _DEPLOYED:
            return (
                f"partition {partition_id} reported by execution {execution_id}, which is not the running "
                f"attempt of its producer ({producer.attempt_id}, {producer.state.value})"
            )
        self._partition_locations[partition_id] = location
        if partition.mark_finished() and self.status is JobStatus.RUNNING:
            self._schedule_all(consumers_ready(partition))
        return None

    # -- execution state changes (all go through here) --------------------------------------------

    def _set_execution_state(self, execution: Execution, state: ExecutionState, error: str | None = None) -> bool:
        if not execution.transition_state(state, error):
            return False
        if state is _E.RUNNING or state is _E.FINISHED:
            self._submission.vertex_running(execution.vertex.job_vertex.id, self.status, self._root_cause())
        if state.is_terminal:
            self._active_executions -= 1
            self._slots.release(execution.vertex, execution.attempt_id)
            self.coordinator.execution_stopped(execution.attempt_id)
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

    def _cancel_all_executions(self) -> None:
        assert self.graph is not None
        for vertex in self.graph.all_execution_vertices():
            execution = vertex.current_execution
            if execution.state in _DEPLOYED:
                self._set_execution_state(execution, _E.CANCELING)
                address = self.gateway.task_manager_address(execution.task_manager_id or "")
                if address is None:
                    self._set_execution_state(execution, _E.CANCELED)
                    continue
                self.gateway.ask_task_manager(
                    address,
                    CancelTask(execution_id=execution.attempt_id),
                    lambda answer, error, execution=execution: self._on_cancel_answer(execution, answer, error),
                )
            elif not execution.is_terminal and execution.state is not _E.CANCELING:
                self._set_execution_state(execution, _E.CANCELED)

    def _on_cancel_answer(self, execution: Execution, answer: Any, error: BaseException | None) -> None:
        # A TaskManager that is gone or no longer knows the task cannot report it
        # CANCELED, so the JobManager concludes it here.
        if error is not None or (isinstance(answer, TaskOperationResult) and not answer.success):
            self._set_execution_state(execution, _E.CANCELED)

    # -- savepoints and checkpoints -------------------------------------------------------------------

    def trigger_savepoint(self, target_directory: str | None, cancel_job: bool, request_id: str | None = None) -> str:
        """Start a savepoint; returns its request id (`request_id`, the client's triggerId,
        or a new one). CheckpointFailure if it cannot start."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)

        def done(location: str | None, failure: BaseException | None) -> None:
            self.savepoint_requests.complete(request_id, location, failure)
            if failure is None and cancel_job:
                self.cancel()

        self.coordinator.trigger(True, target_directory, on_complete=done)
        return request_id

    def stop_with_savepoint(self, target_directory: str | None, drain: bool, request_id: str | None = None) -> str:
        """Stop handing out splits; when in-flight work is done and the output published,
        write a savepoint and end FINISHED. `drain` changes nothing for batch pipelines:
        there are no windows or timers to flush."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)
        self._stop_request = (request_id, target_directory)
        # Aggregations deployed from now on keep their keyed state, so the job resumed
        # from this savepoint continues their totals.
        self.tracker.snapshot_all_state = True
        if self._idle:  # a continuous job between rounds: nothing runs, stop right away
            self._idle = False
            self._finalizing = True
            self._on_finalized(None, None)
        return request_id

    def accepts_checkpoints(self) -> bool:
        # Not once a stop-with-savepoint began (or the job is publishing): sources that end
        # because of the stop have not read all their input, and a checkpoint now would
        # record them as finished; a job recovered from it would never read the rest. The
        # latest checkpoint from before the stop is where a recovery starts.
        return self.status is JobStatus.RUNNING and self._stop_request is None and not self._finalizing

    def running_task_addresses(self) -> dict[str, str]:
        """Running executions and their TaskManagers' addresses: who must acknowledge."""
        running: dict[str, str] = {}
        for vertex in self.graph.all_execution_vertices() if self.graph is not None else ():
            execution = vertex.current_execution
            if execution.state in (_E.INITIALIZING, _E.RUNNING):
                address = self.gateway.task_manager_address(execution.task_manager_id or "")
                if address is not None:
                    running[execution.attempt_id] = address
        return running

    def vertex_and_subtask(self, execution_id: str) -> tuple[str | None, int]:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None:
            return None, -1
        return execution.vertex.job_vertex.id, execution.vertex.subtask_index

    def progress_view(self, checkpoint_id: int, is_savepoint: bool, terminal: bool) -> Callable[[], Any]:
        return self.tracker.view(checkpoint_id, is_savepoint, terminal)

    def checkpoint_completed(
        self, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """Record it in the job store (recovery from the latest checkpoint), then delete the
        folders of the checkpoints it subsumes."""
        self.gateway.checkpoint_completed(self, checkpoint_id, location, is_savepoint, size, subsumed)

    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]:
        prepared = self._prepared.get(vertex_id)
        if prepared is None:
            return {}
        return {
            split.split_number: list(split.payload.get("files", []))
            for split in prepared.splits
            if isinstance(split.payload, dict)
        }

    def completed_files(self, vertex_id: str) -> set[str]:
        """Files processed before the current round: restored from a savepoint, or by
        earlier rounds of a continuous job."""
        restored = self.tracker.restored_vertex(vertex_id)
        files = set(restored.completed_files) if restored is not None else set()
        return files | self._processed_files.get(vertex_id, set())

    def partition_location(self, partition_id: str) -> str | None:
        """Where a partition's chunks are; a running producer's is derived from the
        shared data directory (it reports its location only when it finishes)."""
        if partition_id in self._partition_locations:
            return self._partition_locations[partition_id]
        result_id, _, number = partition_id.rpartition("#")
        return partition_dir(self._data_dir, self.data_namespace, result_id, int(number))

    def inputs_needed_after_stop(self) -> set[str]:
        return inputs_needed_after_stop(self.job_graph)

    def sink_staging_root(self, vertex_id: str) -> str | None:
        if self.graph is None:
            return None
        job_vertex = self.graph.vertices[vertex_id].job_vertex
        # Only built-in invokables stage output, and only they are imported here: a job's
        # own classes are never imported into the JobManager.
        invokable = builtin_invokable(job_vertex.invokable)
        return invokable.staged_output_root(job_vertex, self.data_namespace) if invokable is not None else None

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
