"""The one door from the REST API into the JobManager (Flink's RestfulGateway).

Every route asks this gateway; none reads the JobManager's fields. It answers with
records (job_snapshots.py: jobs live and archived; live_snapshots.py: what only a
running JobManager has, as subtasks and metrics; ClusterOverview, TaskManagerSnapshot,
LeaderInfo), never a JobMaster, and refuses with the typed errors of errors.py, which
rest/errors.py alone turns into HTTP statuses. Live jobs and the jobs
the job store archived in earlier runs are merged here, once: a job id is looked up
among the live jobs first.

Reads run on the JobManager's event loop (the REST server's), between two messages of
its mailbox; what changes a job (submit, cancel, savepoints, checkpoints) runs inside
the mailbox (`call_in_mailbox`, `ask_self`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from flink_runtime import configuration as cfg
from flink_runtime.executiongraph import JobStatus
from flink_runtime.jobmanager import job_snapshots, live_snapshots, metrics
from flink_runtime.jobmanager.archived_jobs import from_archive
from flink_runtime.jobmanager.errors import (
    DuplicateJob,
    InvalidRequest,
    JobAlreadyEnded,
    JobNotFound,
    NotAccepted,
    TaskManagerNotFound,
    VertexNotFound,
)
from flink_runtime.jobmanager.job_snapshots import ExceptionHistory, JobPlan, JobSnapshot, JobSummary
from flink_runtime.jobmanager.live_snapshots import (
    JobConfiguration,
    JobMetrics,
    SubtaskSnapshot,
    VertexAccumulators,
    VertexMetrics,
    VertexSubtasks,
)
from flink_runtime.jobmanager.operations import JobOperations, Mailbox
from flink_runtime.jobmanager.process_metrics import ProcessMetrics
from flink_runtime.rpc.messages import JobSubmissionFailure, SubmitJob
from flink_runtime.scheduler.exception_history import ExceptionEntry
from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.security import masked_config

if TYPE_CHECKING:
    from flink_runtime.blob import BlobStore
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph import ExecutionJobVertex
    from flink_runtime.highavailability.lease_store import LeaderLease
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.jobmanager.events import JobEventLog, SequencedEvent
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.jobmanager.jobstore import JobRecord
    from flink_runtime.jobmanager.leadership import LeaderInfo
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager
    from flink_runtime.rpc.messages import Message
    from flink_runtime.rpc.transport import RpcTransport
    from flink_runtime.scheduler.slotpool import PhysicalSlot, SlotPool


class GatewayHost(Mailbox, Protocol):
    """The JobManager, as the gateway reads it (never changed here)."""

    config: Configuration
    ask_timeout: float
    started_at: float
    blob_store: BlobStore

    @property
    def jobs(self) -> Mapping[str, JobMaster]: ...
    @property
    def archived(self) -> Mapping[str, JobRecord]: ...
    @property
    def task_managers(self) -> Mapping[str, RegisteredTaskManager]: ...
    @property
    def slot_pool(self) -> SlotPool: ...
    def allocated_slots_of(self, task_manager_id: str) -> list[tuple[PhysicalSlot, str | None]]: ...
    @property
    def events(self) -> JobEventLog: ...
    @property
    def rpc(self) -> RpcTransport: ...

    @property
    def is_leader(self) -> bool: ...
    @property
    def known_leader(self) -> LeaderLease | None: ...
    @property
    def cluster_id(self) -> str: ...

    rest_url: str

    def leader_info(self) -> LeaderInfo: ...
    def decode(self, body: bytes) -> JobGraph: ...
    async def ask_self(self, message: Any, timeout: float | None = None) -> Any: ...


class ClusterOverview(msgspec.Struct, kw_only=True):
    """GET /overview: TaskManagers, slots and jobs by state (Flink's ClusterOverview)."""

    task_managers: int
    slots_total: int
    slots_available: int
    jobs_running: int  # every job not globally terminal
    jobs_finished: int
    jobs_cancelled: int
    jobs_failed: int


@dataclass(frozen=True)
class JobEvents:
    """A long poll's answer: the job's JobStatusChanged events, where to poll next, its state."""

    events: list[SequencedEvent]
    next: int
    state: str


@dataclass(frozen=True)
class TaskManagerSnapshot:
    """A registered TaskManager, its free slots and the tasks it runs now."""

    registration: RegisteredTaskManager
    free_slots: int
    task_jobs: list[str]  # the job of each task it runs
    # What its slots share and what of it is free (ANY: it did not report its resources).
    total_resource: ResourceProfile = ResourceProfile.ANY
    free_resource: ResourceProfile = ResourceProfile.ANY
    # Each slot in use: what it holds and the job holding it.
    allocated_slots: list[tuple[ResourceProfile, str]] = field(default_factory=list)


_METRICS_KEPT = "metrics are kept for jobs of this JobManager run"


def _no_subtask(job_id: str, vertex_id: str, subtask_index: int, parallelism: int) -> VertexNotFound:
    return VertexNotFound(
        f"Job {job_id}'s vertex {vertex_id!r} has no subtask {subtask_index}: its subtasks are 0 to {parallelism - 1}."
    )


def _not_found(job_id: str) -> JobNotFound:
    return JobNotFound(f"Job {job_id} not found (unknown, or expired from the job store).")


class RestfulGateway:
    """What the REST API may ask of the JobManager, as typed methods (see the module)."""

    def __init__(self, host: GatewayHost, operations: JobOperations) -> None:
        self._host = host
        self._operations = operations
        self._read_archive: dict[str, tuple[JobRecord, tuple[JobSnapshot, ExceptionHistory]]] = {}
        self._process_metrics = ProcessMetrics()

    # -- jobs, live and archived ---------------------------------------------------------------

    def _archived(self, job_id: str) -> tuple[JobSnapshot, ExceptionHistory] | None:
        """A job of an earlier JobManager run the job store keeps (None: not one). Read
        once per record: the dashboard lists every job every few seconds."""
        record = self._host.archived.get(job_id)
        if record is None or record.details is None or job_id in self._host.jobs:
            return None
        cached = self._read_archive.get(job_id)
        if cached is None or cached[0] is not record:
            cached = self._read_archive[job_id] = (record, from_archive(record.details, record.exceptions))
        return cached[1]

    def list_jobs(self) -> list[JobSummary]:
        """Every job: this run's, then those the job store archived in earlier runs."""
        live = [job_snapshots.job_summary(job) for job in self._host.jobs.values()]
        archived = [self._archived(job_id) for job_id in self._host.archived]
        for gone in self._read_archive.keys() - self._host.archived.keys():  # expired from the store
            del self._read_archive[gone]
        return live + [snapshot.summary() for snapshot, _ in filter(None, archived)]

    def job_details(self, job_id: str) -> JobSnapshot:
        job = self._host.jobs.get(job_id)
        if job is not None:
            return job_snapshots.job_snapshot(job)
        return self._archived_or_404(job_id)[0]

    def job_exceptions(self, job_id: str) -> ExceptionHistory:
        job = self._host.jobs.get(job_id)
        if job is not None:
            return job_snapshots.exception_history(job)
        return self._archived_or_404(job_id)[1]

    def job_result(self, job_id: str) -> tuple[JobSnapshot, ExceptionEntry | None]:
        """The job's details and its root exception (what its execution result tells)."""
        job = self._host.jobs.get(job_id)
        if job is not None:
            return job_snapshots.job_snapshot(job), job.root_exception
        snapshot, history = self._archived_or_404(job_id)
        return snapshot, history.root

    def job_state(self, job_id: str) -> str:
        """The job's JobStatus, without building its details."""
        job = self._host.jobs.get(job_id)
        if job is not None:
            return job.status.value
        return self._archived_or_404(job_id)[0].state

    def job_vertices(self, job_id: str) -> tuple[str, dict[str, int] | None]:
        """The job's state and its vertices' parallelism by id (None: not planned yet)."""
        job = self._host.jobs.get(job_id)
        if job is not None:
            graph = job.graph
            return job.status.value, {v.id: v.parallelism for v in graph.vertices.values()} if graph else None
        snapshot = self._archived_or_404(job_id)[0]
        return snapshot.state, {v.id: v.parallelism for v in snapshot.vertices} or None

    def _archived_or_404(self, job_id: str) -> tuple[JobSnapshot, ExceptionHistory]:
        archived = self._archived(job_id)
        if archived is None:
            raise _not_found(job_id)
        return archived

    def _live_job(self, job_id: str, kept: str = "unknown, or expired from the job store") -> JobMaster:
        """A job of this JobManager run, for the views only it has (subtasks, metrics,
        configuration). `kept` says in JobNotFound which jobs have them."""
        job = self._host.jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"Job {job_id} not found ({kept}).")
        return job

    def _vertex(self, job: JobMaster, vertex_id: str) -> ExecutionJobVertex:
        ejv = job.graph.vertices.get(vertex_id) if job.graph is not None else None
        if ejv is None:
            raise VertexNotFound(f"Job {job.job_id} has no vertex {vertex_id!r}.")
        return ejv

    def job_plan(self, job_id: str) -> JobPlan:
        job = self._live_job(job_id)
        return JobPlan(
            job_id=job.job_id, name=job.name, job_type=job_snapshots.job_type(job), nodes=job_snapshots.plan_nodes(job)
        )

    def vertex_subtasks(self, job_id: str, vertex_id: str) -> VertexSubtasks:
        """The vertex's subtasks: a running job's, or those the job store archived (with
        their prior attempts) for a job of an earlier run."""
        job = self._host.jobs.get(job_id)
        if job is not None:
            return live_snapshots.vertex_subtasks(job, self._vertex(job, vertex_id), self._host.task_managers.get)
        snapshot = self._archived_subtasks_or_404(job_id)
        vertex = next((v for v in snapshot.vertices if v.id == vertex_id), None)
        if vertex is None:
            raise VertexNotFound(f"Job {job_id} has no vertex {vertex_id!r}.")
        return VertexSubtasks(
            id=vertex.id,
            name=vertex.name,
            parallelism=vertex.parallelism,
            max_parallelism=vertex.max_parallelism,
            subtasks=snapshot.subtasks.get(vertex_id, []),
            splits=None,
        )

    def _archived_subtasks_or_404(self, job_id: str) -> JobSnapshot:
        archived = self._archived(job_id)
        if archived is None or not archived[0].subtasks:  # archived before subtasks were kept
            raise JobNotFound(f"Job {job_id} not found (unknown, or expired from the job store).")
        return archived[0]

    def subtask(self, job_id: str, vertex_id: str, subtask_index: int) -> SubtaskSnapshot:
        """A subtask's current attempt, with its prior ones (Flink's SubtaskCurrentAttemptDetails)."""
        job = self._host.jobs.get(job_id)
        if job is not None:
            ejv = self._vertex(job, vertex_id)
            if not 0 <= subtask_index < ejv.parallelism:
                raise _no_subtask(job_id, vertex_id, subtask_index, ejv.parallelism)
            return live_snapshots.subtask_snapshot(ejv.task_vertices[subtask_index], self._host.task_managers.get)
        subtasks = self.vertex_subtasks(job_id, vertex_id).subtasks
        if not 0 <= subtask_index < len(subtasks):
            raise _no_subtask(job_id, vertex_id, subtask_index, len(subtasks))
        return subtasks[subtask_index]

    def subtask_attempt(self, job_id: str, vertex_id: str, subtask_index: int, attempt: int) -> SubtaskSnapshot:
        """One attempt of a subtask, current or prior (Flink's SubtaskExecutionAttemptDetails);
        VertexNotFound if it was never made or was evicted from the bounded history."""
        current = self.subtask(job_id, vertex_id, subtask_index)
        found = current.find_attempt(attempt)
        if found is None:
            kept = [prior.attempt for prior in current.prior_attempts] + [current.attempt]
            raise VertexNotFound(
                f"Attempt {attempt} not found in subtask {subtask_index} of vertex {vertex_id!r} of job {job_id}: "
                f"the attempts kept are {kept} (at most jobmanager.execution.attempts-history-size "
                "prior ones, the oldest dropped first)."
            )
        return found

    def job_configuration(self, job_id: str) -> JobConfiguration:
        return live_snapshots.job_configuration(self._live_job(job_id))

    def job_accumulators(self, job_id: str) -> list[VertexAccumulators]:
        return live_snapshots.accumulators(self._live_job(job_id))

    # -- metrics (metrics.py names them as Flink does) ---------------------------------------------

    def job_metrics(self, job_id: str) -> dict[str, float]:
        return metrics.job_metrics(self._live_job(job_id, _METRICS_KEPT))

    def vertex_metrics(self, job_id: str, vertex_id: str) -> VertexMetrics:
        job = self._live_job(job_id, _METRICS_KEPT)
        return live_snapshots.vertex_metrics(job, self._vertex(job, vertex_id))

    def all_job_metrics(self) -> list[JobMetrics]:
        """Every job of this run's metrics and its subtasks' (a Prometheus scrape); a job
        that ended longer than metrics.job.ended-retention ago is left out (Flink drops
        an ended job's metrics)."""
        retention = self._host.config.get_seconds(cfg.METRICS_JOB_ENDED_RETENTION)
        now = time.time()
        return [
            live_snapshots.job_metrics(job)
            for job in self._host.jobs.values()
            if not job.status.is_globally_terminal or now - job.status_timestamps.get(job.status, now) <= retention
        ]

    def jobmanager_metrics(self) -> dict[str, float]:
        """The JobManager's own metrics, with its process's and its planner's (Status.JVM.*)."""
        return metrics.jobmanager_metrics(self._host) | self._process_metrics.read()

    async def submit_job(self, body: bytes, wait: float) -> str:
        """Decode, validate and submit a JobGraph; its id once accepted (its sources may
        still wait for slots after `wait` seconds). InvalidJobGraph lists what is wrong."""
        job_graph = self._host.decode(body)
        job_id = job_graph.job_id
        assert job_id is not None
        try:
            answer = await self._host.ask_self(SubmitJob(job_graph=job_graph), timeout=wait)
        except TimeoutError:
            answer = None  # accepted, but the sources are not running yet (e.g. waiting for slots)
        if isinstance(answer, JobSubmissionFailure) and answer.kind == "invalid":
            raise InvalidRequest(answer.reason)
        if isinstance(answer, JobSubmissionFailure) and answer.kind == "duplicate":
            raise DuplicateJob(f"Job {job_id} was already submitted; query /jobs/{job_id}.")
        if job_id not in self._host.jobs:
            raise NotAccepted("The JobManager did not accept the job in time; retry the submission.")
        return job_id

    async def cancel_job(self, job_id: str) -> None:
        """As Flink's Dispatcher: cancelling a CANCELED job again is acknowledged; a job
        that ended otherwise cannot be cancelled any more (JobAlreadyEnded)."""
        await self._host.call_in_mailbox(self._cancel, job_id, timeout=self._host.ask_timeout)

    def _cancel(self, job_id: str) -> None:
        state = self.job_state(job_id)
        if state == JobStatus.CANCELED.value:
            return
        job = self._host.jobs.get(job_id)
        if job is None:
            raise JobAlreadyEnded(f"Job {job_id} already ended {state}; it cannot be cancelled.")
        job.cancel()

    async def job_events(self, job_id: str, since: int, timeout: float) -> JobEvents:
        """The job's events from `since` on, waiting up to `timeout` seconds for one."""
        job = self._live_job(job_id)
        event_log = self._host.events
        events = await event_log.wait(since, job_id, timeout)
        next_id = events[-1].sequence + 1 if events else max(since, 0)
        if not events and since > event_log.next_sequence:
            next_id = event_log.next_sequence
        return JobEvents(events=events, next=next_id, state=job.status.value)

    # -- savepoints, stops and checkpoints (operations.py says what each refuses) ---------------

    async def trigger_savepoint(
        self, job_id: str, target_directory: str | None, cancel_job: bool, trigger_id: str | None = None
    ) -> str:
        return await self._operations.trigger_savepoint(job_id, target_directory, cancel_job, trigger_id)

    async def stop_with_savepoint(
        self, job_id: str, target_directory: str | None, drain: bool, trigger_id: str | None = None
    ) -> str:
        return await self._operations.stop_with_savepoint(job_id, target_directory, drain, trigger_id)

    async def trigger_checkpoint(self, job_id: str, trigger_id: str | None = None) -> str:
        return await self._operations.trigger_checkpoint(job_id, trigger_id)

    def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        return self._operations.savepoint_status(job_id, request_id)

    def checkpoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        return self._operations.checkpoint_status(job_id, request_id)

    def checkpoint_stats(self, job_id: str) -> dict[str, Any]:
        return self._operations.checkpoint_stats(job_id)

    def checkpoint_details(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        return self._operations.checkpoint_details(job_id, checkpoint_id)

    def checkpoint_subtask_details(self, job_id: str, checkpoint_id: int, vertex_id: str) -> dict[str, Any]:
        return self._operations.checkpoint_subtask_details(job_id, checkpoint_id, vertex_id)

    def checkpoint_config(self, job_id: str) -> dict[str, Any]:
        return self._operations.checkpoint_config(job_id)

    # -- the cluster ---------------------------------------------------------------------------

    def cluster_overview(self) -> ClusterOverview:
        counts = {"RUNNING": 0, "FINISHED": 0, "CANCELED": 0, "FAILED": 0}
        for job in self._host.jobs.values():
            counts[job.status.value if job.status.is_globally_terminal else "RUNNING"] += 1
        # Jobs the job store archived in earlier runs count too, as the job list shows them.
        for job_id, record in self._host.archived.items():
            if job_id not in self._host.jobs and record.status in counts and record.status != "RUNNING":
                counts[record.status] += 1
        return ClusterOverview(
            task_managers=len(self._host.task_managers),
            slots_total=self._host.slot_pool.total_slots,
            slots_available=self._host.slot_pool.free_slots,
            jobs_running=counts["RUNNING"],
            jobs_finished=counts["FINISHED"],
            jobs_cancelled=counts["CANCELED"],
            jobs_failed=counts["FAILED"],
        )

    def leader_info(self) -> LeaderInfo:
        """Who leads the cluster (GET /leader), and whether this JobManager does."""
        return self._host.leader_info()

    @property
    def is_leader(self) -> bool:
        return self._host.is_leader

    @property
    def known_leader(self) -> LeaderLease | None:
        return self._host.known_leader

    @property
    def cluster_id(self) -> str:
        return self._host.cluster_id

    @property
    def rest_url(self) -> str:
        """This JobManager's REST URL (set once its REST server serves)."""
        return self._host.rest_url

    def configuration(self) -> dict[str, str]:
        """The JobManager's configuration, secrets masked."""
        return masked_config(self._host.config.to_dict())

    @property
    def blob_store(self) -> BlobStore:
        """Where job libraries are uploaded to and downloaded from."""
        return self._host.blob_store

    @property
    def ask_timeout(self) -> float:
        return self._host.ask_timeout

    def task_manager_list(self) -> list[RegisteredTaskManager]:
        return list(self._host.task_managers.values())

    def task_manager_snapshot(self, registration: RegisteredTaskManager) -> TaskManagerSnapshot:
        tm_id = registration.task_manager_id
        pool = self._host.slot_pool
        task_jobs = [job.job_id for job in self._host.jobs.values() for _ in job.executions_on(tm_id)]
        if not pool.has_task_manager(tm_id):
            return TaskManagerSnapshot(registration=registration, free_slots=0, task_jobs=task_jobs)
        return TaskManagerSnapshot(
            registration=registration,
            free_slots=pool.free_slots_of(tm_id),
            task_jobs=task_jobs,
            total_resource=pool.total_resource_of(tm_id),
            free_resource=pool.free_resource_of(tm_id),
            allocated_slots=[
                (slot.resource_profile, job_id)
                for slot, job_id in self._host.allocated_slots_of(tm_id)
                if job_id is not None
            ],
        )

    def task_manager(self, taskmanager_id: str) -> RegisteredTaskManager:
        registration = self._host.task_managers.get(taskmanager_id)
        if registration is None:
            raise TaskManagerNotFound(f"TaskManager {taskmanager_id} not found.")
        return registration

    async def ask_task_manager(self, registration: RegisteredTaskManager, message: Message) -> Any:
        """Ask a TaskManager (its logs); AskTimeoutError after the JobManager's ask timeout."""
        return await self._host.rpc.ask(registration.address, message, self._host.ask_timeout)
