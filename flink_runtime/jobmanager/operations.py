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

`JobOperations` is part of the JobManager (a mixin: it shares its jobs and runs in its
mailbox like the rest of it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.jobmanager.jobmaster import JobMaster


class JobOperations:
    """Savepoints, stops and checkpoints on request; checkpoint statistics."""

    async def trigger_savepoint(
        self: JobManager, job_id: str, target_directory: str | None, cancel_job: bool, trigger_id: str | None = None
    ) -> str:
        return await self.call_in_mailbox(
            self._savepoint_request, job_id, "trigger", target_directory, cancel_job, trigger_id
        )

    async def stop_with_savepoint(
        self: JobManager, job_id: str, target_directory: str | None, drain: bool, trigger_id: str | None = None
    ) -> str:
        return await self.call_in_mailbox(self._savepoint_request, job_id, "stop", target_directory, drain, trigger_id)

    async def trigger_checkpoint(self: JobManager, job_id: str, trigger_id: str | None = None) -> str:
        return await self.call_in_mailbox(self._checkpoint_request, job_id, trigger_id)

    def _savepoint_request(
        self: JobManager, job_id: str, kind: str, target_directory: str | None, flag: bool, trigger_id: str | None
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

    def _checkpoint_request(self: JobManager, job_id: str, trigger_id: str | None) -> str:
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
        self: JobManager, job_id: str, trigger_id: str | None, requests: Callable[[JobMaster], OperationRequests]
    ) -> str | None:
        """A retry of a request the job knows (same triggerId): the same request id."""
        job = self.jobs.get(job_id)
        if job is not None and trigger_id is not None and trigger_id in requests(job):
            return trigger_id
        return None

    def _running_job(self: JobManager, job_id: str, action: str) -> JobMaster:
        job = self.jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"Job {job_id} not found.")
        if job.status is not JobStatus.RUNNING:
            raise JobNotRunning(f"Cannot {action} job {job_id}: it is {job.status.value}, not RUNNING.")
        return job

    def savepoint_status(self: JobManager, job_id: str, request_id: str) -> dict[str, Any]:
        job = self.jobs.get(job_id)
        if job is not None:
            requests = job.savepoint_requests
        elif job_id in self.archived and self.job_store is not None:  # ended in an earlier run
            requests = self.job_store.savepoint_requests(job_id)
        else:
            raise JobNotFound(f"Job {job_id} not found.")
        status = requests.get(request_id)
        if status is None:
            raise RequestNotFound(f"No savepoint request {request_id} for job {job_id}.")
        return status

    def checkpoint_status(self: JobManager, job_id: str, request_id: str) -> dict[str, Any]:
        status = self._live_job(job_id, "checkpoint requests").checkpoint_requests.get(request_id)
        if status is None:
            raise RequestNotFound(f"There is no checkpoint operation with triggerId={request_id} for job {job_id}.")
        return status

    def checkpoint_stats(self: JobManager, job_id: str) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints (Flink's CheckpointingStatistics). Every job here can
        take savepoints and checkpoints on request, so every job answers (Flink answers
        404 for a job that has no checkpoint coordinator at all, a batch job)."""
        return self._live_job(job_id, "checkpoint statistics").coordinator.statistics()

    def checkpoint_details(self: JobManager, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        details = self._live_job(job_id, "checkpoint statistics").coordinator.stats.details(checkpoint_id)
        if details is None:
            raise RequestNotFound(f"Could not find checkpointing statistics for checkpoint {checkpoint_id}.")
        return details

    def checkpoint_config(self: JobManager, job_id: str) -> dict[str, Any]:
        return self._live_job(job_id, "checkpoint configuration").coordinator.configuration()

    def _live_job(self: JobManager, job_id: str, what: str) -> JobMaster:
        """A job this JobManager runs or ran. A job that ended before a JobManager restart
        is served from the job store, which keeps its checkpoints but not their
        statistics, nor its checkpoint requests."""
        job = self.jobs.get(job_id)
        if job is not None:
            return job
        if job_id in self.archived:
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
