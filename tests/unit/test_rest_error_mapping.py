"""rest/errors.py, the one place the JobManager's typed refusals become HTTP answers:
each kind's status and Flink's `{"errors": [...]}` body, through a real FastAPI app."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from flink_runtime.jobgraph.validation import InvalidJobGraph
from flink_runtime.jobmanager import errors
from flink_runtime.rest.errors import STATUS_OF_REFUSAL, RestError, install_error_handlers

EXPECTED = [
    (errors.JobNotFound, 404),
    (errors.VertexNotFound, 404),
    (errors.TaskManagerNotFound, 404),
    (errors.RequestNotFound, 404),
    (errors.JobNotRunning, 409),
    (errors.JobAlreadyEnded, 409),
    (errors.OperationInProgress, 409),
    (errors.DuplicateJob, 409),
    (errors.InvalidRequest, 400),
    (errors.NotAccepted, 503),
]


def client_raising(error: Exception) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refused")
    async def refused() -> None:
        raise error

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("kind", "status"), EXPECTED)
def test_each_refusal_answers_its_status_and_flinks_error_body(kind: type[errors.JobRequestError], status: int) -> None:
    answer = client_raising(kind(f"{kind.__name__}: what went wrong")).get("/refused")
    assert answer.status_code == status
    assert answer.json() == {"errors": [f"{kind.__name__}: what went wrong"]}


def test_every_refusal_the_jobmanager_has_is_mapped() -> None:
    kinds = {
        kind for kind in vars(errors).values() if isinstance(kind, type) and issubclass(kind, errors.JobRequestError)
    }
    assert kinds - {errors.JobRequestError} == set(STATUS_OF_REFUSAL) == {kind for kind, _ in EXPECTED}


def test_an_invalid_job_graph_lists_each_problem() -> None:
    answer = client_raising(InvalidJobGraph(["vertices[0].parallelism: must be >= 1", "edges[1]: unknown"])).get(
        "/refused"
    )
    assert answer.status_code == 400
    assert answer.json() == {"errors": ["vertices[0].parallelism: must be >= 1", "edges[1]: unknown"]}


def test_a_rest_error_keeps_its_status_and_messages() -> None:
    answer = client_raising(RestError(413, "too big", "by 3 bytes")).get("/refused")
    assert answer.status_code == 413 and answer.json() == {"errors": ["too big", "by 3 bytes"]}
