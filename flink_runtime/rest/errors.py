"""How the REST API answers errors: always `{"errors": [...]}` with a 4xx/5xx status,
as Flink's REST API does. Route modules raise RestError for what is wrong with the
HTTP request itself, and let the JobManager's typed refusals (jobmanager/errors.py,
raised by its RestfulGateway) through: STATUS_OF_REFUSAL below is the one place that
decides which status answers each; the handlers installed here turn both into JSON."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flink_runtime.jobgraph.validation import InvalidJobGraph
from flink_runtime.jobmanager.errors import (
    DuplicateJob,
    InvalidRequest,
    JobAlreadyEnded,
    JobNotFound,
    JobNotRunning,
    JobRequestError,
    NotAccepted,
    OperationInProgress,
    RequestNotFound,
    TaskManagerNotFound,
    VertexNotFound,
)
from flink_runtime.rest.guard import internal_error


class RestError(Exception):
    def __init__(self, status: int, *errors: str) -> None:
        super().__init__("; ".join(errors))
        self.status = status
        self.errors = list(errors)


# How the JobManager's refusals are answered (the most specific kind listed wins).
STATUS_OF_REFUSAL: dict[type[JobRequestError], int] = {
    JobNotFound: 404,
    VertexNotFound: 404,
    TaskManagerNotFound: 404,
    RequestNotFound: 404,
    JobNotRunning: 409,
    JobAlreadyEnded: 409,
    OperationInProgress: 409,
    DuplicateJob: 409,
    InvalidRequest: 400,
    NotAccepted: 503,
}


def status_of_refusal(error: JobRequestError) -> int:
    """The status of the nearest kind of `error` listed (400 for one not listed)."""
    return next((STATUS_OF_REFUSAL[kind] for kind in type(error).__mro__ if kind in STATUS_OF_REFUSAL), 400)


def error_response(status: int, errors: list[str]) -> JSONResponse:
    return JSONResponse({"errors": errors}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RestError)
    async def rest_error(request: Request, exc: RestError) -> JSONResponse:
        return error_response(exc.status, exc.errors)

    @app.exception_handler(JobRequestError)
    async def job_request_error(request: Request, exc: JobRequestError) -> JSONResponse:
        return error_response(status_of_refusal(exc), [exc.message])

    @app.exception_handler(InvalidJobGraph)
    async def invalid_job_graph(request: Request, exc: InvalidJobGraph) -> JSONResponse:
        return error_response(400, exc.errors)  # every problem of the JobGraph, each named

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "Not found: " + request.url.path if exc.status_code == 404 else str(exc.detail)
        return error_response(exc.status_code, [message])

    @app.exception_handler(Exception)
    async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
        status, body = internal_error(request.scope, exc)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        return error_response(400, errors)
