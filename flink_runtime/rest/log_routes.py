"""REST: log files, as Flink serves them, and a job's task lines (ours).

Flink's paths: `/jobmanager/log`, `/jobmanager/stdout`, `/jobmanager/logs` (LogListInfo:
`{"logs": [{name, size, mtime}]}`), `/jobmanager/logs/:name`, and the same under
`/taskmanagers/:id/`. A TaskManager's files are fetched through the JobManager over
RPC (taskmanager/log_service.py); a TaskManager that does not answer is a 504 (503
when it cannot be asked at all), with the reason.

Files answer text/plain and never more than MAX_ANSWER_BYTES (1 MiB): without a
`Range` header the file's tail (206 with Content-Range when that is not the whole
file); `Range: bytes=a-b`, `bytes=a-` and `bytes=-n` answer 206, a range outside the
file 416, a malformed one 400 (logs/ranges.py).

Ours: `/jobs/:id/vertices/:vid/subtasks/:n/log` (text) and `/jobs/:id/log?vertex=&subtask=&since=`
(JSON, what `flink-runtime logs` polls): the job's task-tagged records from every
registered TaskManager, merged by time; TaskManagers of a MiniCluster share one log,
so a record read twice is kept once.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from flink_runtime.logs import service
from flink_runtime.logs.ranges import MAX_ANSWER_BYTES, ByteRange, InvalidRange, parse_range
from flink_runtime.rest.errors import RestError
from flink_runtime.rpc.messages import (
    LogFileChunk,
    LogFileRefused,
    LogFiles,
    Message,
    RequestLogFile,
    RequestLogFiles,
    RequestTaskLog,
    TaskLogLines,
)
from flink_runtime.rpc.service import AskTimeoutError, RpcException

if TYPE_CHECKING:
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

TEXT = "text/plain; charset=utf-8"
REFUSAL_STATUS = {"invalid-name": 400, "not-found": 404, "range": 416}
_STAMP_LENGTH = len("2026-11-23 10:31:04,977")
_STAMP_FORMAT = "%Y-%m-%d %H:%M:%S,%f"
NEXT_OVERLAP = datetime.timedelta(seconds=5)
_SINCE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}$")


def log_routes(gateway: RestfulGateway) -> APIRouter:
    router = APIRouter()

    # -- the JobManager's own files (read here, on a worker thread) -------------------------

    @router.get("/jobmanager/logs", summary="The JobManager's log files (Flink's LogListInfo)")
    async def jobmanager_logs() -> dict[str, Any]:
        return _log_list(await asyncio.to_thread(service.log_files))

    @router.get("/jobmanager/log", summary="The JobManager's log (text; Range supported)")
    async def jobmanager_log(request: Request) -> Response:
        return await _jobmanager_file(request, "log")

    @router.get("/jobmanager/stdout", summary="The JobManager's stdout (text; Range supported)")
    async def jobmanager_stdout(request: Request) -> Response:
        return await _jobmanager_file(request, "stdout")

    @router.get("/jobmanager/logs/{name}", summary="One of the JobManager's log files (text; Range supported)")
    async def jobmanager_log_file(name: str, request: Request) -> Response:
        return await _jobmanager_file(request, name=name)

    async def _jobmanager_file(request: Request, kind: str = "", name: str = "") -> Response:
        byte_range = _range_of(request)
        if kind:
            files = await asyncio.to_thread(service.log_files)
            name = _name_of_kind(files, kind, "The JobManager")
        message = _file_request(name, byte_range)
        return _file_response(await asyncio.to_thread(service.log_file, message))

    # -- a TaskManager's files (asked over RPC) ----------------------------------------------

    @router.get("/taskmanagers/{taskmanager_id}/logs", summary="A TaskManager's log files (Flink's LogListInfo)")
    async def taskmanager_logs(taskmanager_id: str) -> dict[str, Any]:
        registration = _taskmanager(taskmanager_id)
        return _log_list(await _ask(registration, RequestLogFiles(), LogFiles))

    @router.get("/taskmanagers/{taskmanager_id}/log", summary="A TaskManager's log (text; Range supported)")
    async def taskmanager_log(taskmanager_id: str, request: Request) -> Response:
        return await _taskmanager_file(taskmanager_id, request, "log")

    @router.get("/taskmanagers/{taskmanager_id}/stdout", summary="A TaskManager's stdout (text; Range supported)")
    async def taskmanager_stdout(taskmanager_id: str, request: Request) -> Response:
        return await _taskmanager_file(taskmanager_id, request, "stdout")

    @router.get("/taskmanagers/{taskmanager_id}/logs/{name}", summary="One of a TaskManager's log files (text)")
    async def taskmanager_log_file(taskmanager_id: str, name: str, request: Request) -> Response:
        return await _taskmanager_file(taskmanager_id, request, name=name)

    async def _taskmanager_file(taskmanager_id: str, request: Request, kind: str = "", name: str = "") -> Response:
        registration = _taskmanager(taskmanager_id)
        byte_range = _range_of(request)
        if kind:
            files = await _ask(registration, RequestLogFiles(), LogFiles)
            name = _name_of_kind(files, kind, f"TaskManager {taskmanager_id}")
        answer = await _ask(registration, _file_request(name, byte_range), (LogFileChunk, LogFileRefused))
        return _file_response(answer)

    def _taskmanager(taskmanager_id: str) -> RegisteredTaskManager:
        return gateway.task_manager(taskmanager_id)

    async def _ask(registration: RegisteredTaskManager, message: Message, expected: Any) -> Any:
        who = f"TaskManager {registration.task_manager_id}"
        try:
            answer = await gateway.ask_task_manager(registration, message)
        except AskTimeoutError:
            raise RestError(504, f"{who} did not answer within {gateway.ask_timeout:g} s.") from None
        except RpcException as exc:
            raise RestError(503, f"{who} could not be asked for its logs: {exc}") from None
        if not isinstance(answer, expected):
            raise RestError(503, f"{who} answered {type(answer).__name__} (an older version without logs?).")
        return answer

    # -- a job's task lines (ours) -------------------------------------------------------------

    @router.get(
        "/jobs/{job_id}/vertices/{vertex_id}/subtasks/{subtask_index}/log",
        summary="A subtask's log lines from every TaskManager (text)",
    )
    async def subtask_log(job_id: str, vertex_id: str, subtask_index: int = Path(ge=0, le=32767)) -> Response:
        _check_job(job_id, vertex_id, subtask_index)
        records, truncated, unreachable = await _job_records(job_id, vertex_id, subtask_index, "")
        headers = {"X-Truncated": "true"} if truncated else {}
        if unreachable:
            headers["X-Unreachable-TaskManagers"] = ", ".join(sorted(unreachable))
        text = "".join(f"{record}\n" for record in records)
        return Response(text, media_type=TEXT, headers=headers)

    @router.get("/jobs/{job_id}/log", summary="A job's task log lines (JSON; what `flink-runtime logs` reads)")
    async def job_log(
        job_id: str,
        vertex: str | None = Query(None, max_length=128, description="Only this vertex's lines."),
        subtask: int | None = Query(None, ge=0, le=32767, description="Only this subtask's lines."),
        since: str = Query(
            "", max_length=_STAMP_LENGTH, description="Only lines stamped at or after this (the `next` of an answer)."
        ),
    ) -> dict[str, Any]:
        if since and not _SINCE.match(since):
            raise RestError(
                400, f"since={since!r}: expected a time stamp 'YYYY-MM-DD HH:MM:SS,mmm' (an answer's next)."
            )
        state = _check_job(job_id, vertex, subtask)
        records, truncated, unreachable = await _job_records(job_id, vertex, subtask, since)
        return {
            "lines": records,
            "truncated": truncated,
            "next": _next_since(records, since),
            "state": state,
            "unreachable": [{"taskmanager": tm, "reason": reason} for tm, reason in sorted(unreachable.items())],
        }

    def _check_job(job_id: str, vertex_id: str | None, subtask_index: int | None) -> str:
        """The job's state; 404 for an unknown job, vertex or subtask."""
        state, vertices = gateway.job_vertices(job_id)
        if vertex_id is not None and vertices is not None:
            if vertex_id not in vertices:
                raise RestError(404, f"Job {job_id} has no vertex {vertex_id!r}.")
            if subtask_index is not None and subtask_index >= vertices[vertex_id]:
                raise RestError(
                    404,
                    f"Vertex {vertex_id!r} has {vertices[vertex_id]} subtasks; there is no subtask {subtask_index}.",
                )
        return state

    async def _job_records(
        job_id: str, vertex_id: str | None, subtask_index: int | None, since: str
    ) -> tuple[list[str], bool, dict[str, str]]:
        """(records oldest first, truncated, unreachable TaskManagers with why)."""
        registrations = gateway.task_manager_list()
        message = RequestTaskLog(job_id=job_id, vertex_id=vertex_id, subtask_index=subtask_index, since=since)
        answers = await asyncio.gather(
            *(_ask(registration, message, TaskLogLines) for registration in registrations), return_exceptions=True
        )
        merged: dict[str, None] = {}  # ordered, and a record read twice (a shared log) is kept once
        unreachable: dict[str, str] = {}
        truncated = False
        for registration, answer in zip(registrations, answers, strict=True):
            if isinstance(answer, RestError):
                unreachable[registration.task_manager_id] = "; ".join(answer.errors)
                continue
            if isinstance(answer, BaseException):
                raise answer
            truncated = truncated or answer.truncated
            merged.update(dict.fromkeys(answer.records))
        if registrations and len(unreachable) == len(registrations):
            reasons = "; ".join(f"{tm}: {reason}" for tm, reason in sorted(unreachable.items()))
            raise RestError(503, f"No TaskManager answered with the job's log lines ({reasons}).")
        # Each TaskManager's records are in order; merged by their time stamps (a stable sort).
        records = sorted(merged, key=lambda record: record[:_STAMP_LENGTH])
        kept, size = [], 0
        for record in reversed(records):
            size += len(record.encode("utf-8", "replace")) + 1
            if size > MAX_ANSWER_BYTES:
                truncated = True
                break
            kept.append(record)
        kept.reverse()
        return kept, truncated, unreachable

    return router


