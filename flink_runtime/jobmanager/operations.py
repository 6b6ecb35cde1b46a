"""The JobManager's asynchronous operations on a job, as the REST API reaches them:
savepoints, stop-with-savepoint and checkpoints on request, their status, and the
job's checkpoint statistics and configuration.

Contract for the REST layer: a trigger returns a request id at once (the operation
completes later); it raises JobNotFound for an unknown job, JobNotRunning for a job that
is not RUNNING, OperationInProgress while another request of the kind runs, and
InvalidRequest when the operation cannot be carried out (errors.py; rest/ maps each to
a status). A triggerId the job already knows answers that request again, also once it
completed, as Flink's idempotent triggers do. The status answers Flink's
AsynchronousOperationResult (operation_requests.py):
  {"status": {"id": "IN_PROGRESS"}}  or
  {"status": {"id": "COMPLETED"}, "operation": {"location": ...} | {"checkpointId": ...}}  or
  {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": {"class": "...", "stack-trace": "..."}}}
and raises JobNotFound or RequestNotFound for an unknown job or request id.

`JobOperations` sits behind the RestfulGateway (restful_gateway.py), the REST layer's
one door: it reads the JobManager's jobs, asks the job persistence about jobs of earlier
runs, and runs each trigger inside the JobManager's mailbox (a `Mailbox`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flink_runtime.checkpoint.coordinator import CheckpointFailure
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobmanager.errors import (
    InvalidRequest,
    JobNotFound,
    JobNotRunning,
    OperationInProgress,
    RequestNotFound,
)
from flink_runtime.jobmanager.operation_requests import OperationRequests

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster

T = TypeVar("T")


class Mailbox(Protocol):
    """Where the operations run: the JobManager's mailbox (jobs change only there)."""

    async def call_in_mailbox(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T: ...


class ArchivedJobs(Protocol):
    """Jobs that ended in an earlier JobManager run (job_persistence.py)."""

    def is_archived(self, job_id: str) -> bool: ...
    def archived_savepoint_requests(self, job_id: str) -> Mapping[str, dict[str, Any]] | None: ...


class JobOperations:
    """Savepoints, stops and checkpoints on request; checkpoint statistics."""

    def __init__(self, jobs: Mapping[str, JobMaster], archive: ArchivedJobs, mailbox: Mailbox) -> None:
        """jobs: the JobManager's (read here, changed only by the JobManager)."""
        self._jobs = jobs
        self._archive = archive
        self._mailbox = mailbox

    async def trigger_savepoint(
        self, job_id: str, target_directory: str | None, cancel_job: bool, trigger_id: str | None = None
    ) -> str:
        return await self._mailbox.call_in_mailbox(
            self._savepoint_request, job_id, "trigger", target_directory, cancel_job, trigger_id
        )

    async def stop_with_savepoint(
        self, job_id: str, target_directory: str | None, drain: bool, trigger_id: str | None = None
    ) -> str:
        return await self._mailbox.call_in_mailbox(
            self._savepoint_request, job_id, "stop", target_directory, drain, trigger_id
        )

    async def trigger_checkpoint(self, job_id: str, trigger_id: str | None = None) -> str:
        return await self._mailbox.call_in_mailbox(self._checkpoint_request, job_id, trigger_id)

    def _savepoint_request(
        self, job_id: str, kind: str, target_directory: str | None, flag: bool, trigger_id: str | None
    ) -> str:
        """One savepoint or stop at a time per job (each copies the job's state; 200 at
        once would fill the disk)."""
        known = self._known_request(job_id, trigger_id, lambda job: job.savepoint_requests)
        if known is not None:
            return known
        job = self._running_job(job_id, "take a savepoint of" if kind == "trigger" else "stop")
        _refuse_if_busy(job, job.savepoint_requests, f"GET /jobs/{job_id}/savepoints")
        try:
            if kind == "trigger":
                return job.trigger_savepoint(target_directory, cancel_job=flag, request_id=trigger_id)
            return job.stop_with_savepoint(target_directory, drain=flag, request_id=trigger_id)
        except CheckpointFailure as exc:
            raise InvalidRequest(str(exc)) from None

    def _checkpoint_request(self, job_id: str, trigger_id: str | None) -> str:
        """One checkpoint request at a time per job; periodic checkpoints go on meanwhile.
        Not while the job stops with a savepoint or publishes its output at its end: a
        checkpoint then would record unread input as read."""
        known = self._known_request(job_id, trigger_id, lambda job: job.checkpoint_requests)
        if known is not None:
            return known
        job = self._running_job(job_id, "checkpoint")
        _refuse_if_busy(job, job.checkpoint_requests, f"GET /jobs/{job_id}/checkpoints")
        if not job.accepts_checkpoints():
            stopping = job.savepoint_requests.in_progress()
            why = f"stopping (request {stopping[0]})" if stopping else "publishing its output and finishing"
            raise OperationInProgress(f"Cannot checkpoint job {job_id}: it is {why}.")
        try:
            return job.trigger_checkpoint(request_id=trigger_id)
        except CheckpointFailure as exc:
            raise InvalidRequest(str(exc)) from None

    def _known_request(
        self, job_id: str, trigger_id: str | None, requests: Callable[[JobMaster], OperationRequests]
    ) -> str | None:
        """A retry of a request the job knows (same triggerId): the same request id."""
        job = self._jobs.get(job_id)
        if job is not None and trigger_id is not None and trigger_id in requests(job):
            return trigger_id
        return None

    def _running_job(self, job_id: str, action: str) -> JobMaster:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"Job {job_id} not found.")
        if job.status is not JobStatus.RUNNING:
            raise JobNotRunning(f"Cannot {action} job {job_id}: it is {job.status.value}, not RUNNING.")
        return job

    def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        job = self._jobs.get(job_id)
        if job is not None:
            requests = job.savepoint_requests
        else:  # ended in an earlier run, or unknown
            archived = self._archive.archived_savepoint_requests(job_id)
            if archived is None:
                raise JobNotFound(f"Job {job_id} not found.")
            requests = archived
        status = requests.get(request_id)
        if status is None:
            raise RequestNotFound(f"No savepoint request {request_id} for job {job_id}.")
        return status

    def checkpoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        status = self._live_job(job_id, "checkpoint requests").checkpoint_requests.get(request_id)
        if status is None:
            raise RequestNotFound(f"There is no checkpoint operation with triggerId={request_id} for job {job_id}.")
        return status

    def checkpoint_stats(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints (Flink's CheckpointingStatistics). Every job here can
        take savepoints and checkpoints on request, so every job answers (Flink answers
        404 for a job that has no checkpoint coordinator at all, a batch job)."""
        return self._live_job(job_id, "checkpoint statistics").coordinator.statistics()

    def checkpoint_details(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        details = self._live_job(job_id, "checkpoint statistics").coordinator.stats.details(checkpoint_id)
        if details is None:
            raise RequestNotFound(f"Could not find checkpointing statistics for checkpoint {checkpoint_id}.")
        return details

    def checkpoint_subtask_details(self, job_id: str, checkpoint_id: int, vertex_id: str) -> dict[str, Any]:
        stats = self._live_job(job_id, "checkpoint statistics").coordinator.stats
        details = stats.subtask_details(checkpoint_id, vertex_id)
        if details is None:
            raise RequestNotFound(
                f"Could not find checkpointing statistics for vertex {vertex_id!r} in checkpoint {checkpoint_id}."
            )
        return details

    def checkpoint_config(self, job_id: str) -> dict[str, Any]:
        return self._live_job(job_id, "checkpoint configuration").coordinator.configuration()

    def _live_job(self, job_id: str, what: str) -> JobMaster:
        """A job this JobManager runs or ran. A job that ended before a JobManager restart
        is served from the job store, which keeps its checkpoints but not their
        statistics, nor its checkpoint requests."""
        job = self._jobs.get(job_id)
        if job is not None:
            return job
        if self._archive.is_archived(job_id):
            raise RequestNotFound(
                f"Job {job_id} ended before the JobManager restarted; its {what} are not kept across restarts."
            )
        raise JobNotFound(f"Job {job_id} not found.")


def _refuse_if_busy(job: JobMaster, requests: OperationRequests, poll: str) -> None:
    in_flight = requests.in_progress()
    if in_flight:
        raise OperationInProgress(
            f"Job {job.job_id} already has {requests.kind} request {in_flight[0]} in progress; poll "
            f"{poll}/{in_flight[0]} and trigger again once it completed.",
        )
