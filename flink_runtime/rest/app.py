"""The REST API (FastAPI), with Flink REST API v1 paths and field names.

Reads come straight from JobManager state (same event loop); submissions and
cancellations go through the JobManager's mailbox. Every error answers
`{"errors": [...]}` with a 4xx/5xx status, as Flink's REST API does.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flink_runtime import __version__
from flink_runtime import configuration as cfg
from flink_runtime.blob import MAX_BLOB_BYTES, InvalidBlob, name_problem, parse_blob_key
from flink_runtime.blob.store import BlobStoreFull
from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobgraph.validation import InvalidJobGraph
from flink_runtime.jobmanager import snapshots
from flink_runtime.jobmanager.errors import (
    InvalidRequest,
    JobNotFound,
    JobNotRunning,
    JobRequestError,
    OperationInProgress,
    RequestNotFound,
)
from flink_runtime.rest.guard import internal_error
from flink_runtime.rpc.messages import (
    CancelJob,
    CancellationSuccess,
    JobSubmissionFailure,
    SubmitJob,
)
from flink_runtime.security import masked_config

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.jobmanager.jobmaster import JobMaster

MAX_JOB_GRAPH_BYTES = 16 << 20
_TRIGGER_ID = re.compile(r"[0-9a-fA-F]{32}")
MAX_EVENT_WAIT_SECONDS = 60.0
# Event ids are counters; anything past this is a client's mistake, not a position.
MAX_EVENT_ID = 2**62


class RestError(Exception):
    def __init__(self, status: int, *errors: str) -> None:
        super().__init__("; ".join(errors))
        self.status = status
        self.errors = list(errors)


# How the JobManager's refusals of a request about a job are answered.
STATUS_OF_REFUSAL: dict[type[JobRequestError], int] = {
    JobNotFound: 404,
    RequestNotFound: 404,
    JobNotRunning: 409,
    OperationInProgress: 409,
    InvalidRequest: 400,
}


def status_of_refusal(error: JobRequestError) -> int:
    return next((status for kind, status in STATUS_OF_REFUSAL.items() if isinstance(error, kind)), 400)


def _error_response(status: int, errors: list[str]) -> JSONResponse:
    return JSONResponse({"errors": errors}, status_code=status)


# -- savepoints: request bodies ------------------------------------------------------------------
#
# Flink's SavepointTriggerRequestBody and StopWithSavepointRequestBody, field names and all
# (kebab case for the one, camel case for the other, as in Flink). Unknown fields are
# refused: "cancelJob" on /savepoints would otherwise quietly take a savepoint and leave
# the job running.

SavepointFormatType = Literal["CANONICAL", "NATIVE"]


class SavepointTriggerRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /jobs/:id/savepoints."""

    target_directory: str | None = msgspec.field(default=None, name="target-directory")
    cancel_job: bool = msgspec.field(default=False, name="cancel-job")
    # Accepted from Flink clients, not passed on: the JobManager has one savepoint format.
    format_type: SavepointFormatType | None = msgspec.field(default=None, name="formatType")
    # The client's own request id: a retry with the same one gets the same request.
    trigger_id: str | None = msgspec.field(default=None, name="triggerId")


class StopWithSavepointRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /jobs/:id/stop."""

    target_directory: str | None = msgspec.field(default=None, name="targetDirectory")
    drain: bool = False
    format_type: SavepointFormatType | None = msgspec.field(default=None, name="formatType")
    trigger_id: str | None = msgspec.field(default=None, name="triggerId")


_Body = TypeVar("_Body", SavepointTriggerRequest, StopWithSavepointRequest)


def _decode_savepoint_body(body: bytes, kind: type[_Body]) -> _Body:
    """The request body as `kind`; an empty body means every default. RestError 400 names the field."""
    if not body.strip():
        return kind()
    try:
        request = msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        fields = ", ".join(field.encode_name for field in msgspec.structs.fields(kind) if field.name != "trigger_id")
        raise RestError(400, f"Invalid request body: {exc}; expected a JSON object with {fields}.") from None
    except msgspec.DecodeError as exc:
        raise RestError(400, f"Request body is not JSON: {exc}.") from None
    if request.trigger_id is not None and not _TRIGGER_ID.fullmatch(request.trigger_id):
        raise RestError(
            400, f"triggerId must be 32 hexadecimal digits (Flink's TriggerId), got {request.trigger_id!r}."
        )
    return request


def _request_body_schema(kind: type[msgspec.Struct]) -> dict[str, Any]:
    (_,), components = msgspec.json.schema_components([kind])
    return {"requestBody": {"content": {"application/json": {"schema": components[kind.__name__]}}}}


_SAVEPOINT_TRIGGERED = {
    202: {"description": 'Accepted; poll GET /jobs/:id/savepoints/:triggerid with the "request-id".'}
}
_UNKNOWN_JOB = {404: {"description": "Unknown job, or unknown request id."}}
_REFUSED = {
    400: {"description": "Malformed body."},
    409: {"description": "The job is not RUNNING, or another savepoint or stop of it is in progress."},
}


# -- end of savepoints: request bodies -----------------------------------------------------------


def create_app(jobmanager: JobManager, config: Configuration, rest_url: str = "") -> FastAPI:
    app = FastAPI(
        title="flink-runtime REST API",
        version=__version__,
        description="Flink REST API v1 paths and fields for a Python JobManager.",
    )
    submit_wait = config.get_seconds(cfg.REST_SUBMIT_WAIT)

    # -- errors ----------------------------------------------------------------------------------

    @app.exception_handler(RestError)
    async def rest_error(request: Request, exc: RestError) -> JSONResponse:
        return _error_response(exc.status, exc.errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "Not found: " + request.url.path if exc.status_code == 404 else str(exc.detail)
        return _error_response(exc.status_code, [message])

    @app.exception_handler(Exception)
    async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
        status, body = internal_error(request.scope, exc)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        return _error_response(400, errors)

    def archived_only() -> list[Any]:
        """Finished jobs of earlier JobManager runs (from the job store), not also live here."""
        return [record for job_id, record in jobmanager.archived.items() if job_id not in jobmanager.jobs]

    def archived_overview(record: Any) -> dict[str, Any]:
        details = record.details or {}
        keys = ("jid", "name", "state", "start-time", "end-time", "duration")
        return {key: details.get(key) for key in keys} | {"last-modification": details.get("end-time"), "tasks": {}}

    def job_or_404(job_id: str) -> JobMaster:
        job = jobmanager.jobs.get(job_id)
        if job is None:
            raise RestError(404, f"Job {job_id} not found (unknown, or expired from the job store).")
        return job

    # -- cluster ---------------------------------------------------------------------------------

    @app.get("/overview", summary="Cluster overview")
    async def overview() -> dict[str, Any]:
        return jobmanager.cluster_overview()

    @app.get("/config", summary="Web UI configuration")
    async def web_config() -> dict[str, Any]:
        offset = datetime.datetime.now().astimezone().utcoffset() or datetime.timedelta()
        return {
            "refresh-interval": 3000,
            "timezone-name": str(datetime.datetime.now().astimezone().tzinfo),
            "timezone-offset": int(offset.total_seconds() * 1000),
            "flink-version": __version__,
            "flink-revision": "",
            "features": {"web-submit": False, "web-cancel": True, "web-rescale": False, "web-history": False},
        }

    @app.get("/jobmanager/config", summary="The JobManager's configuration")
    async def jobmanager_config() -> list[dict[str, str]]:
        masked = masked_config(jobmanager.config.to_dict())
        return [{"key": key, "value": value} for key, value in sorted(masked.items())]

    @app.get("/taskmanagers", summary="Registered TaskManagers")
    async def taskmanagers() -> dict[str, Any]:
        return {
            "taskmanagers": [
                snapshots.taskmanager_info(jobmanager, registration)
                for registration in jobmanager.task_managers.values()
            ]
        }

    @app.get("/taskmanagers/{taskmanager_id}", summary="One TaskManager")
    async def taskmanager(taskmanager_id: str) -> dict[str, Any]:
        registration = jobmanager.task_managers.get(taskmanager_id)
        if registration is None:
            raise RestError(404, f"TaskManager {taskmanager_id} not found.")
        return snapshots.taskmanager_info(jobmanager, registration)

    # -- jobs --------------------------------------------------------------------------------------

    @app.get("/jobs", summary="Job ids and states")
    async def jobs() -> dict[str, Any]:
        live = [{"id": job.job_id, "status": job.status.value} for job in jobmanager.jobs.values()]
        return {"jobs": live + [{"id": r.job_id, "status": r.status} for r in archived_only()]}

    @app.get("/jobs/overview", summary="Overview of all jobs")
    async def jobs_overview() -> dict[str, Any]:
        live = [snapshots.job_overview(job) for job in jobmanager.jobs.values()]
        return {"jobs": live + [archived_overview(record) for record in archived_only()]}

    @app.post(
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

    @app.get("/jobs/{job_id}", summary="Job details")
    async def job_details(job_id: str) -> dict[str, Any]:
        if job_id not in jobmanager.jobs and job_id in jobmanager.archived:
            return jobmanager.archived[job_id].details or {}
        return snapshots.job_details(job_or_404(job_id))

    @app.get("/jobs/{job_id}/vertices/{vertex_id}", summary="A vertex's subtasks and where they run")
    async def vertex_details(job_id: str, vertex_id: str) -> dict[str, Any]:
        job = job_or_404(job_id)
        ejv = job.graph.vertices.get(vertex_id) if job.graph is not None else None
        if ejv is None:
            raise RestError(404, f"Job {job_id} has no vertex {vertex_id!r}.")
        return snapshots.vertex_subtasks(jobmanager, job, ejv)

    @app.get("/jobs/{job_id}/plan", summary="The job's dataflow plan")
    async def job_plan(job_id: str) -> dict[str, Any]:
        return {"plan": snapshots.job_plan(job_or_404(job_id))}

    @app.get("/jobs/{job_id}/exceptions", summary="The job's exception history")
    async def job_exceptions(job_id: str, maxExceptions: int = Query(20, ge=1, le=1000)) -> dict[str, Any]:  # noqa: N803
        if job_id not in jobmanager.jobs and job_id in jobmanager.archived:
            return jobmanager.archived[job_id].exceptions or {}
        return snapshots.job_exceptions(job_or_404(job_id), maxExceptions)

    @app.patch("/jobs/{job_id}", status_code=202, summary="Cancel a job (mode=cancel)")
    async def cancel_job(job_id: str, mode: str = Query("cancel")) -> dict[str, Any]:
        if mode != "cancel":
            raise RestError(400, f"Unsupported mode {mode!r}: use mode=cancel (stop is POST /jobs/:id/stop).")
        job_or_404(job_id)
        answer = await jobmanager.ask_self(CancelJob(job_id=job_id), timeout=jobmanager.ask_timeout)
        if not isinstance(answer, CancellationSuccess):
            raise RestError(409, getattr(answer, "reason", "cancellation failed"))
        return {}

    @app.get("/jobs/{job_id}/events", summary="JobStatusChanged events (long poll)")
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

    # -- savepoints and checkpoints (JobManager.trigger_savepoint & co.) ----------------------------
    #
    # The JobManager answers at once with a request id; the savepoint completes later and
    # its outcome is polled (Flink's asynchronous operations). The JobManager's
    # Its refusals (jobmanager/errors.py) are answered with STATUS_OF_REFUSAL.

    @app.exception_handler(JobRequestError)
    async def job_request_error(request: Request, exc: JobRequestError) -> JSONResponse:
        return _error_response(status_of_refusal(exc), [exc.message])

    @app.post(
        "/jobs/{job_id}/savepoints",
        status_code=202,
        summary="Trigger a savepoint (cancel-job: then cancel the job); answers a request-id",
        openapi_extra=_request_body_schema(SavepointTriggerRequest),
        responses={**_SAVEPOINT_TRIGGERED, **_REFUSED, **_UNKNOWN_JOB},
    )
    async def trigger_savepoint(job_id: str, request: Request) -> dict[str, str]:
        body = _decode_savepoint_body(await request.body(), SavepointTriggerRequest)
        request_id = await jobmanager.trigger_savepoint(job_id, body.target_directory, body.cancel_job, body.trigger_id)
        return {"request-id": request_id}

    @app.get(
        "/jobs/{job_id}/savepoints/{triggerid}",
        summary="Status of a savepoint (or stop-with-savepoint) request: IN_PROGRESS or COMPLETED",
        responses=_UNKNOWN_JOB,
    )
    async def savepoint_status(job_id: str, triggerid: str) -> dict[str, Any]:
        return jobmanager.savepoint_status(job_id, triggerid)

    @app.post(
        "/jobs/{job_id}/stop",
        status_code=202,
        summary="Stop the job with a savepoint (drain: end its input first); answers a request-id",
        openapi_extra=_request_body_schema(StopWithSavepointRequest),
        responses={**_SAVEPOINT_TRIGGERED, **_REFUSED, **_UNKNOWN_JOB},
    )
    async def stop_with_savepoint(job_id: str, request: Request) -> dict[str, str]:
        body = _decode_savepoint_body(await request.body(), StopWithSavepointRequest)
        request_id = await jobmanager.stop_with_savepoint(job_id, body.target_directory, body.drain, body.trigger_id)
        return {"request-id": request_id}

    @app.get("/jobs/{job_id}/checkpoints", summary="Checkpoint statistics of a job", responses=_UNKNOWN_JOB)
    async def checkpoint_stats(job_id: str) -> dict[str, Any]:
        return jobmanager.checkpoint_stats(job_id)

    # -- end of savepoints and checkpoints ---------------------------------------------------------

    # -- blobs: job libraries, kept by content hash (flink_runtime.blob) ------------------------------

    blob_store = jobmanager.blob_store

    @app.post(
        "/blobs",
        status_code=201,
        summary="Upload a job library (.py, .zip, .whl, .egg); answers its blob key",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def upload_blob(request: Request, name: str = Query(..., description="The file name.")) -> JSONResponse:
        problem = name_problem(name)
        if problem:
            raise RestError(400, f"Cannot store the library: {problem}.")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BLOB_BYTES:
            raise RestError(413, f"{name} is {declared} bytes; a library may have at most {MAX_BLOB_BYTES} bytes.")
        # Streamed to a file as it arrives (hashed on the way): four concurrent 250 MiB
        # uploads once held a gigabyte in the JobManager's memory.
        upload = await asyncio.to_thread(blob_store.upload, name)
        try:
            async for chunk in request.stream():
                if upload.size + len(chunk) > MAX_BLOB_BYTES:
                    raise RestError(413, f"{name} is larger than the {MAX_BLOB_BYTES} bytes a library may have.")
                upload.write(chunk)
            key = await asyncio.to_thread(upload.commit)
        except BlobStoreFull as exc:
            raise RestError(413, f"Cannot store the library: {exc}.") from None
        except InvalidBlob as exc:
            raise RestError(400, f"Cannot store the library: {exc}.") from None
        finally:
            upload.abort()  # a no-op once committed
        return JSONResponse({"key": str(key)}, status_code=201, headers={"Location": f"{rest_url}{key.url_path}"})

    @app.get("/blobs/{sha256}/{name}", summary="Download a job library by its blob key")
    async def download_blob(sha256: str, name: str) -> FileResponse:
        try:
            key = parse_blob_key(f"blob:{sha256}/{name}")
        except ValueError:
            key = None
        path = blob_store.get(key) if key is not None else None
        if path is None:
            raise RestError(404, f"No library blob:{sha256}/{name} on this JobManager; upload it with POST /blobs.")
        return FileResponse(path, media_type="application/octet-stream", filename=name)

    # -- OpenAPI: publish the JobGraph schema as a component ---------------------------------------

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            (_,), components = msgspec.json.schema_components([JobGraph], ref_template="#/components/schemas/{name}")
            schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