# -- helpers ------------------------------------------------------------------------------------


def _next_since(records: list[str], since: str) -> str:
    """Where the next poll starts: NEXT_OVERLAP before the newest line (never before `since`).

    The overlap catches lines written a moment after their time stamp was taken (another
    thread held the file) and hosts whose clocks differ by less; the reader drops what it
    printed already.
    """
    if not records:
        return since
    try:
        newest = datetime.datetime.strptime(records[-1][:_STAMP_LENGTH], _STAMP_FORMAT)
    except ValueError:  # not a stamp of ours (a different log format): start where this one did
        return since
    earlier = (newest - NEXT_OVERLAP).strftime(_STAMP_FORMAT)[:_STAMP_LENGTH]  # %f: micro- to milliseconds
    return max(earlier, since)


def _log_list(files: LogFiles) -> dict[str, Any]:
    return {"logs": [{"name": info.name, "size": info.size, "mtime": info.mtime} for info in files.files]}


def _name_of_kind(files: LogFiles, kind: str, who: str) -> str:
    name = files.log_name if kind == "log" else files.out_name
    if not name:
        raise RestError(404, f"{who} writes no log files (started without them, e.g. in-process; see env.log.dir).")
    return name


def _range_of(request: Request) -> ByteRange | None:
    header = request.headers.get("range")
    if header is None:
        return None
    try:
        return parse_range(header)
    except InvalidRange as exc:
        raise RestError(400, str(exc)) from None


def _file_request(name: str, byte_range: ByteRange | None) -> RequestLogFile:
    if byte_range is None:
        return RequestLogFile(name=name, max_bytes=MAX_ANSWER_BYTES)
    return RequestLogFile(name=name, first=byte_range.first, last=byte_range.last, max_bytes=MAX_ANSWER_BYTES)


def _file_response(answer: LogFileChunk | LogFileRefused) -> Response:
    if isinstance(answer, LogFileRefused):
        status = REFUSAL_STATUS.get(answer.kind, 404)
        if status != 416:
            raise RestError(status, answer.reason)
        # RFC 9110: a 416 says how long the file is.
        return JSONResponse({"errors": [answer.reason]}, 416, {"Content-Range": f"bytes */{answer.file_size}"})
    headers = {"Accept-Ranges": "bytes"}
    if answer.partial and answer.data:
        last = answer.offset + len(answer.data) - 1
        headers["Content-Range"] = f"bytes {answer.offset}-{last}/{answer.file_size}"
        return Response(answer.data, status_code=206, media_type=TEXT, headers=headers)
    return Response(answer.data, media_type=TEXT, headers=headers)
