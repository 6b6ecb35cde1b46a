"""The JobMaster: one job's ExecutionGraph, and the shell around its scheduling.

Not an actor of its own: the JobManager's mailbox drives it (so its state is touched
only there); it asks the JobManager, its `JobMasterGateway`, for slots and RPCs.
Scheduling is lazy from the sources, as Flink's batch scheduling (scheduler/strategy.py):
sources are deployed first, a consumer once every partition it reads is finished
(ScheduleOrUpdateConsumers), and when every subtask FINISHED the output is published.

As Flink's DefaultScheduler, the JobMaster is composed, by its constructor, of parts
that own their state and each have a test of their own:

  scheduler/job_scheduling.py  JobScheduling: the decisions, no I/O (the job's status,
                               what a failure restarts, when the job ends, what a
                               stop needs); it returns actions this shell executes
  execution_deployment.py      ExecutionDeployer: slots and their events, SubmitTask, CancelTask
  task_reports.py              PartitionRegistry: finished partitions, lost inputs;
                               TaskReports: the answers to what TaskManagers report
  job_checkpoints.py           JobCheckpointing: savepoint/stop/checkpoint requests,
                               the CheckpointedJob view of the coordinator and tracker
  rounds.py                    ContinuousRounds: scans for new input, starts each round
  job_restarts.py              JobRestarts: carries out the restarts the scheduling decides
  scheduler/adaptive_parallelism.py  AdaptiveParallelism: a vertex's parallelism from its input
  job_planning.py              JobPlanning: the job's code, run in the planner process

This class routes what reaches the job (task reports, slot events, timers, requests)
to them and executes the actions the scheduling returns (`_execute`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from flink_runtime.configuration import Configuration, CoreOptions, JobManagerOptions
from flink_runtime.executiongraph import Execution, ExecutionGraph, ExecutionState, ExecutionVertex, JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.errors import JobAlreadyEnded
from flink_runtime.jobmanager.execution_deployment import (
    ExecutionDeployer,
    IdleSlotSettings,
    deployment_descriptor,
    log_transition,
)
from flink_runtime.jobmanager.gateway import JobMasterGateway, SupervisedGateway, supervised
from flink_runtime.jobmanager.job_checkpoints import JobCheckpointing
from flink_runtime.jobmanager.job_planning import JobPlanning
from flink_runtime.jobmanager.job_restarts import JobRestarts
from flink_runtime.jobmanager.rounds import ContinuousRounds
from flink_runtime.jobmanager.submission import SubmissionWaiters
from flink_runtime.jobmanager.task_reports import PartitionRegistry, TaskReports, UnknownExecution
from flink_runtime.planner.user_code import UserCodeError
from flink_runtime.rpc.messages import JobStatusChanged, Message, TaskDeploymentDescriptor
from flink_runtime.scheduler import job_scheduling as js
from flink_runtime.scheduler.adaptive_parallelism import AdaptiveParallelism
from flink_runtime.scheduler.exception_history import (
    ExceptionEntry,
    exception_entry,
    task_failure_entry,
    user_code_entry,
)
from flink_runtime.scheduler.failover import ExecutionFailureHandler
from flink_runtime.scheduler.slot_sharing import slot_profiles
from flink_runtime.scheduler.slotpool import PhysicalSlot
from flink_runtime.scheduler.source_splits import SourceSplits, SplitProgress
from flink_runtime.scheduler.strategy import vertices_to_start
from flink_runtime.security.paths import allowed_directories

log = logging.getLogger(__name__)

_E = ExecutionState

__all__ = ["JobMaster", "RecoveryGivenUp", "UnknownExecution"]


class RecoveryGivenUp(RuntimeError):
    """The job was recovered too often without reaching RUNNING."""


class JobMaster:
    """One job: its ExecutionGraph, its parts (see the module docstring), and the entry
    points the JobManager calls."""

    def __init__(
        self, job_graph: JobGraph, gateway: JobMasterGateway[JobMaster], cluster_config: Configuration
    ) -> None:
        assert job_graph.job_id is not None
        self.job_graph = job_graph
        self.job_id: str = job_graph.job_id
        self.name = job_graph.name
        # Its callbacks run supervised: what they raise fails this job (restart below).
        self.gateway = SupervisedGateway(gateway, self)
        self.supervisor = gateway
        self.config = cluster_config.copy(job_graph.config)
        self._allowed = allowed_directories(self.config)  # parsed once, not per deployment
        self.status_timestamps: dict[JobStatus, float] = {JobStatus.INITIALIZING: time.time()}
        self.graph: ExecutionGraph | None = None
        self.exceptions: list[ExceptionEntry] = []
        self.is_continuous = False
        self.data_namespace = job_graph.job_id
        self.planning = JobPlanning(job_graph, self.config, self.gateway, lambda: not self.status.is_terminal)
        self.splits = SourceSplits()
        self._submission = SubmissionWaiters(self.job_id)
        self.scheduling = js.JobScheduling(ExecutionFailureHandler.from_config(self.config))
        self.adaptive = AdaptiveParallelism(self.config, lambda: self.graph, self.scheduling.subtasks_removed)
        data_dir = self.config.get(CoreOptions.TMP_DIRS)
        self.partitions = PartitionRegistry(
            data_dir, lambda: self.data_namespace, lambda: self.graph, self.gateway.task_manager_address
        )
        self.deployer = ExecutionDeployer(
            self.job_id,
            self.gateway,
            lambda request_id, profile: gateway.request_slot(self, request_id, [], profile),
            self._deployment_descriptor,
            self._set_execution_state,
            lambda attempt_id: self.graph.execution(attempt_id) if self.graph is not None else None,
            slot_profiles(job_graph),
            IdleSlotSettings(
                self.config.get_seconds(JobManagerOptions.SLOT_IDLE_TIMEOUT), gateway.slot_requests_waiting
            ),
        )
        self.checkpointing = JobCheckpointing(
            self,
            job_graph,
            self.config,
            self.gateway,
            self.partitions,
            lambda request_id, status: gateway.savepoint_request_changed(self, request_id, status),
            lambda *completed: gateway.checkpoint_completed(self, *completed),
        )
        self.rounds = ContinuousRounds(
            self, self.gateway, self.planning, self.splits, self.checkpointing, lambda: self.graph
        )
        # What the JobManager and the REST API reach of the checkpointing side.
        checkpointing = self.checkpointing
        self.coordinator, self.tracker = checkpointing.coordinator, checkpointing.tracker
        self.savepoint_requests = checkpointing.savepoint_requests
        self.checkpoint_requests = checkpointing.checkpoint_requests
        self.reports = TaskReports(
            self,
            self.partitions,
            checkpointing.tracker.final_states,
            self.splits,
            self._set_execution_state,
            self.deployer.schedule_all,
            self.deployer.fail_and_cancel,
            self.adaptive.decide,
        )
        self.restarts = JobRestarts(
            lambda: self.graph,
            self.scheduling,
            self.reports,
            self.splits,
            self.partitions,
            self.deployer,
            self._execute,
        )
        self.run_from_sources = self.restarts.run_from_sources  # rounds.py: a new round
        self.processed_files = self.rounds.processed_files
        self.task_manager_address = self.gateway.task_manager_address
        # What TaskManagers report (schedule_or_update_consumers below: a supervised entry).
        self.update_task_execution_state = self.reports.update_task_execution_state
        self.request_next_input_split = self.reports.request_next_input_split
        self.trigger_savepoint = checkpointing.trigger_savepoint
        self.trigger_checkpoint = checkpointing.trigger_checkpoint
        self.stop_with_savepoint = checkpointing.stop_with_savepoint
        self.accepts_checkpoints = checkpointing.accepts_checkpoints
        self.prepared_split_files = checkpointing.prepared_split_files

    # -- what the others read ---------------------------------------------------------------------

    @property
    def status(self) -> JobStatus:
        return self.scheduling.status

    @property
    def num_restarts(self) -> int:
        """Failovers so far, regional and full (Flink's numRestarts)."""
        return self.scheduling.num_restarts

    @property
    def finalizing(self) -> bool:
        return self.scheduling.finalizing

    @property
    def stopping(self) -> bool:
        return self.checkpointing.stopping

    @property
    def prepared(self) -> dict[str, Prepared]:
        return self.planning.prepared

    @property
    def prepared_splits(self) -> dict[str, int]:
        """How many input splits each source vertex was prepared with."""
        return self.splits.total()

    @property
    def split_progress(self) -> dict[str, SplitProgress]:
        return self.splits.progress

    @property
    def root_exception(self) -> ExceptionEntry | None:
        return self.exceptions[0] if self.exceptions else None

    def _root_cause(self) -> str | None:
        return self.exceptions[0].stacktrace if self.exceptions else None

    def wait_until_running(self) -> asyncio.Future[Message]:
        """Resolves with Success once every source vertex has a subtask running, or a failure."""
        return self._submission.wait(self.status, self._root_cause())

    # -- lifecycle ---------------------------------------------------------------------------

    @supervised
    def start(self) -> None:
        """Build the ExecutionGraph, then prepare the vertices off the mailbox (input
        splits, plan checks: file listings and Spark analysis take time)."""
        try:
            self.graph = graph = ExecutionGraph(
                self.job_graph, self.config.get(JobManagerOptions.EXECUTION_ATTEMPTS_HISTORY_SIZE)
            )
        except Exception as exc:
            self._fail_before_running(exc, invalid=True)
            return
        self.scheduling.graph_built(graph.total_subtasks)
        self._submission.expect_sources({ejv.id for ejv in graph.source_vertices()})
        self.gateway.run_async(asyncio.to_thread(self._prepare_vertices), self._on_prepared)

    def _prepare_vertices(self) -> dict[str, Prepared]:
        """Runs in a worker thread. The job's code (invokables, transforms, libraries) is
        imported and its plan resolved in the planner process, never here."""
        assert self.graph is not None
        restored = self.checkpointing.load_restore(set(self.graph.vertices))
        return self.planning.prepare_job(restored, self.data_namespace)

    def _on_prepared(self, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if self.status is not JobStatus.INITIALIZING:
            return  # cancelled while preparing
        if error is not None or prepared is None:
            self._fail_before_running(error or RuntimeError("preparation failed"), invalid=True)
            return
        assert self.graph is not None
        self.planning.prepared = prepared
        self.is_continuous = self.planning.is_continuous
        graph = self.graph
        self.splits.start({v: p.splits for v, p in prepared.items() if graph.vertices[v].inputs == [] or p.splits})
        self._execute([self.scheduling.to(JobStatus.CREATED)])
        self.deployer.declare_usage(graph.all_execution_vertices())
        self.adaptive.decide_restored(self.tracker.restored_parallelism())
        self.adaptive.decide_sources({} if self.tracker.restore else self.planning.split_counts())
        self.checkpointing.apply_restore(self._set_execution_state)
        self._execute([self.scheduling.to(JobStatus.RUNNING)])
        self.coordinator.start_periodic()
        self.adaptive.decide_ready()  # vertices whose inputs a savepoint restored whole
        self.deployer.schedule_all(vertices_to_start(graph))
        self._check_completion()  # a savepoint may have restored every subtask as finished

    def give_up_recovery(self, reason: str) -> None:
        """Instead of start(): the JobManager will not recover this job again; it ends FAILED."""
        self._fail_before_running(RecoveryGivenUp(reason), invalid=False)

    def _fail_before_running(self, error: BaseException, invalid: bool) -> None:
        self._submission.invalid_reason = str(error) if invalid else None
        if isinstance(error, UserCodeError) and error.cause_name:
            self.exceptions.append(user_code_entry(error.cause_name, str(error), error.cause_trace))
        else:
            self.exceptions.append(exception_entry(error))
        self._execute(self.scheduling.global_failure((), time.monotonic()))

    def cancel(self) -> None:
        """Start cancelling (nothing to do while it cancels or fails already);
        JobAlreadyEnded once the job is terminal."""
        if self.status.is_terminal:
            raise JobAlreadyEnded(f"job {self.job_id} is already {self.status.value}")
        self._execute(self.scheduling.cancel())

    def suspend(self, reason: str) -> None:
        """This JobManager lost its leadership: stop working on the job without ending it
        (SUSPENDED is only locally terminal); the new leader recovers it from the job
        store. Tasks are told to cancel; what they still report is refused (fencing)."""
        if self.status.is_terminal:
            return
        log.warning("Suspending job %s (%s): %s", self.name, self.job_id, reason)
        self.deployer.tell_deployed_to_cancel(self._vertices())
        self._execute([self.scheduling.to(JobStatus.SUSPENDED)])
        self._finish()

    def restart(self, error: BaseException) -> None:
        """Supervision: a handler or callback of this job raised, so its state cannot be
        trusted. A global failure (Flink's global failover): every subtask is cancelled
        and the job restarts from its sources if the restart strategy allows, otherwise
        it fails with that exception; its slots go back either way, never a stuck job."""
        if self.status.is_terminal:
            return
        log.error("Job %s (%s) fails globally: its JobMaster raised %r", self.name, self.job_id, error)
        self.exceptions.append(exception_entry(error, None, f"the JobMaster of this job failed: {error}"))
        self._execute(self.scheduling.global_failure(list(self._vertices()), time.monotonic()))

    # -- what TaskManagers report -------------------------------------------------------------------

    def schedule_or_update_consumers(
        self, partition_id: str, location: str, execution_id: str, data_address: str = "", size_bytes: int = -1
    ) -> None:
        """A producer committed a partition; deploy consumers whose inputs are now complete.
        TaskReportRefused if the report is not of the partition's running producer."""
        self.reports.schedule_or_update_consumers(partition_id, location, execution_id, data_address, size_bytes)

    def executions_on(self, task_manager_id: str) -> dict[str, ExecutionState]:
        """This job's current attempts on a TaskManager that have not ended, by attempt id."""
        return self.reports.executions_on(task_manager_id) if self.scheduling.active > 0 else {}

    @supervised
    def fail_execution(self, execution_id: str, reason: str) -> None:
        """Fail a current attempt the JobManager found lost (its TaskManager is gone, or no
        longer runs it); the restart strategy decides what follows."""
        self.reports.fail_execution(execution_id, reason)

    # -- slot pool events (the ExecutionDeployer deploys into the slot or fails the attempts) --

    @supervised
    def on_slot_allocated(self, request_id: str, slot: PhysicalSlot) -> None:
        self.deployer.slot_allocated(request_id, slot, accept=not self.status.is_terminal)

    @supervised
    def on_slot_request_timeout(self, request_id: str, timeout: float) -> None:
        self.deployer.request_timed_out(request_id, timeout)

    @supervised
    def on_slot_request_failed(self, request_id: str, reason: str) -> None:
        """No TaskManager could ever hold the request (NoResourceAvailableException)."""
        self.deployer.request_failed(request_id, reason)

    @supervised
    def on_allocation_lost(self, allocation_id: str, reason: str) -> None:
        """The TaskManager holding this allocation is gone: fail what ran in it."""
        self.deployer.allocation_lost(allocation_id, reason)

    @supervised
    def release_idle_slots(self, now: float, everything: bool = False) -> None:
        """The ResourceManager's timer: idle slots past slot.idle.timeout (or all) go back."""
        self.deployer.slots.release_idle(now, everything)

    def stop_while_idle(self) -> bool:
        """A stop reached the job: between rounds nothing runs, so its savepoint now."""
        if not self.rounds.take_idle():
            return False
        self._execute(self.scheduling.stop_while_idle())
        return True

    # -- deployment -----------------------------------------------------------------------------

    def _deployment_descriptor(
        self, execution: Execution, allocation_id: str, slot_index: int
    ) -> TaskDeploymentDescriptor:
        vertex = execution.vertex
        return deployment_descriptor(
            execution,
            allocation_id,
            slot_index,
            self.job_graph,
            jobmanager_id=self.gateway.jobmanager_id,
            data_namespace=self.data_namespace,
            prepared=self.planning.prepared.get(vertex.job_vertex.id),
            completed_splits=self.splits.completed_by(vertex.job_vertex.id, vertex.subtask_index),
            tracker=self.tracker,
            partitions=self.partitions,
            allowed=self._allowed,
        )

    def _vertices(self) -> Iterable[ExecutionVertex]:
        return self.graph.all_execution_vertices() if self.graph is not None else ()

    # -- execution state changes (all go through here) --------------------------------------------

    def _set_execution_state(self, execution: Execution, state: ExecutionState, error: str | None = None) -> bool:
        old = execution.state
        if not execution.transition_state(state, error):
            return False
        log_transition(execution, old, error)
        if state is _E.RUNNING or state is _E.FINISHED:
            self._submission.vertex_running(execution.vertex.job_vertex.id, self.status, self._root_cause())
        if state.is_terminal:
            self.scheduling.execution_stopped(finished=state is _E.FINISHED)
            self.deployer.release(execution.vertex, execution.attempt_id)
            self.coordinator.execution_stopped(execution.attempt_id, finished=state is _E.FINISHED)
            vertex = execution.vertex
            if state is _E.FINISHED:
                self.splits.attempt_finished(execution.attempt_id, vertex.job_vertex.id)
            else:
                self.splits.attempt_stopped(vertex.job_vertex.id, execution.attempt_id, vertex.subtask_index)
            if state is _E.FAILED:
                address = self.gateway.task_manager_address(execution.task_manager_id or "")
                entry = task_failure_entry(
                    error or "unknown failure", vertex.task_name_with_subtask, address, execution.task_manager_id
                )
                self.exceptions.append(entry)
                producers = self.partitions.take_lost_producers(execution.attempt_id)
                self._execute(
                    self.scheduling.task_failed(
                        vertex, execution.attempt_id, list(self._vertices()), producers, time.monotonic()
                    )
                )
            if state is not _E.FINISHED:
                self.reports.producer_stopped(execution)
            self._check_completion()
        return True

    # -- executing the scheduling's actions -------------------------------------------------------

    def _execute(self, actions: Iterable[js.Action]) -> None:
        """Carry out what the scheduling decided, in order. An action may feed the
        scheduling a new stimulus (cancelling ends executions), whose actions run first."""
        for action in actions:
            match action:
                case js.Transition(old, new):
                    now = time.time()
                    self.status_timestamps[new] = now
                    log.info("Job %s (%s) switched from %s to %s.", self.name, self.job_id, old.value, new.value)
                    event = JobStatusChanged(
                        job_id=self.job_id, old_state=old.value, new_state=new.value, timestamp=now
                    )
                    self.gateway.job_status_changed(self, event)
                case js.CancelAll():
                    self.deployer.cancel_all(self._vertices())
                    self._check_completion()
                case js.ScheduleRegionRestart(failed_attempt, vertices, delay):
                    log.info("Restarting %d subtask(s) (region failover) in %.3g s.", len(vertices), delay)
                    self.gateway.schedule_once(delay, self.restarts.region_restart_due, failed_attempt, vertices)
                case js.ScheduleRestart(delay):
                    self.gateway.schedule_once(delay, lambda: self._execute(self.scheduling.restart_due()))
                case js.RestartVertices(reset, rerun):
                    self.restarts.restart_vertices(reset, rerun)
                case js.RestartAll():
                    self.splits.restart()  # completed splits' chunks stay committed: new attempts skip them
                    self.restarts.run_from_sources()
                case js.Publish(next_round):
                    on_done = self._on_round_published if next_round else self._on_published
                    hooks = asyncio.to_thread(self.run_terminal_hooks, JobStatus.FINISHED)
                    self.gateway.run_async(hooks, on_done)
                case js.TriggerStopSavepoint():
                    self.rounds.take_idle()  # a continuous job's stop: no round starts meanwhile
                    self.checkpointing.write_stop_savepoint(
                        lambda failed: self._execute(self.scheduling.stop_savepoint_done(failed))
                    )
                case js.AwaitInput():
                    self.tracker.start_new_round()
                    self.rounds.round_done()
                    self.coordinator.checkpoint_now()
                case js.ResumeRounds():
                    # What the stopped run read is published (as a stop does); the job goes on
                    # in rounds, as a continuous job does: the next reads what this one did not.
                    self._execute(self.scheduling.round_done(failed=False, stopping=False))
                case js.ConcludeFailed():
                    self._execute(self.scheduling.conclude_failed())
                case js.Finish():
                    self._finish()

    def _check_completion(self) -> None:
        self._execute(self.scheduling.check_completion(self.is_continuous, self.stopping))

    def run_terminal_hooks(self, status: JobStatus) -> None:
        """Each vertex publishes (FINISHED) or discards its staged output, in the planner
        process. Runs in a worker thread (also from the JobManager's job-end cleanup)."""
        continuation = self.rounds.published > 0
        self.planning.run_terminal_hooks(status, self.data_namespace, continuation, self.is_continuous)

    def forget(self) -> None:
        """Worker thread, once the job's end is stored: what only a recovery needed goes."""
        self.planning.forget_job(self.data_namespace)

    def _on_published(self, result: None, error: BaseException | None) -> None:
        if error is not None:
            self.exceptions.append(exception_entry(error))
        else:
            self.rounds.output_published()
        self._execute(self.scheduling.published(error is not None, self.stopping))

    def _on_round_published(self, result: None, error: BaseException | None) -> None:
        if error is None:
            self.rounds.output_published()
        elif self.status is JobStatus.RUNNING:
            self.exceptions.append(exception_entry(error))
        self._execute(self.scheduling.round_done(error is not None, self.stopping))

    def end(self, error: BaseException | None) -> None:
        """A running job ends (rounds.py: a batch job's last round after a failed stop)."""
        if error is not None:
            self.exceptions.append(exception_entry(error))
        self._execute(self.scheduling.end(error is not None))

    def _finish(self) -> None:
        """The job is terminal: give back every slot and slot request it still holds."""
        self.checkpointing.job_ended(self.status)
        self.deployer.release_all(self._vertices())
        self._submission.answer_all(self.status, self._root_cause())
