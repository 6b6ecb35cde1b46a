"""REST: jobs (submission, overview, details, plan, exceptions, cancellation, events).

Everything goes through the JobManager's RestfulGateway (jobmanager/restful_gateway.py),
which merges live and archived jobs and refuses with typed errors (rest/errors.py maps
them); the JSON shapes are job_views.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from flink_runtime.rest import job_views
from flink_runtime.rest.errors import RestError
from flink_runtime.rest.jar_routes import is_multipart, refuse_java_job_graph
from flink_runtime.rest.serialized_throwable import complete_failure_cause

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

MAX_JOB_GRAPH_BYTES = 16 << 20
MAX_EVENT_WAIT_SECONDS = 60.0
# Event ids are counters; anything past this is a client's mistake, not a position.
MAX_EVENT_ID = 2**62


def job_routes(gateway: RestfulGateway, submit_wait: float, rest_url: str) -> APIRouter:
    router = APIRouter()

    @router.get("/jobs", summary="Job ids and states")
    async def jobs() -> dict[str, Any]:
        return {"jobs": [{"id": job.job_id, "status": job.state} for job in gateway.list_jobs()]}

    @router.get("/jobs/overview", summary="Overview of all jobs")
    async def jobs_overview() -> dict[str, Any]:
        return {"jobs": [job_views.job_overview(job) for job in gateway.list_jobs()]}

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
        if is_multipart(request):  # Flink's CLI: a Java-serialized JobGraph and JARs
            return await refuse_java_job_graph(request)
        body = await request.body()
        if len(body) > MAX_JOB_GRAPH_BYTES:
            raise RestError(413, f"JobGraph is {len(body)} bytes; the limit is {MAX_JOB_GRAPH_BYTES} bytes.")
        job_id = await gateway.submit_job(body, submit_wait)
        return JSONResponse(
            {"jobid": job_id, "jobUrl": f"/jobs/{job_id}"},
            status_code=202,
            headers={"Location": f"{rest_url}/jobs/{job_id}"},
        )

    @router.get("/jobs/{job_id}", summary="Job details")
    async def job_details(job_id: str) -> dict[str, Any]:
        return job_views.job_details(gateway.job_details(job_id))

    @router.get("/jobs/{job_id}/status", summary="The job's status")
    async def job_status(job_id: str) -> dict[str, Any]:
        return {"status": gateway.job_state(job_id)}

    @router.get(
        "/jobs/{job_id}/execution-result",
        summary="IN_PROGRESS, or the ended job's result (application-status, net-runtime, failure-cause)",
    )
    async def execution_result(job_id: str) -> dict[str, Any]:
        details, root = gateway.job_result(job_id)
        cause = None
        if root is not None:
            cause = complete_failure_cause({"class": root.exception_name, "stack-trace": root.stacktrace})
        return job_views.execution_result(details, cause)

    @router.get("/jobs/{job_id}/vertices/{vertex_id}", summary="A vertex's subtasks and where they run")
    async def vertex_details(job_id: str, vertex_id: str) -> dict[str, Any]:
        return job_views.vertex_subtasks(gateway.vertex_subtasks(job_id, vertex_id))

    # `:int`: only a number matches, so /subtasks/metrics (metric_routes, included after
    # this router) is not taken for a subtask index.
    @router.get(
        "/jobs/{job_id}/vertices/{vertex_id}/subtasks/{subtask_index:int}",
        summary="A subtask's current attempt, with its prior attempts",
    )
    async def subtask_details(job_id: str, vertex_id: str, subtask_index: int) -> dict[str, Any]:
        return job_views.subtask_details(gateway.subtask(job_id, vertex_id, subtask_index))

    @router.get(
        "/jobs/{job_id}/vertices/{vertex_id}/subtasks/{subtask_index:int}/attempts/{attempt:int}",
        summary="One attempt of a subtask, current or prior",
    )
    async def subtask_attempt(job_id: str, vertex_id: str, subtask_index: int, attempt: int) -> dict[str, Any]:
        return job_views.subtask_attempt(gateway.subtask_attempt(job_id, vertex_id, subtask_index, attempt))

    @router.get("/jobs/{job_id}/config", summary="The job's execution configuration")
    async def job_config(job_id: str) -> dict[str, Any]:
        return job_views.job_config(gateway.job_configuration(job_id))

    @router.get("/jobs/{job_id}/plan", summary="The job's dataflow plan")
    async def job_plan(job_id: str) -> dict[str, Any]:
        job = gateway.job_plan(job_id)
        return {"plan": job_views.job_plan(job.job_id, job.name, job.job_type, job.nodes)}

    @router.get("/jobs/{job_id}/exceptions", summary="The job's exception history")
    async def job_exceptions(job_id: str, maxExceptions: int = Query(20, ge=1, le=1000)) -> dict[str, Any]:  # noqa: N803
        return job_views.job_exceptions(gateway.job_exceptions(job_id), maxExceptions)

    @router.get("/jobs/{job_id}/accumulators", summary="Records and bytes per vertex, and input splits")
    async def job_accumulators(job_id: str) -> dict[str, Any]:
        return job_views.job_accumulators(gateway.job_accumulators(job_id))

    @router.patch("/jobs/{job_id}", status_code=202, summary="Cancel a job (mode=cancel)")
    async def cancel_job(job_id: str, mode: str = Query("cancel")) -> dict[str, Any]:
        if mode != "cancel":
            raise RestError(400, f"Unsupported mode {mode!r}: use mode=cancel (stop is POST /jobs/:id/stop).")
        await gateway.cancel_job(job_id)
        return {}

    @router.get("/jobs/{job_id}/events", summary="JobStatusChanged events (long poll)")
    async def job_events(
        job_id: str,
        since: int = Query(
            0, ge=0, le=MAX_EVENT_ID, description="First event id to return (the 'next' of the last answer)."
        ),
        timeout: float = Query(0.0, ge=0.0, le=MAX_EVENT_WAIT_SECONDS, description="Seconds to wait for an event."),
    ) -> dict[str, Any]:
        answer = await gateway.job_events(job_id, since, timeout)
        return {
            "events": [
                {
                    "id": item.sequence,
                    "job-id": item.event.job_id,
                    "old-state": item.event.old_state,
                    "new-state": item.event.new_state,
                    "timestamp": int(item.event.timestamp * 1000),
                }
                for item in answer.events
            ],
            "next": answer.next,
            "state": answer.state,
        }

    return router
