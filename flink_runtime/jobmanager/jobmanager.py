"""The JobManager: jobs, their JobMasters, the job store and the JobStatusChanged log.

It plays the roles Flink splits into Dispatcher (accepts jobs, keeps finished ones
queryable), ResourceManager (registers TaskManagers, watches their heartbeats, owns
the slots) and hosts one JobMaster per running job, all inside one actor. It is an
actor shell composed, by its constructor, of components that each own their state and
see the JobManager only through a small Protocol of their module:

  resource_manager.py  ResourceManager: TaskManagers, heartbeats, reconciliation, slots
  job_persistence.py   JobPersistence: the job store and its writer thread, recovery of
                       running jobs, retention of finished ones (`archived`)
  leadership.py        Leadership: several JobManagers on one job store: leader
                       election, lease, store lock; tells the JobManager on grant/revoke
  restful_gateway.py   RestfulGateway: the REST API's one door into the JobManager
                       (typed methods answering records, typed errors)
  operations.py        JobOperations: savepoints, stops and checkpoints on request,
                       checkpoint statistics (behind the RestfulGateway)
  checkpoint_retention.py  JobEndCleanup: the end of a job: checkpoints kept or
                       discarded, keyed state, staged output and partitions removed
  task_fencing.py      TaskFencing: whether a task's message is this run's, and its job
  spark_session.py     JobManagerSpark: the JobManager's SparkSession (plan checks, paths)
  submission.py        validate_submission: what this cluster accepts of a JobGraph
  resourcemanager/     ActiveResourceManager (resourcemanager.driver process or docker):
                       starts TaskManagers for waiting slot requests, stops idle ones
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.blob import BlobStore
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.jobgraph.jobgraph import JobGraph, new_job_id
from flink_runtime.jobgraph.validation import InvalidJobGraph, decode_job_graph
from flink_runtime.jobmanager.checkpoint_retention import JobEndCleanup
from flink_runtime.jobmanager.errors import JobAlreadyEnded, TaskReportRefused
from flink_runtime.jobmanager.events import JobEventLog
from flink_runtime.jobmanager.job_persistence import JobPersistence
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.jobmanager.jobstore import JobRecord, JobStore
from flink_runtime.jobmanager.leadership import LeaderInfo, Leadership, store_idle_timeout
from flink_runtime.jobmanager.operations import JobOperations
from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager, ResourceManager
from flink_runtime.jobmanager.restful_gateway import RestfulGateway
from flink_runtime.jobmanager.spark_session import JobManagerSpark
from flink_runtime.jobmanager.submission import validate_submission
from flink_runtime.jobmanager.task_fencing import JobTaskMessage, TaskFencing
from flink_runtime.jobmanager.task_reports import UnknownExecution
from flink_runtime.planner import InProcessPlanner, Planner, PlannerPool
from flink_runtime.resourcemanager import ActiveResourceManager
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeCheckpoint,
    AcknowledgeTaskExecutionStates,
    CancelJob,
    CancellationFailure,
    CancellationSuccess,
    DeclineCheckpoint,
    DisconnectTaskManager,
    JobStatusChanged,
    JobSubmissionFailure,
    Message,
    NextInputSplit,
    RefuseRegistration,
    RegisterTaskManager,
    RequestNextInputSplit,
    RpcError,
    ScheduleOrUpdateConsumers,
    SubmitJob,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)
from flink_runtime.rpc.service import RpcService
from flink_runtime.rpc.transport import RpcTransport
from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slotpool import PhysicalSlot
from flink_runtime.security.cluster_secret import cluster_secret as resolve_cluster_secret

log = logging.getLogger(__name__)
_EXECUTION_STATES = {state.value: state for state in ExecutionState}  # ExecutionState(name), as a look-up

# How often libraries no job refers to are looked for (blob.expiration-time says when they go).
BLOB_CLEANUP_INTERVAL = 60.0
# How often a JobManager without standbys checks it still holds its job store (PostgreSQL).
STORE_LOCK_CHECK_INTERVAL = 5.0


class JobManager(RpcEndpoint):
    def __init__(
        self,
        config: Configuration,
        embedded: bool = False,
        cluster_secret: str = "",
        *,
        rpc: RpcTransport | None = None,
        planner: Planner | None = None,
    ) -> None:
        """embedded: hosted in a MiniCluster process beside its TaskManagers.
        cluster_secret: the RPC's (a MiniCluster's own); by default the configured one, or
        on loopback this user's (security/cluster_secret.py). RPC is never unauthenticated.
        rpc, planner: injected by the deterministic simulator (tests/simulation/): an
        in-memory transport and an in-process planner instead of ZeroMQ and the planner pool."""
        rpc_address = config.get(cfg.JOBMANAGER_RPC_ADDRESS)
        self.cluster_secret = cluster_secret or resolve_cluster_secret(
            config, "JobManager", {cfg.JOBMANAGER_RPC_ADDRESS.key: rpc_address}
        )
        rpc = rpc or RpcService(
            rpc_address,
            config.get(cfg.JOBMANAGER_RPC_PORT),
            framesize=config.get(cfg.FRAMESIZE),
            cluster_secret=self.cluster_secret,
        )
        super().__init__("JobManager", rpc)
        self.config = config
        # Fencing token of this run: tasks it deploys carry it back in every message.
        self.jobmanager_id = uuid.uuid4().hex
        self.task_fencing = TaskFencing()  # refuses what tasks of other JobManager runs report
        self.started_at = time.time()
        self.ask_timeout = config.get_seconds(cfg.ASK_TIMEOUT)
        # Every job this JobManager knows, running or archived. Changed only here (add_job,
        # remove_job, a revoke) and never rebound: JobOperations reads this very dict.
        self.jobs: dict[str, JobMaster] = {}
        # TaskManagers, their heartbeats and slots. Its registry and slot pool are read by
        # the RestfulGateway too (never mutated there).
        self.resource_manager = ResourceManager(self, config, self.cluster_secret)
        self.task_managers: dict[str, RegisteredTaskManager] = self.resource_manager.task_managers
        self.slot_pool = self.resource_manager.slot_pool
        # resourcemanager.driver process or docker: TaskManagers started for waiting slot
        # requests and stopped when idle (None: standalone, they are started by hand).
        self.active_resources = (
            ActiveResourceManager(config, self.resource_manager, self.slot_pool, self)
            if config.get(cfg.ResourceManagerOptions.DRIVER) != "standalone"
            else None
        )
        if self.active_resources is not None:
            # A request the registered TaskManagers cannot hold waits for one started for it
            # (the active resource manager fails it when its bounds never allow one).
            self.slot_pool.fail_unfulfillable = False
        # Called by the RPC layer outside the mailbox; handled inside it.
        rpc.on_disconnect = lambda address: self.run_in_mailbox(self.resource_manager.on_connection_lost, address)
        self.events = JobEventLog()
        self.status_listeners: list[Callable[[JobStatusChanged], None]] = []
        self.rest_url = ""  # set by RestServer once it serves; TaskManagers download job libraries from it
        url = config.get(cfg.JobStoreOptions.URL)
        job_store = JobStore(str(url), idle_transaction_timeout=store_idle_timeout(config)) if url else None
        # high-availability.type: database: a standby until elected (jobmanager/leadership.py).
        self.leadership = Leadership(config, job_store, self)
        self.persistence = JobPersistence(config, job_store, self, fencing_cluster=self.leadership.fencing_cluster)
        # Savepoints, stops, checkpoints and their statistics (behind the gateway).
        self.operations = JobOperations(self.jobs, self.persistence, self)
        # The REST API's one door into the JobManager (Flink's RestfulGateway).
        self.gateway = RestfulGateway(self, self.operations)
        # Plan checks and Hadoop paths; a MiniCluster's is the one its TaskManagers share.
        self.spark_session = JobManagerSpark(config, planning_only=not embedded)
        # The job's own code runs in the planner process (planner/); a MiniCluster's
        # process runs the job's code in its TaskManagers anyway, so it plans in-process.
        self.planner: Planner = planner or (InProcessPlanner(self.spark) if embedded else PlannerPool.of(config))
        self.planner_timeout = config.get_seconds(cfg.PLANNER_TIMEOUT)
        self.blob_dir = config.get(cfg.BLOB_STORAGE_DIRECTORY) or os.path.join(
            tempfile.gettempdir(), "flink-runtime-blobs"
        )
        self.blob_store = BlobStore(self.blob_dir, config.get(cfg.BLOB_STORAGE_MAX_SIZE))
        config.get(cfg.CHECKPOINT_RETENTION)  # a value Flink does not know stops the start, named
        self.job_end_cleanup = JobEndCleanup(self)

    def spark(self) -> Any:
        """A SparkSession for plan checks and Hadoop paths; started on first use (any thread).
        In a MiniCluster it is the one the TaskManagers share."""
        return self.spark_session.get()

    def on_stop(self) -> None:
        self.leadership.stop()
        if self.active_resources is not None:
            self.active_resources.close()
        self.planner.close()
        self.persistence.close()
        self.leadership.release_store_lock()
        self.spark_session.release()

    def on_start(self) -> None:
        interval = self.config.get_seconds(cfg.HEARTBEAT_INTERVAL)
        self.schedule_every(interval, self.resource_manager.send_heartbeats)
        self.schedule_every(min(interval, 1.0), self._check_timeouts)
        self.schedule_every(BLOB_CLEANUP_INTERVAL, self._expire_blobs)
        if self.leadership.store_lock_can_be_lost:
            self.schedule_every(STORE_LOCK_CHECK_INTERVAL, self.leadership.check_store_lock)
        log.info("JobManager %s listening on %s", self.jobmanager_id, self.address)
        # The planner process starts now (its SparkSession too with jobmanager.planner.warm-up),
        # so a submission waits for neither its spawn nor its imports.
        self.planner.warm_up()
        if self.persistence.enabled and not self.leadership.high_availability:
            self.persistence.recover_jobs()  # with standbys: once elected (leadership_granted)

    def _expire_blobs(self) -> None:
        """Delete libraries no job refers to once blob.expiration-time passed since their
        last upload (a job submitted meanwhile uploads them again, which resets it)."""
        referenced = {library for job in self.jobs.values() for library in job.job_graph.libraries}
        uploaded_before = time.time() - self.config.get_seconds(cfg.BLOB_EXPIRATION_TIME)

        def expire() -> None:
            for key in self.blob_store.remove_unreferenced(referenced, uploaded_before):
                log.info("Deleted job library %s: no job refers to it.", key)

        self.run_async(asyncio.to_thread(expire))

    # -- TaskManagers (the ResourceManager's) -------------------------------------------------------

    @handles(RegisterTaskManager)
    def on_register_task_manager(self, message: RegisterTaskManager) -> Message:
        if not self.leadership.is_leader:
            leader = self.leadership.known_leader
            return RefuseRegistration(
                reason=f"JobManager {self.address} is a standby of cluster {self.leadership.cluster_id}; the leader is "
                + (f"at {leader.rpc_address}" if leader is not None else "not elected yet")
            )
        return self.resource_manager.register_task_manager(message)

    @handles(DisconnectTaskManager)
    def on_disconnect_task_manager(self, message: DisconnectTaskManager) -> Acknowledge:
        self.resource_manager.remove_task_manager(message.task_manager_id, message.reason, expected=True)
        return Acknowledge()

    def _check_timeouts(self) -> None:
        self.resource_manager.check_timeouts()
        if self.active_resources is not None:
            self.active_resources.tick()
        self.persistence.expire_finished_jobs()

    # -- the JobMasterGateway: slots and TaskManagers are the ResourceManager's ----------------------

    def request_slot(
        self,
        job: JobMaster,
        request_id: str,
        preferred_hosts: list[str],
        profile: ResourceProfile = ResourceProfile.UNKNOWN,
    ) -> PhysicalSlot | None:
        slot = self.resource_manager.request_slot(job, request_id, preferred_hosts, profile)
        if slot is None and self.active_resources is not None:
            self.active_resources.request_waiting()
        return slot

    def allocated_slots_of(self, task_manager_id: str) -> list[tuple[PhysicalSlot, str | None]]:
        """A TaskManager's slots in use and the job holding each (REST's allocatedSlots)."""
        return self.resource_manager.allocated_slots_of(task_manager_id)

    def release_slot(self, allocation_id: str) -> None:
        self.resource_manager.release_slot(allocation_id)

    def cancel_slot_request(self, request_id: str) -> None:
        self.resource_manager.cancel_slot_request(request_id)

    def slot_requests_waiting(self) -> bool:
        return self.slot_pool.pending_requests > 0

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None:
        return self.resource_manager.slot_of(allocation_id)

    def task_manager_address(self, task_manager_id: str) -> str | None:
        return self.resource_manager.task_manager_address(task_manager_id)

    def ask_task_manager(
        self, address: str, message: Message, on_done: Callable[[Any, BaseException | None], None]
    ) -> None:
        self.resource_manager.messages.ask(address, message, on_done)

    def tell_task_manager(self, address: str, message: Message) -> None:
        self.resource_manager.messages.tell(address, message)

    def blocking_ask(self) -> Callable[[str, Message], Message]:
        return self.resource_manager.messages.blocking_ask()

    def release_partitions(self, job_id: str, data_namespace: str = "") -> None:
        self.resource_manager.release_partitions(job_id, data_namespace)

    # -- supervision of the JobMasters ---------------------------------------------------------

    def child_of(self, message: Any) -> JobMaster | None:
        """A message about a live job: a handler that raises on it failed that job's
        JobMaster (child_failed restarts it: the job fails globally), not the JobManager."""
        job_id = getattr(message, "job_id", None)
        return self.jobs.get(job_id) if isinstance(job_id, str) else None

    def job_status_changed(self, job: JobMaster, event: JobStatusChanged) -> None:
        self.events.publish(event)
        for listener in self.status_listeners:
            listener(event)
        # Checkpoints as the retention says, then keyed state, staged output, partitions:
        # only once the store took the job's end (a deposed leader's write is fenced).
        cleanup = self.job_end_cleanup.job_ended(job) if job.status.is_terminal else None
        self.persistence.status_changed(job, event, on_stored=cleanup)

    # -- jobs ------------------------------------------------------------------------------------------

    def decode(self, body: bytes) -> JobGraph:
        """Decode and validate a JobGraph document; InvalidJobGraph lists every problem."""
        job_graph = decode_job_graph(body)
        self.validate(job_graph)
        return job_graph

    def validate(self, job_graph: JobGraph) -> None:
        """InvalidJobGraph lists every problem of the job for this cluster (submission.py)."""
        validate_submission(job_graph, self.config)

    @handles(SubmitJob)
    def on_submit_job(self, message: SubmitJob) -> Any:
        job_graph = message.job_graph
        if job_graph.job_id is None:
            job_graph.job_id = new_job_id()
        job_id = job_graph.job_id
        if not self.leadership.is_leader:
            return JobSubmissionFailure(job_id=job_id, reason="this JobManager is a standby, not the leader")
        if job_id in self.jobs:
            return JobSubmissionFailure(job_id=job_id, reason=f"job {job_id} was already submitted", kind="duplicate")
        try:
            self.validate(job_graph)
        except InvalidJobGraph as exc:
            return JobSubmissionFailure(job_id=job_id, reason=str(exc), kind="invalid")
        try:
            job = self.new_job_master(job_graph)
        except ConfigurationError as exc:
            return JobSubmissionFailure(job_id=job_id, reason=f"job config: {exc}", kind="invalid")
        self.add_job(job)
        log.info("Received JobGraph submission '%s' (%s).", job_graph.name, job_id)
        return self.persistence.submitted(job, self._start_submitted)

    def _start_submitted(self, job: JobMaster) -> bool:
        """Start a submitted job (once stored); False if it is no longer this JobManager's
        (the job store refused it, or the leadership was revoked meanwhile)."""
        if not self.owns(job):
            return False
        self.persistence.count_checkpoint_ids(job)
        self.job_end_cleanup.start_when_settled(job)
        return True

    @handles(CancelJob)
    def on_cancel_job(self, message: CancelJob) -> Message:
        job = self.jobs.get(message.job_id)
        if job is None:
            return CancellationFailure(job_id=message.job_id, reason=f"job {message.job_id} not found")
        try:
            job.cancel()
        except JobAlreadyEnded as refused:
            return CancellationFailure(job_id=message.job_id, reason=refused.message)
        return CancellationSuccess(job_id=message.job_id)

    # -- messages from tasks: fenced by the JobManager that deployed them ------------------------

    def _addressed_job(self, message: JobTaskMessage) -> JobMaster:
        """The live job a task's message is about; TaskReportRefused says why not."""
        return self.task_fencing.addressed_job(message, self.jobmanager_id, self.jobs)

    @handles(UpdateTaskExecutionState)
    def on_update_task_execution_state(self, message: UpdateTaskExecutionState) -> Acknowledge:
        try:
            job = self._addressed_job(message)
        except TaskReportRefused as refused:
            return Acknowledge(ok=False, reason=refused.reason)
        state = _EXECUTION_STATES.get(message.state)  # a dict look-up: three per deployment
        if state is None:
            return Acknowledge(ok=False, reason=f"unknown execution state {message.state!r}")
        return Acknowledge(
            ok=job.update_task_execution_state(
                message.execution_id,
                state,
                message.error,
                message.state_handle,
                message.io_metrics,
                missing_partitions=message.missing_partitions,
            )
        )

    @handles(UpdateTaskExecutionStates)
    def on_update_task_execution_states(self, message: UpdateTaskExecutionStates) -> AcknowledgeTaskExecutionStates:
        # A TaskManager's batch, in one turn: each entry fenced and answered as if it came alone.
        answers = self.answer_each(message.updates, self.on_update_task_execution_state)
        return AcknowledgeTaskExecutionStates(answers=answers)  # type: ignore[arg-type]

    @handles(RequestNextInputSplit)
    def on_request_next_input_split(self, message: RequestNextInputSplit) -> NextInputSplit | RpcError:
        # An error, not "no split left": a task told it is done would commit partial output.
        try:
            job = self._addressed_job(message)
            return NextInputSplit(
                split=job.request_next_input_split(message.execution_id, message.host, message.completed_split)
            )
        except TaskReportRefused as refused:
            return RpcError(error=refused.reason)
        except UnknownExecution as exc:
            return RpcError(error=str(exc))

    @handles(ScheduleOrUpdateConsumers)
    def on_schedule_or_update_consumers(self, message: ScheduleOrUpdateConsumers) -> Acknowledge:
        try:
            self._addressed_job(message).schedule_or_update_consumers(
                message.partition_id, message.location, message.execution_id, message.data_address, message.size_bytes
            )
        except TaskReportRefused as refused:
            return Acknowledge(ok=False, reason=refused.reason)
        return Acknowledge()

    # -- checkpoints: the tasks' answers (the REST entry points are in operations.py) ------------

    @handles(AcknowledgeCheckpoint)
    def on_acknowledge_checkpoint(self, message: AcknowledgeCheckpoint) -> None:
        with contextlib.suppress(TaskReportRefused):  # a stale or unknown sender's answer is dropped
            job = self._addressed_job(message)
            job.coordinator.acknowledge(message.execution_id, message.checkpoint_id, message.state_handle)

    @handles(DeclineCheckpoint)
    def on_decline_checkpoint(self, message: DeclineCheckpoint) -> None:
        with contextlib.suppress(TaskReportRefused):
            job = self._addressed_job(message)
            job.coordinator.decline(message.execution_id, message.checkpoint_id, message.reason)

    def savepoint_request_changed(self, job: JobMaster, request_id: str, status: dict[str, Any]) -> None:
        self.persistence.savepoint_request_changed(job.job_id, request_id, status)

    def checkpoint_completed(
        self, job: JobMaster, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """Recorded in the job store; the checkpoints it subsumes are deleted once that committed."""
        self.persistence.checkpoint_completed(job.job_id, checkpoint_id, location, is_savepoint, size, subsumed)

    # -- the components' hosts: leadership (leadership.py), persistence (job_persistence.py) ------

    def leadership_granted(self, lease: LeaderLease) -> None:
        # A fresh RPC fencing token: TaskManagers registered with an earlier leader (or
        # with this JobManager's earlier leadership) refuse its messages and re-register.
        self.jobmanager_id = uuid.uuid4().hex
        self.persistence.fence(lease.token)
        log.info(
            "JobManager %s leads cluster %s (fencing token %d); recovering its jobs.",
            self.jobmanager_id,
            self.leadership.cluster_id,
            lease.token,
        )
        self.persistence.recover_jobs()

    def leadership_revoked(self, token: int, reason: str) -> None:
        reason = f"JobManager {self.jobmanager_id} lost the leadership (fencing token {token}): {reason}"
        for job in list(self.jobs.values()):
            job.suspend(reason)  # its SUSPENDED is written with the old token: refused if already taken
        self.jobs.clear()
        self.persistence.forget()
        for task_manager_id in list(self.task_managers):
            self.resource_manager.remove_task_manager(task_manager_id, "the JobManager is a standby now", expected=True)
        self.jobmanager_id = uuid.uuid4().hex  # whatever tasks still report is refused
        self.persistence.fence(None)
        log.warning("%s; standing by.", reason)

    def new_job_master(self, job_graph: JobGraph) -> JobMaster:
        return JobMaster(job_graph, self, self.config)

    def add_job(self, job: JobMaster) -> None:
        self.jobs[job.job_id] = job

    def remove_job(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)

    def owns(self, job: JobMaster) -> bool:
        return self.jobs.get(job.job_id) is job

    # -- read by the RestfulGateway, the CLI's entrypoint and the leader proxy (rest/leader_proxy.py) --

    @property
    def is_leader(self) -> bool:
        return self.leadership.is_leader

    @property
    def known_leader(self) -> LeaderLease | None:
        return self.leadership.known_leader

    @property
    def cluster_id(self) -> str:
        return self.leadership.cluster_id

    def leader_info(self) -> LeaderInfo:
        return self.leadership.info()

    def start_leader_election(self) -> None:
        self.leadership.start()

    @property
    def archived(self) -> dict[str, JobRecord]:
        """Finished jobs of earlier JobManager runs, as the job store archived them."""
        return self.persistence.archived
