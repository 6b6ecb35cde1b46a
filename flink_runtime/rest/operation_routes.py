"""REST: savepoints, stop-with-savepoint and checkpoints, Flink's asynchronous operations.

The JobManager answers a trigger at once with a request id; the operation completes
later and its outcome is polled. The JobManager's refusals (jobmanager/errors.py) are
answered by the handlers in rest/errors.py. A status answers as Flink's
AsynchronousOperationResult: `"operation": null` while in progress, and a failure-cause
with the `serialized-throwable` Flink's own client reads (serialized_throwable.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
from fastapi import APIRouter, Request

from flink_runtime.rest.errors import RestError
from flink_runtime.rest.serialized_throwable import complete_failure_cause

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

_TRIGGER_ID = re.compile(r"[0-9a-fA-F]{32}")

# -- request bodies --------------------------------------------------------------------------------
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


class CheckpointTriggerRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /jobs/:id/checkpoints. The state backends here write one kind of snapshot, a
    full one: FULL, INCREMENTAL and CONFIGURED all take it."""

    checkpoint_type: Literal["FULL", "INCREMENTAL", "CONFIGURED"] | None = msgspec.field(
        default=None, name="checkpointType"
    )
    trigger_id: str | None = msgspec.field(default=None, name="triggerId")


_Body = TypeVar("_Body", SavepointTriggerRequest, StopWithSavepointRequest, CheckpointTriggerRequest)


def decode_body(body: bytes, kind: type[_Body]) -> _Body:
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


def operation_result(status: dict[str, Any]) -> dict[str, Any]:
    """A JobManager's request status as Flink answers it (`operation` null while in
    progress; a failure-cause with its serialized-throwable)."""
    operation = status.get("operation")
    if isinstance(operation, dict) and isinstance(operation.get("failure-cause"), dict):
        operation = {**operation, "failure-cause": complete_failure_cause(operation["failure-cause"])}
    return {**status, "operation": operation}


def _request_body_schema(kind: type[msgspec.Struct]) -> dict[str, Any]:
    (_,), components = msgspec.json.schema_components([kind])
    return {"requestBody": {"content": {"application/json": {"schema": components[kind.__name__]}}}}


_SAVEPOINT_TRIGGERED = {
    202: {"description": 'Accepted; poll GET /jobs/:id/savepoints/:triggerid with the "request-id".'}
}
_CHECKPOINT_TRIGGERED = {
    202: {"description": 'Accepted; poll GET /jobs/:id/checkpoints/:triggerid with the "request-id".'}
}
_UNKNOWN_JOB = {404: {"description": "Unknown job, or unknown request id."}}
_REFUSED = {
    400: {"description": "Malformed body, or the operation cannot be carried out (e.g. its storage is not writable)."},
    409: {"description": "The job is not RUNNING, or another request of the kind is in progress."},
}


def operation_routes(gateway: RestfulGateway) -> APIRouter:
    router = APIRouter()

    @router.post(
        "/jobs/{job_id}/savepoints",
        status_code=202,
        summary="Trigger a savepoint (cancel-job: then cancel the job); answers a request-id",
        openapi_extra=_request_body_schema(SavepointTriggerRequest),
        responses={**_SAVEPOINT_TRIGGERED, **_REFUSED, **_UNKNOWN_JOB},
    )
    async def trigger_savepoint(job_id: str, request: Request) -> dict[str, str]:
        body = decode_body(await request.body(), SavepointTriggerRequest)
        request_id = await gateway.trigger_savepoint(job_id, body.target_directory, body.cancel_job, body.trigger_id)
        return {"request-id": request_id}

    @router.get(
        "/jobs/{job_id}/savepoints/{triggerid}",
        summary="Status of a savepoint (or stop-with-savepoint) request: IN_PROGRESS or COMPLETED",
        responses=_UNKNOWN_JOB,
    )
    async def savepoint_status(job_id: str, triggerid: str) -> dict[str, Any]:
        return operation_result(gateway.savepoint_status(job_id, triggerid))

    @router.post(
        "/jobs/{job_id}/stop",
        status_code=202,
        summary="Stop the job with a savepoint (drain: end its input first); answers a request-id",
        openapi_extra=_request_body_schema(StopWithSavepointRequest),
        responses={**_SAVEPOINT_TRIGGERED, **_REFUSED, **_UNKNOWN_JOB},
    )
    async def stop_with_savepoint(job_id: str, request: Request) -> dict[str, str]:
        body = decode_body(await request.body(), StopWithSavepointRequest)
        request_id = await gateway.stop_with_savepoint(job_id, body.target_directory, body.drain, body.trigger_id)
        return {"request-id": request_id}

    @router.post(
        "/jobs/{job_id}/checkpoints",
        status_code=202,
        summary="Trigger a checkpoint (FULL, INCREMENTAL and CONFIGURED take the same full snapshot)",
        openapi_extra=_request_body_schema(CheckpointTriggerRequest),
        responses={**_CHECKPOINT_TRIGGERED, **_REFUSED, **_UNKNOWN_JOB},
    )
    async def trigger_checkpoint(job_id: str, request: Request) -> dict[str, str]:
        body = decode_body(await request.body(), CheckpointTriggerRequest)
        return {"request-id": await gateway.trigger_checkpoint(job_id, body.trigger_id)}

    @router.get("/jobs/{job_id}/checkpoints", summary="Checkpoint statistics of a job", responses=_UNKNOWN_JOB)
    async def checkpoint_stats(job_id: str) -> dict[str, Any]:
        return gateway.checkpoint_stats(job_id)

    # Before /checkpoints/{triggerid}, which would take "config" for a trigger id.
    @router.get("/jobs/{job_id}/checkpoints/config", summary="Checkpointing configuration of a job")
    async def checkpoint_config(job_id: str) -> dict[str, Any]:
        return gateway.checkpoint_config(job_id)

    @router.get(
        "/jobs/{job_id}/checkpoints/details/{checkpoint_id}",
        summary="One checkpoint's statistics, per job vertex",
        responses={404: {"description": "Unknown job, or a checkpoint not in the job's statistics."}},
    )
    async def checkpoint_details(job_id: str, checkpoint_id: int) -> dict[str, Any]:
        return gateway.checkpoint_details(job_id, checkpoint_id)

    @router.get(
        "/jobs/{job_id}/checkpoints/details/{checkpoint_id}/subtasks/{vertex_id}",
        summary="One checkpoint's statistics of one job vertex, per subtask",
        responses={404: {"description": "Unknown job, checkpoint, or vertex."}},
    )
    async def checkpoint_subtask_details(job_id: str, checkpoint_id: int, vertex_id: str) -> dict[str, Any]:
        return gateway.checkpoint_subtask_details(job_id, checkpoint_id, vertex_id)

    @router.get(
        "/jobs/{job_id}/checkpoints/{triggerid}",
        summary="Status of a checkpoint request: IN_PROGRESS, or COMPLETED with its checkpointId",
        responses=_UNKNOWN_JOB,
    )
    async def checkpoint_status(job_id: str, triggerid: str) -> dict[str, Any]:
        return operation_result(gateway.checkpoint_status(job_id, triggerid))

    return router
