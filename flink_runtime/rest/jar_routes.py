"""REST: what Flink clients send to run a Java program, answered with why it cannot run here.

Flink's CLI (`flink run app.jar`, `flink run -py job.py`) builds a JobGraph in its own
JVM and submits it as `POST /jobs` with a multipart body: a Java-serialized JobGraph
plus the JARs it needs. Flink's web UI uploads JARs with `POST /jars/upload` and runs
them with `POST /jars/:jarid/run`. This JobManager runs JobGraph JSON whose tasks do
their work with PySpark; it cannot deserialize a Java object or run a JAR.

The answer must reach the client: a server that answers before reading the body and
closes the connection (what a 415 from the guard used to do) leaves Flink's client
writing into a closed socket, and it retries for 96 s before it ends with "Channel
became inactive" and no reason. So the body is read to its end (and dropped, never
kept: up to MAX_PROGRAM_BYTES) and the answer is a 400 whose `errors` say what to use
instead; Flink's RestClient does not retry a 4xx, and its CLI prints the errors.

`GET /jars` answers Flink's empty JarListInfo (no JAR was ever uploaded), so the web
UI's "Submit New Job" page shows an empty list instead of an error.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from flink_runtime.rest.errors import error_response

MULTIPART = "multipart/form-data"
# Flink's CLI uploads the flink-python JAR (~50 MB) and the user's; a body past this is
# not read further (the connection is closed after the answer, as any server would).
MAX_PROGRAM_BYTES = 1 << 30

WHAT_TO_USE = (
    "Submit a JobGraph as JSON instead: `flink-runtime run job.json` (the JobGraph JSON that "
    "flink_runtime.pipeline.Pipeline(...).job_graph() or `flink-runtime plan` writes), "
    "flink_runtime.client.JobClient(url).submit(graph) from Python, or POST /jobs with "
    "Content-Type: application/json (its schema: GET /openapi.json, components JobGraph)."
)


def is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == MULTIPART


async def drain(request: Request) -> int:
    """Read the request body to its end (or MAX_PROGRAM_BYTES), keeping nothing; its size."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_PROGRAM_BYTES:
            break
    return size


def _parts(request: Request) -> str:
    """What the upload declared it carries (its content type), for the message."""
    return request.headers.get("content-type", "").split(";")[0].strip() or "no content type"


async def refuse_java_job_graph(request: Request) -> JSONResponse:
    """POST /jobs with Flink's multipart body (a Java-serialized JobGraph and JARs)."""
    size = await drain(request)
    return error_response(
        400,
        [
            f"This cluster cannot run a Java-serialized JobGraph or JARs (POST /jobs sent {_parts(request)}, "
            f"{size} bytes, as `flink run` does): flink-runtime is a Python JobManager whose tasks run "
            "PySpark; it runs JobGraph JSON only. " + WHAT_TO_USE
        ],
    )


def jar_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/jars", summary="Uploaded JARs (Flink's JarListInfo): always none, JARs cannot run here")
    async def jars() -> dict[str, Any]:
        return {"address": "", "files": []}

    @router.post(
        "/jars/upload",
        summary="Refused: a JAR cannot run on this cluster (the answer says what to use instead)",
        responses={400: {"description": "Always: why, and what to submit instead."}},
    )
    async def upload_jar(request: Request) -> JSONResponse:
        size = await drain(request)
        return error_response(
            400,
            [
                f"This cluster cannot run JARs (the upload was {size} bytes of {_parts(request)}): flink-runtime "
                "is a Python JobManager whose tasks run PySpark. " + WHAT_TO_USE
            ],
        )

    @router.post("/jars/{jar_id}/run", summary="Refused: no JAR was uploaded (JARs cannot run here)")
    async def run_jar(jar_id: str, request: Request) -> JSONResponse:
        await drain(request)
        return error_response(404, [f"No JAR {jar_id!r}: this cluster keeps no JARs and cannot run one. {WHAT_TO_USE}"])

    @router.get("/jars/{jar_id}/plan", summary="Refused: no JAR was uploaded")
    async def jar_plan(jar_id: str) -> JSONResponse:
        return error_response(404, [f"No JAR {jar_id!r}: this cluster keeps no JARs. {WHAT_TO_USE}"])

    return router
