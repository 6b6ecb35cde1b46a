"""The REST layer of savepoints, stops and checkpoints, against a stub JobManager.

Only the HTTP side is under test here: paths, body field names, status codes and the
mapping of the JobManager's refusals (jobmanager/errors.py) to `{"errors": [...]}`. The stub records how it was
called and answers like the JobManager's contract (jobmanager.py, "savepoints and
checkpoints"); the JobManager itself is tested elsewhere.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flink_runtime.blob import BlobStore
from flink_runtime.configuration import Configuration
from flink_runtime.jobmanager.errors import JobNotFound, JobNotRunning, OperationInProgress, RequestNotFound
from flink_runtime.rest.app import create_app
from tests.flink_shapes import assert_flink_shape

JOB_ID = "0123456789abcdef0123456789abcdef"
OTHER_JOB = "fedcba9876543210fedcba9876543210"
REQUEST_ID = "5a1b2c3d4e5f60718293a4b5c6d7e8f9"


class StubJobManager:
    """Just what the routes call: one RUNNING job (JOB_ID) and one FINISHED one (OTHER_JOB)."""

    def __init__(self, blob_dir: str) -> None:
        self.blob_dir = blob_dir
        self.blob_store = BlobStore(blob_dir)
        self.calls: list[tuple[Any, ...]] = []
        self.statuses: dict[str, dict[str, Any]] = {REQUEST_ID: {"status": {"id": "IN_PROGRESS"}}}
        self.operations = self  # the JobManager's operations gateway (jobmanager/operations.py), stubbed here too

    def _check_running(self, job_id: str) -> None:
        if job_id == OTHER_JOB:
            raise JobNotRunning(f"Job {job_id} is FINISHED, not RUNNING.")
        if job_id != JOB_ID:
            raise JobNotFound(f"Job {job_id} not found.")

    async def trigger_savepoint(
        self, job_id: str, target_directory: str | None, cancel_job: bool, trigger_id: str | None = None
    ) -> str:
        self.calls.append(("trigger_savepoint", job_id, target_directory, cancel_job))
        self._check_running(job_id)
        return trigger_id or REQUEST_ID

    async def stop_with_savepoint(
        self, job_id: str, target_directory: str | None, drain: bool, trigger_id: str | None = None
    ) -> str:
        self.calls.append(("stop_with_savepoint", job_id, target_directory, drain))
        self._check_running(job_id)
        return trigger_id or REQUEST_ID

    def savepoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        self.calls.append(("savepoint_status", job_id, request_id))
        if job_id != JOB_ID or request_id not in self.statuses:
            raise RequestNotFound(f"no savepoint request {request_id} for job {job_id}")
        return self.statuses[request_id]

    async def trigger_checkpoint(self, job_id: str, trigger_id: str | None = None) -> str:
        self.calls.append(("trigger_checkpoint", job_id, trigger_id))
        self._check_running(job_id)
        return trigger_id or REQUEST_ID

    def checkpoint_status(self, job_id: str, request_id: str) -> dict[str, Any]:
        self.calls.append(("checkpoint_status", job_id, request_id))
        if job_id != JOB_ID or request_id not in self.statuses:
            raise RequestNotFound(f"There is no checkpoint operation with triggerId={request_id} for job {job_id}.")
        return self.statuses[request_id]

    def checkpoint_details(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        self.calls.append(("checkpoint_details", job_id, checkpoint_id))
        if checkpoint_id != 2:
            raise RequestNotFound(f"Could not find checkpointing statistics for checkpoint {checkpoint_id}.")
        return {"id": 2}

    def checkpoint_config(self, job_id: str) -> dict[str, Any]:
        self.calls.append(("checkpoint_config", job_id))
        return {"interval": 2000}

    def checkpoint_stats(self, job_id: str) -> dict[str, Any]:
        self.calls.append(("checkpoint_stats", job_id))
        if job_id != JOB_ID:
            raise JobNotFound(f"Job {job_id} not found.")
        return {"counts": {"restored": 0, "total": 2, "in_progress": 0, "completed": 2, "failed": 0}}


@pytest.fixture
def jobmanager(tmp_path: Path) -> StubJobManager:
    return StubJobManager(str(tmp_path / "blobs"))


@pytest.fixture
def rest(jobmanager: StubJobManager) -> Iterator[TestClient]:
    app = create_app(jobmanager, Configuration())  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


# -- POST /jobs/:id/savepoints ------------------------------------------------------------------


def test_trigger_savepoint_answers_202_with_the_request_id(rest: TestClient, jobmanager: StubJobManager) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", json={"target-directory": "/sp", "cancel-job": True})
    assert answer.status_code == 202
    assert answer.json() == {"request-id": REQUEST_ID}
    assert jobmanager.calls == [("trigger_savepoint", JOB_ID, "/sp", True)]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"target-directory": None},
        {"target-directory": None, "cancel-job": False, "formatType": "CANONICAL", "triggerId": None},
        {"formatType": "NATIVE"},  # accepted, as from Flink's client; the format is ours
    ],
)
def test_trigger_savepoint_defaults(rest: TestClient, jobmanager: StubJobManager, body: dict[str, Any]) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", json=body)
    assert answer.status_code == 202
    assert jobmanager.calls == [("trigger_savepoint", JOB_ID, None, False)]


def test_an_empty_body_means_every_default(rest: TestClient, jobmanager: StubJobManager) -> None:
    assert rest.post(f"/jobs/{JOB_ID}/savepoints").status_code == 202
    assert rest.post(f"/jobs/{JOB_ID}/stop", content=b"  ").status_code == 202
    assert jobmanager.calls == [
        ("trigger_savepoint", JOB_ID, None, False),
        ("stop_with_savepoint", JOB_ID, None, False),
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cancel-job": "yes"}, "cancel-job"),
        ({"target-directory": 7}, "target-directory"),
        ({"formatType": "PARQUET"}, "formatType"),
        # Stop's camel-case name on the savepoint endpoint: refused, not ignored.
        ({"cancelJob": True}, "cancelJob"),
        ({"targetDirectory": "/sp"}, "targetDirectory"),
    ],
)
def test_a_malformed_savepoint_body_is_400_naming_the_field(
    rest: TestClient, jobmanager: StubJobManager, body: dict[str, Any], field: str
) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", json=body)
    assert answer.status_code == 400
    (error,) = answer.json()["errors"]
    assert field in error
    assert "target-directory, cancel-job, formatType" in error  # what it does accept
    assert jobmanager.calls == []


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "not JSON"), (b"[1, 2]", "Expected `object`"), (b"null", "Expected `object`")],
)
def test_a_body_that_is_no_json_object_is_400(rest: TestClient, content: bytes, message: str) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert message in answer.json()["errors"][0]


@pytest.mark.parametrize("path", ["savepoints", "stop"])
def test_a_client_chosen_trigger_id_is_passed_on(rest: TestClient, path: str) -> None:
    chosen = "00112233445566778899aabbccddeeff"
    answer = rest.post(f"/jobs/{JOB_ID}/{path}", json={"triggerId": chosen})
    assert answer.status_code == 202
    assert answer.json() == {"request-id": chosen}


@pytest.mark.parametrize("trigger_id", ["../../etc", "short", "x" * 32, ""])
def test_a_malformed_trigger_id_is_400(rest: TestClient, jobmanager: StubJobManager, trigger_id: str) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", json={"triggerId": trigger_id})
    assert answer.status_code == 400
    assert "triggerId" in answer.json()["errors"][0]
    assert jobmanager.calls == []


@pytest.mark.parametrize(
    ("job_id", "status", "message"),
    [(OTHER_JOB, 409, "not RUNNING"), ("feedfeedfeedfeedfeedfeedfeedfeed", 404, "not found")],
)
@pytest.mark.parametrize("path", ["savepoints", "stop"])
def test_jobmanager_refusals_keep_their_status_and_message(
    rest: TestClient, job_id: str, status: int, message: str, path: str
) -> None:
    answer = rest.post(f"/jobs/{job_id}/{path}", json={})
    assert answer.status_code == status
    (error,) = answer.json()["errors"]
    assert message in error and job_id in error


def test_a_savepoint_already_in_progress_is_a_409(rest: TestClient, jobmanager: StubJobManager) -> None:
    async def busy(*args: Any) -> str:
        raise OperationInProgress("Job has savepoint request abc in progress")

    jobmanager.trigger_savepoint = busy  # type: ignore[method-assign]
    answer = rest.post(f"/jobs/{JOB_ID}/savepoints", json={})
    assert (answer.status_code, answer.json()) == (409, {"errors": ["Job has savepoint request abc in progress"]})


# -- POST /jobs/:id/stop ------------------------------------------------------------------------


def test_stop_answers_202_with_the_request_id(rest: TestClient, jobmanager: StubJobManager) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/stop", json={"targetDirectory": "/sp", "drain": True})
    assert answer.status_code == 202
    assert answer.json() == {"request-id": REQUEST_ID}
    assert jobmanager.calls == [("stop_with_savepoint", JOB_ID, "/sp", True)]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"drain": "no"}, "drain"),
        ({"target-directory": "/sp"}, "target-directory"),
        ({"targetDirectory": 1}, "$.targetDirectory"),
    ],
)
def test_a_malformed_stop_body_is_400_naming_the_field(
    rest: TestClient, jobmanager: StubJobManager, body: dict[str, Any], field: str
) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/stop", json=body)
    assert answer.status_code == 400
    (error,) = answer.json()["errors"]
    assert field in error
    assert "targetDirectory, drain, formatType" in error
    assert jobmanager.calls == []


# -- GET /jobs/:id/savepoints/:triggerid ----------------------------------------------------------


FAILURE = {"class": "OSError", "stack-trace": "OSError: disk full\nTraceback ..."}


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        ({"status": {"id": "IN_PROGRESS"}}, {"status": {"id": "IN_PROGRESS"}, "operation": None}),
        (
            {"status": {"id": "COMPLETED"}, "operation": {"location": "file:///sp/savepoint-012345-abcdef"}},
            {"status": {"id": "COMPLETED"}, "operation": {"location": "file:///sp/savepoint-012345-abcdef"}},
        ),
    ],
)
def test_savepoint_status_is_the_jobmanagers_answer(
    rest: TestClient, jobmanager: StubJobManager, status: dict[str, Any], answer: dict[str, Any]
) -> None:
    jobmanager.statuses[REQUEST_ID] = status
    response = rest.get(f"/jobs/{JOB_ID}/savepoints/{REQUEST_ID}")
    assert (response.status_code, response.json()) == (200, answer)
    assert jobmanager.calls == [("savepoint_status", JOB_ID, REQUEST_ID)]


@pytest.mark.parametrize("path", ["savepoints", "checkpoints"])
def test_a_failure_cause_gets_the_serialized_throwable_flinks_client_reads(
    rest: TestClient, jobmanager: StubJobManager, path: str
) -> None:
    jobmanager.statuses[REQUEST_ID] = {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": FAILURE}}
    answer = rest.get(f"/jobs/{JOB_ID}/{path}/{REQUEST_ID}").json()
    assert_flink_shape(answer, "savepoint_status_failed")
    cause = answer["operation"]["failure-cause"]
    assert {key: cause[key] for key in FAILURE} == FAILURE
    assert base64.b64decode(cause["serialized-throwable"])[:4] == bytes.fromhex("ACED0005")


def test_an_unknown_request_id_is_404(rest: TestClient) -> None:
    answer = rest.get(f"/jobs/{JOB_ID}/savepoints/nope")
    assert answer.status_code == 404
    assert answer.json() == {"errors": [f"no savepoint request nope for job {JOB_ID}"]}


# -- GET /jobs/:id/checkpoints -------------------------------------------------------------------


def test_checkpoint_stats(rest: TestClient) -> None:
    answer = rest.get(f"/jobs/{JOB_ID}/checkpoints")
    assert answer.status_code == 200
    assert answer.json()["counts"]["completed"] == 2
    missing = rest.get(f"/jobs/{OTHER_JOB}/checkpoints")
    assert missing.status_code == 404 and "not found" in missing.json()["errors"][0]


# -- POST /jobs/:id/checkpoints, GET /jobs/:id/checkpoints/... ------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"checkpointType": "FULL"},
        {"checkpointType": "INCREMENTAL"},
        {"checkpointType": "CONFIGURED", "triggerId": None},  # what Flink's CLI sends
        {"checkpointType": None},
    ],
)
def test_trigger_checkpoint_answers_202_with_the_request_id(
    rest: TestClient, jobmanager: StubJobManager, body: dict[str, Any]
) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/checkpoints", json=body)
    assert (answer.status_code, answer.json()) == (202, {"request-id": REQUEST_ID})
    assert_flink_shape(answer.json(), "checkpoint_trigger")
    assert jobmanager.calls == [("trigger_checkpoint", JOB_ID, None)]


def test_trigger_checkpoint_passes_the_trigger_id_on(rest: TestClient, jobmanager: StubJobManager) -> None:
    chosen = "00112233445566778899aabbccddeeff"
    answer = rest.post(f"/jobs/{JOB_ID}/checkpoints", json={"checkpointType": "FULL", "triggerId": chosen})
    assert (answer.status_code, answer.json()) == (202, {"request-id": chosen})
    assert rest.post(f"/jobs/{JOB_ID}/checkpoints").status_code == 202  # no body: every default


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"checkpointType": "DIFFERENTIAL"}, "checkpointType"),
        ({"checkpointType": 1}, "checkpointType"),
        ({"triggerId": "not-hex"}, "triggerId"),
        ({"triggerId": 12}, "triggerId"),
        ({"target-directory": "/sp"}, "target-directory"),
    ],
)
def test_a_malformed_checkpoint_body_is_400_naming_the_field(
    rest: TestClient, jobmanager: StubJobManager, body: dict[str, Any], field: str
) -> None:
    answer = rest.post(f"/jobs/{JOB_ID}/checkpoints", json=body)
    assert answer.status_code == 400
    (error,) = answer.json()["errors"]
    assert field in error
    assert jobmanager.calls == []


@pytest.mark.parametrize(("job_id", "status"), [(OTHER_JOB, 409), ("feedfeedfeedfeedfeedfeedfeedfeed", 404)])
def test_checkpoint_refusals_keep_their_status(rest: TestClient, job_id: str, status: int) -> None:
    answer = rest.post(f"/jobs/{job_id}/checkpoints", json={})
    assert answer.status_code == status and job_id in answer.json()["errors"][0]


@pytest.mark.parametrize(
    ("status", "recorded"),
    [
        ({"status": {"id": "IN_PROGRESS"}}, "checkpoint_status_first"),
        ({"status": {"id": "COMPLETED"}, "operation": {"checkpointId": 3}}, "checkpoint_status_completed"),
    ],
)
def test_checkpoint_status_has_flinks_shape(
    rest: TestClient, jobmanager: StubJobManager, status: dict[str, Any], recorded: str
) -> None:
    jobmanager.statuses[REQUEST_ID] = status
    answer = rest.get(f"/jobs/{JOB_ID}/checkpoints/{REQUEST_ID}")
    assert answer.status_code == 200
    assert answer.json() == {"operation": None, **status}
    assert_flink_shape(answer.json(), recorded)


def test_an_unknown_checkpoint_request_is_404(rest: TestClient) -> None:
    answer = rest.get(f"/jobs/{JOB_ID}/checkpoints/{'0' * 32}")
    assert answer.status_code == 404
    assert "no checkpoint operation with triggerId=" in answer.json()["errors"][0]


def test_checkpoint_config_and_details_are_not_taken_for_trigger_ids(
    rest: TestClient, jobmanager: StubJobManager
) -> None:
    assert rest.get(f"/jobs/{JOB_ID}/checkpoints/config").json() == {"interval": 2000}
    assert rest.get(f"/jobs/{JOB_ID}/checkpoints/details/2").json() == {"id": 2}
    unknown = rest.get(f"/jobs/{JOB_ID}/checkpoints/details/999999")
    assert unknown.status_code == 404 and "checkpoint 999999" in unknown.json()["errors"][0]
    assert rest.get(f"/jobs/{JOB_ID}/checkpoints/details/two").status_code == 400
    assert [call[0] for call in jobmanager.calls] == ["checkpoint_config", "checkpoint_details", "checkpoint_details"]


# -- OpenAPI -------------------------------------------------------------------------------------


def test_openapi_documents_the_savepoint_paths_and_bodies(rest: TestClient) -> None:
    document = rest.get("/openapi.json").json()
    paths = document["paths"]
    assert paths["/jobs/{job_id}/savepoints"]["post"]["summary"]
    assert paths["/jobs/{job_id}/savepoints/{triggerid}"]["get"]["summary"]
    assert paths["/jobs/{job_id}/stop"]["post"]["summary"]
    assert paths["/jobs/{job_id}/checkpoints"]["get"]["summary"]
    assert paths["/jobs/{job_id}/checkpoints"]["post"]["summary"]
    assert paths["/jobs/{job_id}/checkpoints/{triggerid}"]["get"]["summary"]
    assert paths["/jobs/{job_id}/checkpoints/config"]["get"]["summary"]
    assert paths["/jobs/{job_id}/checkpoints/details/{checkpoint_id}"]["get"]["summary"]

    def body_fields(path: str) -> set[str]:
        schema = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        return set(schema["properties"])

    assert {"target-directory", "cancel-job", "formatType"} <= body_fields("/jobs/{job_id}/savepoints")
    assert {"targetDirectory", "drain", "formatType"} <= body_fields("/jobs/{job_id}/stop")
    assert {"checkpointType", "triggerId"} <= body_fields("/jobs/{job_id}/checkpoints")
    responses = paths["/jobs/{job_id}/savepoints"]["post"]["responses"]
    assert {"202", "400", "404", "409"} <= set(responses)
