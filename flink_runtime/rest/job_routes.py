"""REST: jobs (submission, overview, details, plan, exceptions, cancellation, events).

Reads come straight from JobManager state (same event loop); submissions and
cancellations go through the JobManager's mailbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.validation import InvalidJobGraph
from flink_runtime.jobmanager import snapshots
from flink_runtime.rest.errors import RestError
from flink_runtime.rest.serialized_throwable import complete_failure_cause
from flink_runtime.rpc.messages import CancelJob, CancellationSuccess, JobSubmissionFailure, SubmitJob

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.jobmanager.jobmaster import JobMaster

MAX_JOB_GRAPH_BYTES = 16 << 20
MAX_EVENT_WAIT_SECONDS = 60.0
# Event ids are counters; anything past this is a client's mistake, not a position.
MAX_EVENT_ID = 2**62


def _job_not_found(job_id: str) -> RestError:
    return RestError(404, f"Job {job_id} not found (unknown, or expired from the job store).")


def job_routes(jobmanager: JobManager, submit_wait: float, rest_url: str) -> APIRouter:
    router = APIRouter()

    def archived_only() -> list[Any]:
        """Finished jobs of earlier JobManager runs (from the job store), not also live here."""
        return [record for job_id, record in jobmanager.archived.items() if job_id not in jobmanager.jobs]

    def job_or_404(job_id: str) -> JobMaster:
        job = jobmanager.jobs.get(job_id)
        if job is None:
            raise _job_not_found(job_id)
        return job

    @router.get("/jobs", summary="Job ids and states")
    async def jobs() -> dict[str, Any]:
        live = [{"id": job.job_id, "status": job.status.value} for job in jobmanager.jobs.values()]
        return {"jobs": live + [{"id": r.job_id, "status": r.status} for r in archived_only()]}

    @router.get("/jobs/overview", summary="Overview of all jobs")
    async def jobs_overview() -> dict[str, Any]:
        live = [snapshots.job_overview(job) for job in jobmanager.jobs.values()]
        return {"jobs": live + [snapshots.overview_from_details(record.details or {}) for record in archived_only()]}

    @router.post(
        "/jobs",
        status_code=202,
        summary="Submit a JobGraph (JSON)",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobGraph"}}},
            }
        },
    )
    async def submit_job(request: Request) -> JSONResponse:
        body = await request.body()
        if len(body) > MAX_JOB_GRAPH_BYTES:
            raise RestError(413, f"JobGraph is {len(body)} bytes; the limit is {MAX_JOB_GRAPH_BYTES} bytes.")
        try:
            job_graph = jobmanager.decode(body)
        except InvalidJobGraph as exc:
            raise RestError(400, *exc.errors) from None
        job_id = job_graph.job_id
        assert job_id is not None
        try:
            answer = await jobmanager.ask_self(SubmitJob(job_graph=job_graph), timeout=submit_wait)
        except TimeoutError:
            # Accepted but the sources are not running yet (e.g. waiting for slots).
            answer = None
        if isinstance(answer, JobSubmissionFailure) and answer.kind == "invalid":
            raise RestError(400, answer.reason)
        if isinstance(answer, JobSubmissionFailure) and answer.kind == "duplicate":
            raise RestError(409, f"Job {job_id} was already submitted; query /jobs/{job_id}.")
        if job_id not in jobmanager.jobs:
            raise RestError(503, "The JobManager did not accept the job in time; retry the submission.")
        return JSONResponse(
            {"jobid": job_id, "jobUrl": f"/jobs/{job_id}"},
            status_code=202,
            headers={"Location": f"{rest_url}/jobs/{job_id}"},
        )

    @router.get("/jobs/{job_id}", summary="Job details")
    async def job_details(job_id: str) -> dict[str, Any]:
        if job_id not in jobmanager.jobs and job_id in jobmanager.archived:
            return jobmanager.archived[job_id].details or {}
        return snapshots.job_details(job_or_404(job_id))

    def details_and_root(job_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A live or archived job's details and its newest exception-history entry."""
        job = jobmanager.jobs.get(job_id)
        if job is not None:
            root = job.root_exception.to_json() if job.root_exception is not None else None
            return snapshots.job_details(job), root
        record = jobmanager.archived.get(job_id)
        if record is None:
            raise _job_not_found(job_id)
        entries = (record.exceptions or {}).get("exceptionHistory", {}).get("entries") or [None]
        return record.details or {}, entries[0]

    def state_of(job_id: str) -> str | None:
        """A live or archived job's state, without building its details."""
        job = jobmanager.jobs.get(job_id)
        if job is not None:
            return job.status.value
        record = jobmanager.archived.get(job_id)
        if record is None:
            raise _job_not_found(job_id)
        return (record.details or {}).get("state", record.status)

    @router.get("/jobs/{job_id}/status", summary="The job's status")
    async def job_status(job_id: str) -> dict[str, Any]:
        return {"status": state_of(job_id)}

    @router.get(
        "/jobs/{job_id}/execution-result",
        summary="IN_PROGRESS, or the ended job's result (application-status, net-runtime, failure-cause)",
    )
    async def execution_result(job_id: str) -> dict[str, Any]:
        details, root = details_and_root(job_id)
        cause = None
        if root is not None:
            cause = complete_failure_cause({"class": root["exceptionName"], "stack-trace": root["stacktrace"]})
        return snapshots.execution_result(details, cause)

    @router.get("/jobs/{job_id}/vertices/{vertex_id}", summary="A vertex's subtasks and where they run")
    async def vertex_details(job_id: str, vertex_id: str) -> dict[str, Any]:
        job = job_or_404(job_id)
        ejv = job.graph.vertices.get(vertex_id) if job.graph is not None else None
        if ejv is None:
            raise RestError(404, f"Job {job_id} has no vertex {vertex_id!r}.")
        return snapshots.vertex_subtasks(jobmanager, job, ejv)

    @router.get("/jobs/{job_id}/config", summary="The job's execution configuration")
    async def job_config(job_id: str) -> dict[str, Any]:
        return snapshots.job_config(job_or_404(job_id))

    @router.get("/jobs/{job_id}/plan", summary="The job's dataflow plan")
    async def job_plan(job_id: str) -> dict[str, Any]:
        return {"plan": snapshots.job_plan(job_or_404(job_id))}

    @router.get("/jobs/{job_id}/exceptions", summary="The job's exception history")
    async def job_exceptions(job_id: str, maxExceptions: int = Query(20, ge=1, le=1000)) -> dict[str, Any]:  # noqa: N803
        if job_id not in jobmanager.jobs and job_id in jobmanager.archived:
            return jobmanager.archived[job_id].exceptions or {}
        return snapshots.job_exceptions(job_or_404(job_id), maxExceptions)

    @router.get("/jobs/{job_id}/accumulators", summary="Records and bytes per vertex, and input splits")
    async def job_accumulators(job_id: str) -> dict[str, Any]:
        return snapshots.job_accumulators(job_or_404(job_id))

    @router.patch("/jobs/{job_id}", status_code=202, summary="Cancel a job (mode=cancel)")
    async def cancel_job(job_id: str, mode: str = Query("cancel")) -> dict[str, Any]:
        if mode != "cancel":
            raise RestError(400, f"Unsupported mode {mode!r}: use mode=cancel (stop is POST /jobs/:id/stop).")
        # As Flink's Dispatcher: cancelling a CANCELED job again is acknowledged; a job that
        # ended otherwise cannot be cancelled any more (409).
        state = state_of(job_id)
        if state == JobStatus.CANCELED.value:
            return {}
        if job_id not in jobmanager.jobs:
            raise RestError(409, f"Job {job_id} already ended {state}; it cannot be cancelled.")
        answer = await jobmanager.ask_self(CancelJob(job_id=job_id), timeout=jobmanager.ask_timeout)
        if not isinstance(answer, CancellationSuccess):
            raise RestError(409, getattr(answer, "reason", "cancellation failed"))
        return {}

    @router.get("/jobs/{job_id}/events", summary="JobStatusChanged events (long poll)")
    async def job_events(
        job_id: str,
        since: int = Query(
            0, ge=0, le=MAX_EVENT_ID, description="First event id to return (the 'next' of the last answer)."
        ),
        timeout: float = Query(0.0, ge=0.0, le=MAX_EVENT_WAIT_SECONDS, description="Seconds to wait for an event."),
    ) -> dict[str, Any]:
        job = job_or_404(job_id)
        events = await jobmanager.events.wait(since, job_id, timeout)
        next_id = events[-1].sequence + 1 if events else max(since, 0)
        if not events and since > jobmanager.events.next_sequence:
            next_id = jobmanager.events.next_sequence
        return {
            "events": [
                {
                    "id": item.sequence,
                    "job-id": item.event.job_id,
                    "old-state": item.event.old_state,
                    "new-state": item.event.new_state,
                    "timestamp": int(item.event.timestamp * 1000),
                }
                for item in events
            ],
            "next": next_id,
            "state": job.status.value,
        }

    return router
